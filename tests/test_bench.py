"""``gradcheck bench --quick`` runs every workload and saves what it printed: the
structure of the table, never its timings."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import math
import re
import sys
from dataclasses import replace

import pytest

from gradcheck.cli.bench import (CHAINS, QUICK, SECTIONS, TEMPLATES, count_ops, formula_of_size,
                                 markdown, random_formula, run_bench, size_goal, to_json)
from gradcheck.cli.bench.speed import workloads_of
from gradcheck.cli.main import main

JAX = importlib.util.find_spec("jax") is not None
ROW_KEYS = {"section", "name", "sizes", "seconds", "runs", "ratio", "ratio_of", "verified",
            "target", "met", "extra"}


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """One ``gradcheck bench --quick`` run: (json, markdown, stdout, stderr)."""
    out = tmp_path_factory.mktemp("bench")
    stdout, stderr = io.StringIO(), io.StringIO()
    # run from there: the bench writes only inside the project it runs in
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr), \
            pytest.MonkeyPatch.context() as mp:
        mp.chdir(out)
        assert main(["bench", "--quick", "--out", str(out)]) == 0
    return (json.loads((out / "bench.json").read_text(encoding="utf-8")),
            (out / "bench.md").read_text(encoding="utf-8"), stdout.getvalue(),
            stderr.getvalue())


def rows(saved, section):
    return [r for r in saved["rows"] if r["section"] == section]


def test_json_has_every_section_with_notes_and_rows_that_say_what_they_verified(quick):
    saved = quick[0]
    assert saved["version"] == 2 and saved["quick"] is True
    assert [s["id"] for s in saved["sections"]] == list(SECTIONS)
    for s in saved["sections"]:
        assert s["title"] == SECTIONS[s["id"]] and s["notes"]
        assert all(a["name"] and a["reason"] for a in s["absent"])
        assert rows(saved, s["id"]), s["id"]
    assert {"python", "numpy", "sympy", "torch", "cpus"} <= set(saved["environment"])
    for r in saved["rows"]:
        assert set(r) == ROW_KEYS
        assert r["section"] in SECTIONS and r["name"] and r["sizes"]
        assert isinstance(r["verified"], str) and len(r["verified"]) > 10, r
        assert r["runs"] >= 1
        assert r["seconds"] is not None or r["ratio"] is not None or r["extra"].get(
            "capped"), r
        if r["ratio"] is not None:
            assert r["ratio_of"]
        # a quick run has targets but does not assess them
        assert r["met"] is None


def test_checkers_section_has_every_checker_at_every_size(quick):
    saved = quick[0]
    got = {(r["name"], r["sizes"]["n"]) for r in rows(saved, "checkers")}
    names = ["gradcheck", "gradcheck, compiled reference reused",
             "torch.autograd.gradcheck", "torch.autograd.gradcheck fast_mode"]
    section = next(s for s in saved["sections"] if s["id"] == "checkers")
    if JAX:
        names += ["jax.test_util.check_grads", "jax.test_util.check_grads, first call"]
    else:
        assert any("jax" in a["name"] and "not importable" in a["reason"]
                   for a in section["absent"])
    for n in QUICK.sizes:
        for name in names:
            assert (name, n) in got
    assert ("gradcheck", QUICK.big) in got
    for r in rows(saved, "checkers"):
        if r["name"] != "gradcheck":
            assert r["ratio"] is not None and "gradcheck" in r["ratio_of"]
    verified = {r["name"]: r["verified"] for r in rows(saved, "checkers")}
    assert "every element" in verified["gradcheck"]
    assert "every element of the Jacobian" in verified["torch.autograd.gradcheck"]
    assert "one random projection" in verified["torch.autograd.gradcheck fast_mode"]
    if JAX:
        assert "one random projection" in verified["jax.test_util.check_grads"]


def test_memory_section_has_time_and_peak_memory_against_targets(quick):
    saved = quick[0]
    by = {r["name"]: r for r in rows(saved, "memory")}
    time_row = by["gradcheck, every witness: wall time"]
    memory_row = by["gradcheck, every witness: peak memory"]
    assert time_row["sizes"] == {"n": QUICK.memory_n} and time_row["seconds"] > 0
    assert time_row["target"] and memory_row["target"]
    extra = memory_row["extra"]
    assert extra["input_bytes"] == 8 * QUICK.memory_n and extra["peak_bytes"] >= 0
    assert extra["method"] in ("VmHWM", "ru_maxrss")
    assert memory_row["ratio"] == pytest.approx(extra["peak_bytes"] / extra["input_bytes"])
    assert all(w in time_row["verified"] for w in ("engine", "torch", "numeric"))


def test_compile_section_has_both_ways_for_every_formula(quick):
    saved = quick[0]
    compile_rows = rows(saved, "compile")
    kinds = {(r["name"], r["sizes"]["depth"], r["extra"]["large"]) for r in compile_rows}
    for depth in QUICK.depths:
        assert ("Reference (gradcheck.reference)", depth, False) in kinds
        assert ("sympy.diff + lambdify(cse=True)", depth, False) in kinds
    large = [r for r in compile_rows if r["extra"]["large"]]
    assert {r["name"] for r in large} == {"Reference (gradcheck.reference)",
                                         "sympy.diff + lambdify(cse=True)"}
    assert abs(large[0]["sizes"]["ops"] - QUICK.large_ops) <= 0.1 * QUICK.large_ops
    assert next(r for r in large if r["name"].startswith("Reference"))["target"]
    for r in compile_rows:
        assert r["sizes"]["inputs"] == 8 and r["extra"]["formula"]
        if r["name"].startswith("sympy") and r["ratio"] is not None:
            assert r["extra"]["agrees"] is True  # both give the same gradient


def test_engine_section_has_every_pass_and_both_ratios_per_chain(quick):
    saved = quick[0]
    for label in CHAINS:
        chain = {r["name"]: r for r in rows(saved, "engine") if r["sizes"]["chain"] == label}
        assert set(chain) == {"engine forward", "engine backward", "torch forward",
                              "torch backward", "engine backward / engine forward",
                              "engine / torch (forward + backward)"}
        for name in ("engine backward / engine forward",
                     "engine / torch (forward + backward)"):
            assert chain[name]["ratio"] > 0 and chain[name]["target"].startswith("<=")


def test_markdown_is_what_was_printed_and_shows_every_row(quick):
    saved, table, stdout, _ = quick
    assert table in stdout
    for section in SECTIONS.values():
        assert f"## {section}" in table
    assert "| workload | size | seconds | runs | ratio | verified | target | target met |" \
        in table
    lines = [line for line in table.splitlines() if line.startswith("| ")]
    assert len(lines) == len(saved["rows"]) + len(SECTIONS)  # rows + one header each
    for r in saved["rows"]:
        assert any(line.startswith(f"| {r['name']}") for line in lines), r["name"]
    assert "not assessed (quick sizes)" in table


def test_progress_goes_to_stderr_one_line_as_each_workload_starts_and_ends(quick):
    stderr = quick[3]
    starts = re.findall(r"^bench: \[(\d+)/(\d+)\] start ", stderr, re.M)
    dones = re.findall(r"^bench: \[(\d+)/(\d+)\] done ", stderr, re.M)
    assert starts and len(starts) == len(dones) == int(starts[0][1])
    assert "| workload |" not in stderr


def test_jax_section_is_absent_with_a_reason_when_jax_cannot_be_imported(monkeypatch):
    monkeypatch.setitem(sys.modules, "jax", None)  # `import jax` raises ImportError
    report = run_bench(replace(QUICK, sizes=(10,), big=20), sections=("checkers",))
    assert list(report.notes) == ["checkers"]
    assert not any("jax" in r.name for r in report.rows)
    (absent,) = report.absent["checkers"]
    assert absent["name"] == "jax.test_util.check_grads"
    assert "jax is not importable" in absent["reason"]
    assert "**absent**: jax.test_util.check_grads: jax is not importable" in markdown(report)
    assert to_json(report)["sections"][0]["absent"] == [absent]


def test_random_formulas_are_seeded_exactly_deep_and_use_only_the_listed_ops():
    assert random_formula(5, 3) == random_formula(5, 3)
    assert random_formula(5, 3) != random_formula(5, 4)
    allowed = {"sin", "exp", "log", "tanh"}
    for depth in (2, 4, 6):
        expr = random_formula(depth, 0)
        assert set(re.findall(r"[a-z]+(?=\()", expr)) <= allowed
        assert set(re.findall(r"x\d+", expr)) <= {f"x{i}" for i in range(8)}
    assert count_ops("sin(x0) + x1") == 4  # sin, +, two inputs
    assert len(TEMPLATES) == 6
    expr, ops, _ = formula_of_size(8, size_goal(8))
    assert size_goal(8) == 190 and abs(ops - 190) <= 38 and count_ops(expr) == ops


def test_a_capped_compile_is_shown_as_over_the_cap_with_a_lower_bound_ratio():
    from gradcheck.cli.bench import Report, Row

    sizes = {"depth": 8, "ops": 190, "inputs": 8, "seed": 1}
    report = Report(False, [
        Row("compile", "Reference (gradcheck.reference)", sizes, 25.0, "builds it", 1,
            target="< 2 s at depth 8", met=False, extra={"capped": False}),
        Row("compile", "sympy.diff + lambdify(cse=True)", sizes, None, "the same", 1,
            extra={"capped": True, "cap_seconds": 20.0, "ratio_at_least": 4.0})],
        {"compile": ["a note"]}, {"compile": []}, {"python": "3"}, 1.0)
    table = markdown(report)
    assert "| sympy.diff + lambdify(cse=True) | depth 8, 190 ops | > 20 (cap) | 1 | > 4.0× |" \
        in table
    assert "| < 2 s at depth 8 | no |" in table
    saved = to_json(report)
    assert saved["rows"][1]["seconds"] is None and saved["rows"][1]["extra"]["capped"]


def test_tensor_section_has_layers_the_4096_input_checkers_and_the_cache_rows(quick):
    from gradcheck.cli.bench.config import CHECKED, LAYERS

    saved = quick[0]
    by = {r["name"]: r for r in rows(saved, "tensor")}
    for label in QUICK.layer_names:
        wall, memory = by[f"gradcheck run: {label}"], by[f"gradcheck run: {label}: peak memory"]
        shapes = LAYERS[label][1]["small"]
        assert wall["sizes"]["shapes"] == shapes and wall["extra"]["formula"]
        assert wall["target"] == "< 10 s wall" and wall["seconds"] > 0
        # it passed, or says why not
        assert wall["extra"]["status"] == "passed" or wall["extra"]["error"]
        extra = memory["extra"]
        assert extra["input_bytes"] == 8 * wall["sizes"]["n"]
        assert memory["ratio"] == pytest.approx(extra["peak_bytes"] / extra["input_bytes"])
        # the case's own peak, from the JSON report: arrays of the layer at least
        assert memory["target"] and extra["peak_bytes"] > extra["input_bytes"]
    names = [f"gradcheck beside the checkers: {CHECKED[0]}", "torch.autograd.gradcheck",
             "torch.autograd.gradcheck fast_mode"]
    section = next(s for s in saved["sections"] if s["id"] == "tensor")
    if JAX:
        names.append("jax.test_util.check_grads, first call")
    else:
        assert any("not importable" in a["reason"] for a in section["absent"])
    checked = [r for r in rows(saved, "tensor") if r["sizes"].get("shapes")
               == CHECKED[1]["small"]]
    assert [r["name"] for r in checked] == names
    assert "every element" in checked[0]["verified"]
    assert checked[0]["extra"]["status"] == "passed"
    assert "whole Jacobian" in checked[1]["verified"]
    assert "one random projection" in checked[2]["verified"]
    for r in checked[1:3]:
        assert r["target"] and "gradcheck" in r["ratio_of"]
    cache = [r for r in rows(saved, "tensor") if "cases" in r["sizes"]
             and "cases/" in r["name"]]
    assert [r["name"].rsplit(": ", 1)[1] for r in cache] == [
        "one run", "references built cold",
        "references built again, kernels from the memo", "the cold build's share of the run"]
    assert cache[0]["seconds"] > 0 and cache[0]["extra"]["returncode"] == 0
    # what compiling costs: the symbolic build, cold and memoised, of the same cases
    assert cache[1]["sizes"]["references"] >= cache[1]["sizes"]["cases"] >= 1
    assert cache[1]["seconds"] > 0 and cache[2]["seconds"] > 0
    assert cache[3]["ratio"] == pytest.approx(cache[1]["seconds"] / cache[0]["seconds"])


def test_every_layer_case_file_reads_back_at_both_sizes(tmp_path):
    from gradcheck.cli.bench.clirun import case_toml
    from gradcheck.cli.bench.config import CHECKED, LAYERS
    from gradcheck.cli.bench.tensor import _case
    from gradcheck.cases import read_paths

    specs = [(keys, shapes) for keys, shapes in LAYERS.values()]
    specs.append(({"expr": CHECKED[0], "inputs": {"x": {}, "W": {}}}, CHECKED[1]))
    for size in ("real", "small"):
        cases = [_case(keys, shapes[size], f"c{i}") for i, (keys, shapes) in enumerate(specs)]
        path = tmp_path / f"{size}.toml"
        path.write_text(case_toml(cases), encoding="utf-8")
        read, errors = read_paths([str(path)])
        assert not errors and [c.name for c in read] == [c["name"] for c in cases]
        for got, want in zip(read, cases):
            assert {s.name: list(s.shape) for s in got.inputs} == {
                n: spec["shape"] for n, spec in want["inputs"].items()}
    assert sum(math.prod(s) for s in CHECKED[1]["real"].values()) == 4096
    ce = next(c for c in read if "y" in {s.name for s in c.inputs})
    assert not next(s for s in ce.inputs if s.name == "y").requires_grad


def test_a_case_gradcheck_cannot_check_is_a_row_with_its_message_not_a_crash():
    from gradcheck.cli.bench import Report, Row
    from gradcheck.cli.bench.clirun import CliRun
    from gradcheck.cli.bench.tensor import outcome, verified

    message = ("the formula mixes elements (matmul or an inner reduction) and its inputs "
               "have 2097152 elements; ... up to 4096 elements.")
    report = {"summary": {}, "cases": [{"name": "layer", "status": "error", "mode": "",
                                        "seconds": 0.1, "witnesses": {},
                                        "message": message}]}
    extra = outcome(CliRun(1.5, 2, False, report, ""), QUICK)
    assert extra["status"] == "error" and extra["error"] == message
    assert verified(extra).startswith("nothing")
    row = Row("tensor", "gradcheck run: layer norm", {"n": 4, "shapes": {"x": [2, 2]}},
              1.5, verified(extra), target="< 10 s wall", met=False, extra=extra)
    table = markdown(Report(False, [row], {"tensor": []}, {"tensor": []}, {}, 1.0))
    assert "| gradcheck run: layer norm (ERROR: the formula mixes elements" in table
    assert "| x [2, 2] (4 elements) | 1.5000 |" in table and "| no |" in table
    capped = outcome(CliRun(400.0, -9, True, None, ""), QUICK)
    assert capped["status"] == "capped" and "ran past" in capped["error"]


def _well_formed_opchecks(rows_, table: str) -> None:
    """Section (f)'s rows: every check first, then one per check of COSTED (derived
    from OP_CHECKS), each with what it adds to every case run; never its timings."""
    from gradcheck.cli.bench.opcost import COSTED, EVERY

    assert [r["name"] for r in rows_] == [EVERY] + [f"without {n}" for n in COSTED]
    every = rows_[0]
    cases = every["extra"]["per_case"]
    assert cases and every["sizes"]["cases"] == len(cases)
    assert every["seconds"] == pytest.approx(sum(cases.values()))
    assert every["extra"]["skip_checks"] == [] and every["ratio"] is None
    for r, check in zip(rows_[1:], COSTED):
        extra = r["extra"]
        assert extra["skip_checks"] == [check] and check in r["verified"]
        assert set(extra["added_per_case"]) == set(cases)
        assert extra["added_seconds"] == pytest.approx(every["seconds"] - r["seconds"])
        assert extra["most"]["case"] in cases
        assert r["ratio"] == pytest.approx(extra["added_seconds"] / every["seconds"])
        assert check in r["ratio_of"] and r["target"] is None and r["runs"] == 1
        assert any(line.startswith(f"| {r['name']} ({check} adds ")
                   for line in table.splitlines())


def test_opchecks_section_costs_each_newer_check_side_by_side(quick):
    from gradcheck.base.result import OP_CHECKS
    from gradcheck.cli.bench.opcost import COSTED

    saved, table = quick[0], quick[1]
    # the newer checks, from op.jvp on, whatever OP_CHECKS holds after it
    assert COSTED == tuple(f"op.{c}" for c in OP_CHECKS[OP_CHECKS.index("jvp"):])
    assert {"op.jvp", "op.vmap", "op.contract", "op.registration"} <= set(COSTED)
    _well_formed_opchecks(rows(saved, "opchecks"), table)
    # --quick: the one library op of paths.toml, in float64
    assert list(rows(saved, "opchecks")[0]["extra"]["per_case"]) == [
        "paths/custom-op-swish[float64]"]


def test_opchecks_rows_from_measurements(monkeypatch):
    """The rows and their table from made-up measurements (no case run)."""
    from gradcheck.cli.bench import Report, opcost

    every = {"ops/a[float64]": 1.0, "ops/b[float64]": 3.0}
    found = {opcost.EVERY: {"wall": 5.0, "cases": every}}
    for k, name in enumerate(opcost.COSTED):
        found[name] = {"wall": 4.0, "cases": {"ops/a[float64]": 0.5,
                                              "ops/b[float64]": 3.0 - 0.1 * k}}
    monkeypatch.setattr(opcost, "measure", lambda cfg: found)
    made = opcost.opcost_rows(QUICK)
    saved = to_json(Report(True, made, {"opchecks": ["a note"]}, {"opchecks": []}, {}, 1.0))
    _well_formed_opchecks(saved["rows"], markdown(Report(True, made, {"opchecks": []},
                                                         {"opchecks": []}, {}, 1.0)))
    jvp = saved["rows"][1]["extra"]
    assert jvp["added_per_case"] == {"ops/a[float64]": 0.5, "ops/b[float64]": 0.0}
    assert jvp["added_mean"] == 0.25 and jvp["most"] == {"case": "ops/a[float64]",
                                                         "seconds": 0.5}


def test_speed_section_has_every_checker_side_by_side_and_its_ratios(quick):
    """Section (g): per workload and thread setting, torch fwd+bwd, gradcheck, fast_mode
    (and torch's full check at the checkers' size), then the two targets' ratios."""
    speed = rows(quick[0], "speed")
    names = [r["name"] for r in speed]
    workloads = {n.split(": ")[0] for n in names}
    # --quick: the first layer, one thread and the default threads
    assert len(workloads) == 2 and all(w.startswith("sum(tanh(x @ W))") for w in workloads)
    assert any(w.endswith("(1 thread)") for w in workloads)
    for w in workloads:
        got = {n.split(": ", 1)[1]: r for n, r in zip(names, speed) if n.startswith(w)}
        assert {"torch fwd+bwd", "gradcheck", "torch fast_mode", "fast_mode / gradcheck",
                "gradcheck / fwd+bwd"} <= set(got), sorted(got)
        assert "verdict: passed" in got["gradcheck"]["verified"]
        ratio = got["fast_mode / gradcheck"]
        assert ratio["ratio"] == pytest.approx(got["torch fast_mode"]["seconds"]
                                               / got["gradcheck"]["seconds"])
        assert ratio["target"] == "≥ 1×" and got["gradcheck / fwd+bwd"]["target"] == "≤ 10×"
        if JAX:   # the same formula in jax.numpy, beside them, and its ratio
            assert "central-difference JVP" in got["jax check_grads"]["verified"]
            assert "(verdict: passed)" in got["jax check_grads"]["verified"]
            jax_ratio = got["jax check_grads / gradcheck"]
            assert jax_ratio["ratio"] == pytest.approx(got["jax check_grads"]["seconds"]
                                                       / got["gradcheck"]["seconds"])
            assert jax_ratio["target"] == "≥ 1×"


@pytest.mark.parametrize("label", list(workloads_of(replace(QUICK, layer_names=None))))
def test_each_jax_form_computes_the_workloads_value_and_gradient_as_torch(label):
    """Section (g)'s JAX column checks the same formula as the torch one: each workload's
    form in jaxforms gives torch's value and vector-Jacobian product (a random cotangent
    for a non-scalar output) at the same point, at the small sizes."""
    pytest.importorskip("jax")
    import numpy as np
    import torch

    from gradcheck.cli.bench.checkers import load_jax
    from gradcheck.cli.bench.jaxforms import jax_function
    from gradcheck.cli.bench.speed_jobs import bench_case
    from gradcheck.sampling.points import case_points
    from gradcheck.witnesses.drive import rebuild
    from gradcheck.witnesses.torch import applier, leaves

    keys, shapes = workloads_of(replace(QUICK, layer_names=None))[label]
    case = bench_case(label, keys, shapes, points=1, extreme_points=0)
    point = next(case_points(case, "float64")).values
    fixed = leaves(case, point, "float64")
    names = [s.name for s in case.inputs if s.requires_grad]
    y = rebuild(case.output, fixed, applier(case, "float64"))
    w = np.random.default_rng(1).standard_normal(tuple(y.shape))
    want = torch.autograd.grad(y, [fixed[n] for n in names], torch.tensor(w))
    mods = load_jax(pin=False)
    jax, jnp = mods[0], mods[1]
    values = {n: jnp.asarray(t.detach().numpy(), dtype=jnp.float64) for n, t in fixed.items()}
    f = jax_function(label, names, {n: v for n, v in values.items() if n not in names}, mods)
    assert f is not None, f"{label} has no JAX form"
    got, vjp = jax.vjp(f, *(values[n] for n in names))
    np.testing.assert_allclose(np.asarray(got), y.detach().numpy(), rtol=1e-12, atol=1e-12)
    for name, g, t in zip(names, vjp(jnp.asarray(w)), want):
        np.testing.assert_allclose(np.asarray(g), t.numpy(), rtol=1e-10, atol=1e-12,
                                   err_msg=name)
