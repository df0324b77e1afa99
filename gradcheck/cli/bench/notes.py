"""What a report says beside its rows: each section's fixed notes, and the machine and
libraries it ran on."""

from __future__ import annotations

import os
import platform
import sys

from .config import ELEMENTWISE, TARGET_BACKWARD_FORWARD, TARGET_ENGINE_TORCH, Config
from .opcost import opcost_notes
from .overhead import chain_runs


def environment() -> dict:
    import numpy
    import sympy
    import torch

    env = {"python": platform.python_version(), "platform": platform.platform(),
           "cpus": os.cpu_count(), "numpy": numpy.__version__, "sympy": sympy.__version__,
           "torch": torch.__version__, "torch_threads": 1}
    jax = getattr(sys.modules.get("jax"), "__version__", None)  # when it was used
    if jax:
        env["jax"] = jax
    return env


def load_average() -> list[float] | None:
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None


def _runs(cfg: Config) -> str:
    return "One run each" if cfg.repeat == 1 else f"Median of {cfg.repeat} runs"


def static_notes(cfg: Config) -> dict[str, list[str]]:
    """Each section's notes: how it measures (the text is most of the function)."""
    return {
        "speed": [
            "Each workload in a fresh interpreter, twice: pinned to one thread (torch's "
            "set_num_threads(1); OMP, OpenBLAS, MKL and numexpr pools by their environment "
            "variables) and with the default threads. Inside it, after a warm-up check, "
            "torch fwd+bwd, gradcheck, torch fast_mode (and torch's full check at 4,096 "
            "inputs), and JAX's check_grads where JAX is importable, run in turns, one "
            "run of each at a time, the median kept: a ratio is measured under one load.",
            "gradcheck: run_case at one point, no extreme point, every witness, float64, "
            "its reference compiled each run (SymPy's cache and the kernel memo off). "
            "torch's checkers and fwd+bwd run the same formula, built from the rule "
            "table's torch column as the torch witness builds it; fwd+bwd is backward(v) "
            "with a fixed random v of the output's shape.",
        ],
        "checkers": [
            f"Formula `{ELEMENTWISE}`, float64, one point. {_runs(cfg)} after a warm-up "
            f"of every checker; a run over {cfg.once_over:g} s is not repeated (the runs "
            "column says how many were taken). torch on one thread, like NumPy.",
            "Ratio: the checker's seconds / gradcheck's (compile included) at the same n.",
            "gradcheck's f has a scalar output (a final sum), so torch's slow mode builds "
            "a 1×n Jacobian: 2n evaluations of f, no n×n matrix.",
        ],
        "memory": [
            "Run in a fresh process (torch on one thread): imports, a warm-up case, the "
            "reference compile (SymPy's cache cleared), then the check (sampling the "
            "point, every witness, the comparisons). Seconds: compile + check.",
            "Peak memory: the process's resident set (RSS, from /proc/self/status), which "
            "counts NumPy's, torch's and the interpreter's allocations alike. The "
            "high-water mark (VmHWM) is reset (/proc/self/clear_refs) right before the "
            "check, and the peak is VmHWM after it minus VmRSS before it. Where that is "
            "unavailable, ru_maxrss before and after is used (which undercounts when the "
            "imports peaked higher than the check).",
            "The input's bytes: n float64 values (8n).",
        ],
        "compile": [
            "Random formulas over 8 scalar inputs x0..x7 from `+`, `*`, `sin`, "
            "`exp(a/(1+a**2))`, `log(1+a**2)`, `tanh`, nesting exactly `depth` levels; ops: "
            "parsed nodes (each input once, every constant). For each depth the first seed "
            "whose formula is within 20% of 8·1.7^(depth−2) nodes (190 at depth 8) is used; "
            f"the large formula is within 10% of {cfg.large_ops} nodes.",
            "Each measurement is one run in a fresh process, after a warm-up on `sin(x0)` "
            "(so the first lambdify's one-time imports are not counted) and with SymPy's "
            f"cache cleared; parsing excluded; stopped at {cfg.cap:g} s ('> cap').",
            "Reference: gradcheck.reference.Reference(case) plus one evaluate() (with the "
            "derivative construction it has at the time of the run). sympy: the lowered "
            "expression, sympy.diff w.r.t. each input, lambdify(cse=True), one call. "
            "Ratio: sympy seconds / Reference seconds; 'agrees' checks both gradients.",
        ],
        "engine": [
            f"Median of {chain_runs(cfg)} runs of each chain, the engine and torch in "
            "turns, float64, torch on one thread. The ratios' targets: "
            f"backward/forward <= {TARGET_BACKWARD_FORWARD:g}, engine/torch <= "
            f"{TARGET_ENGINE_TORCH:g}.",
        ],
        "tensor": _tensor_notes(cfg),
        "opchecks": opcost_notes(cfg),
    }


def _tensor_notes(cfg: Config) -> list[str]:
    return [
        "Each gradcheck row is `python -m gradcheck run FILE --dtype float64 --points 1 "
        "--extreme-points 0` (every witness, --no-cache) on a "
        "generated case file, in a fresh process "
        "with OMP/MKL/OpenBLAS on one thread; seconds: its wall time, start-up and "
        "the reference's compile included. A case gradcheck cannot check is shown "
        "with its status and message, its targets not met.",
        "Peak memory: the case's own, from the JSON report (peak_memory: the resident "
        "set of the worker's case process at its peak above what it held as the case "
        "began, Linux's VmHWM reset then; its start-up imports and the reference's "
        "compile inside the case count), less that of the same formula at its small "
        "shapes checked the same way just before (what any case takes first: 20 to "
        "30 MiB), against the inputs' float64 bytes (every input, requires_grad or "
        "not).",
        "Softmax cross-entropy: y is a fixed input (requires_grad = false) drawn in "
        "[0, 1], not a one-hot literal, which takes seconds to parse at 1024×1000.",
        "torch.autograd.gradcheck and JAX run in the bench's own process (one thread, "
        f"warmed up; {_runs(cfg).lower()}) on the same function, float64; their ratio "
        "is their seconds over gradcheck run's. At 4096 inputs gradcheck's check and "
        "torch's fast_mode, each a few milliseconds, are timed in turns (ten runs of "
        "one, then ten of the other, again, for at least 2 s of runs: the medians of "
        "dozens of runs, under one load).",
        "Compile: `gradcheck run` on the bundled cases as they come, once, in a fresh "
        "process (kernels memoised within each process, none read from the disk), "
        "and their references built in the bench's process, every kernel compiled, "
        "then again from the memo: what compiling costs of the run.",
    ]
