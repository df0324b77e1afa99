"""The benchmark runs its workloads and saves what it printed (no timing assertions)."""

from __future__ import annotations

import json

from gradcheck.bench import engine_ratios, markdown, run_bench
from gradcheck.cli import main


def test_bench_rows_cover_every_checker_and_size():
    rows = run_bench(sizes=(10, 20), big=100, repeat=1, chain=(100, 8))
    checkers = {(r.checker, r.n) for r in rows}
    for n in (10, 20):
        assert ("gradcheck", n) in checkers
        assert ("torch.autograd.gradcheck", n) in checkers
        assert ("torch.autograd.gradcheck fast_mode", n) in checkers
    assert ("gradcheck", 100) in checkers
    assert all(r.seconds > 0 and r.verified for r in rows)
    from gradcheck.bench import CHAINS

    for label in CHAINS:
        passes = {r.checker for r in rows if r.workload.endswith(f"({label})")}
        assert passes == {"engine forward", "engine backward", "torch forward",
                          "torch backward"}
    table = markdown(rows)
    for r in rows:
        assert f"| {r.checker} |" in table
    ratios = engine_ratios(rows)
    assert len(ratios) == 2 * len(CHAINS)
    assert all(k.startswith("engine") and k.endswith("]") for k in ratios)
    assert all(v > 0 for v in ratios.values())


def test_bench_command_saves_json_and_markdown(tmp_path, monkeypatch, capsys):
    import gradcheck.bench as bench

    real = bench.run_bench
    monkeypatch.setattr(bench, "run_bench",
                        lambda progress=None: real(sizes=(10,), big=50, repeat=1,
                                                   chain=(100, 8), progress=progress))
    assert main(["bench", "--out", str(tmp_path)]) == 0
    saved = json.loads((tmp_path / "bench.json").read_text())
    assert {r["checker"] for r in saved["rows"]} >= {"gradcheck", "torch.autograd.gradcheck",
                                                     "engine forward"}
    assert len(saved["ratios"]) == 4
    assert (tmp_path / "bench.md").read_text() in capsys.readouterr().out
