"""Running the bench: the plan of workloads for the sections asked, each measured in
turn (:func:`run_bench`, data only), and ``gradcheck bench``'s command (:func:`main`)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Callable

from .checkers import checker_workloads, ratios_to_gradcheck
from .compile_time import compile_workloads
from .config import FULL, QUICK, SECTIONS, Config, Report, Row, Workload
from .memory import memory_workloads
from ...reference.kernelcache import turned_off
from .notes import environment, load_average, static_notes
from .opcost import opcost_rows
from .overhead import engine_workloads
from .render import markdown, to_json
from .speed import speed_workloads
from .tensor import tensor_workloads


def _plan(cfg: Config, wanted: tuple[str, ...], notes: dict,
          absent: dict) -> list[Workload]:
    plan: list[Workload] = []
    if "checkers" in wanted:
        plan += checker_workloads(cfg, notes, absent)
    if "memory" in wanted:
        plan += memory_workloads(cfg)
    if "compile" in wanted:
        plan += compile_workloads(cfg)
    if "engine" in wanted:
        plan += engine_workloads(cfg)
    if "tensor" in wanted:
        plan += tensor_workloads(cfg, notes, absent)
    if "opchecks" in wanted:
        plan.append(Workload("opchecks", "the bundled op cases, each newer check off in "
                             "turn", lambda: opcost_rows(cfg)))
    if "speed" in wanted:
        plan += speed_workloads(cfg, notes, absent)
    return plan


def _measure(plan: list[Workload], rows: list[Row], absent: dict,
             say: Callable[[str], None]) -> None:
    """Run every workload of ``plan`` into ``rows``; a failing one goes to ``absent``."""
    for k, w in enumerate(plan, 1):
        say(f"[{k}/{len(plan)}] start {w.section}: {w.label}")
        t0 = time.perf_counter()
        try:
            rows.extend(w.run())
        except Exception as exc:  # one failing workload is reported, the rest run
            absent[w.section].append({"name": w.label,
                                      "reason": f"failed: {type(exc).__name__}: {exc}"})
            say(f"[{k}/{len(plan)}] FAILED {w.section}: {w.label}: {exc}")
            continue
        say(f"[{k}/{len(plan)}] done  {w.section}: {w.label} "
            f"({time.perf_counter() - t0:.1f} s)")


def run_bench(config: Config = FULL, *, sections: tuple[str, ...] | None = None,
              progress: Callable[[str], None] | None = None) -> Report:
    """Measure every workload (of ``sections``, default all); nothing is printed here:
    ``progress`` gets one message as each workload starts and one as it ends."""
    import torch

    say = progress or (lambda _msg: None)
    start = time.perf_counter()
    load_start = load_average()
    threads = torch.get_num_threads()
    # One thread, as NumPy's elementwise kernels: a fair comparison, and it keeps torch's
    # OpenMP workers from spinning against a busy core (which costs it 100x here).
    torch.set_num_threads(1)
    notes = static_notes(config)
    absent: dict[str, list[dict]] = {s: [] for s in SECTIONS}
    rows: list[Row] = []
    wanted = tuple(s for s in SECTIONS if s in (sections or SECTIONS))
    try:
        # every measurement compiles its reference, in this process and in children
        # (the compile rows turn the kernel memo on for theirs)
        with turned_off():
            _measure(_plan(config, wanted, notes, absent), rows, absent, say)
    finally:
        torch.set_num_threads(threads)
    ratios_to_gradcheck(rows)
    env = environment()
    if load_start is not None:
        env["load_average_start"], env["load_average_end"] = load_start, load_average()
    return Report(config.quick, rows, {s: notes[s] for s in wanted},
                  {s: absent[s] for s in wanted}, env, time.perf_counter() - start)


def main(out_dir: str = "reports", quick: bool = False,
         sections: tuple[str, ...] | None = None) -> int:
    """Run the benchmark's ``sections`` (default all; progress on stderr), print the
    table, save ``bench.json`` and ``bench.md`` in ``out_dir``."""
    from ...base.io import write_atomic

    report = run_bench(QUICK if quick else FULL, sections=sections,
                       progress=lambda msg: print(f"bench: {msg}", file=sys.stderr,
                                                  flush=True))
    table = markdown(report)
    sys.stdout.write(table)
    write_atomic(Path(out_dir) / "bench.json", json.dumps(to_json(report), indent=2,
                                                          ensure_ascii=False) + "\n")
    write_atomic(Path(out_dir) / "bench.md", table)
    print(f"saved {out_dir}/bench.json and {out_dir}/bench.md")
    return 0
