"""Section (b), ``memory``: the million-element check with every witness, in a fresh
process (:mod:`gradcheck.cli.bench.jobs`): wall time and peak resident memory against the
input's size."""

from __future__ import annotations

from .child import run_child
from .config import TARGET_MEMORY_RATIO, TARGET_MEMORY_SECONDS, Config, Row, Workload


def memory_rows(cfg: Config) -> list[Row]:
    n = cfg.memory_n
    got = run_child({"job": "memory", "n": n}, timeout=600)
    if got.get("capped"):
        raise RuntimeError("the memory workload ran past 600 s")
    input_bytes = 8 * n
    extra_bytes = max(0, got["peak_bytes"] - got["baseline_bytes"])
    seconds = got["compile_seconds"] + got["check_seconds"]
    assess = not cfg.quick
    what = (f"every element of the gradient, witnesses {', '.join(got['witnesses'])}, "
            "against the exact reference (one point, float64)")
    return [
        Row("memory", "gradcheck, every witness: wall time", {"n": n}, seconds,
            what + "; reference compile included", 1,
            target=f"< {TARGET_MEMORY_SECONDS:g} s at n = 10⁶",
            met=seconds < TARGET_MEMORY_SECONDS if assess else None,
            extra={k: got[k] for k in ("compile_seconds", "check_seconds")}),
        Row("memory", "gradcheck, every witness: peak memory", {"n": n}, None, what, 1,
            ratio=extra_bytes / input_bytes,
            ratio_of="peak resident bytes above the baseline / the input's bytes",
            target=f"< {TARGET_MEMORY_RATIO:g}× the input's bytes at n = 10⁶",
            met=extra_bytes / input_bytes < TARGET_MEMORY_RATIO if assess else None,
            extra={"peak_bytes": extra_bytes, "input_bytes": input_bytes,
                   "baseline_bytes": got["baseline_bytes"], "method": got["method"]}),
    ]


def memory_workloads(cfg: Config) -> list[Workload]:
    return [Workload("memory", f"every witness n={cfg.memory_n} (fresh process)",
                     lambda: memory_rows(cfg))]
