"""``gradcheck bench``: fixed workloads measured side by side in one process.

Each row says what was measured and what each checker actually verified: gradcheck
compares every element of the gradient with the exact one (and with finite differences);
``torch.autograd.gradcheck`` builds the full finite-difference Jacobian (slow mode) or
checks one random projection of it (fast mode).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

ELEMENTWISE = "sum(log(1 + exp(x)) * tanh(x) + sigmoid(x)**2)"


@dataclass(frozen=True)
class Row:
    workload: str
    checker: str
    n: int
    seconds: float
    verified: str


def _median(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _gradcheck_row(n: int, repeat: int) -> Row:
    import sympy

    from .cases import case_from_dict
    from .runner import run_case

    def once():
        sympy.core.cache.clear_cache()  # compile from scratch every time
        case = case_from_dict({"name": f"n{n}", "expr": ELEMENTWISE, "points": 1,
                               "inputs": {"x": {"shape": [n]}}})
        result = run_case(case, "float64", timeout=None)
        if result.status != "passed":
            raise RuntimeError(f"bench case failed: {result.message}")

    return Row("elementwise", "gradcheck", n, _median(once, repeat),
               "every element, exact reference (compile included); torch and numeric")


def _torch_rows(n: int, repeat: int) -> list[Row]:
    import torch

    def f(x):
        return (torch.log(1 + torch.exp(x)) * torch.tanh(x) + torch.sigmoid(x) ** 2).sum()

    x = torch.randn(n, dtype=torch.float64, requires_grad=True)
    slow = _median(lambda: torch.autograd.gradcheck(f, (x,)), repeat)
    fast = _median(lambda: torch.autograd.gradcheck(f, (x,), fast_mode=True), repeat)
    return [Row("elementwise", "torch.autograd.gradcheck", n, slow,
                "full Jacobian by finite differences (float64)"),
            Row("elementwise", "torch.autograd.gradcheck fast_mode", n, fast,
                "one random projection uᵀJv (float64)")]


#: Op mixes for the engine-overhead chains. The first is the headline: cheap kernels, so
#: the ratio measures the engine's own work. The second adds sin, whose float64 kernel
#: in NumPy is several times slower than PyTorch's vectorised one: that ratio measures
#: the libraries' libm as much as the engine.
CHAINS = {
    "tanh, *, +, exp(-x)": ("tanh", "scale", "shift", "expneg"),
    "sin, tanh, *, +": ("sin", "tanh", "scale", "shift"),
}


def _chain(lib, x, length: int, ops: tuple[str, ...]):
    """``length`` elementwise ops in a chain, cycling through ``ops``, then a sum."""
    steps = {"sin": lib.sin, "tanh": lib.tanh, "scale": lambda t: t * 1.01,
             "shift": lambda t: t + 0.1, "expneg": lambda t: lib.exp(-t)}
    for i in range(length):
        x = steps[ops[i % len(ops)]](x)
    return lib.sum(x)


def _engine_rows(n: int, length: int, repeat: int) -> list[Row]:
    """Forward and backward of each chain on the engine and on torch (float64)."""
    import numpy as np
    import torch

    from . import engine

    data = np.random.default_rng(0).standard_normal(n)
    rows = []
    for label, ops in CHAINS.items():
        times: dict[str, list[float]] = {k: [] for k in
                                         ("engine forward", "engine backward",
                                          "torch forward", "torch backward")}
        for _ in range(repeat):
            for name, lib, make in (
                    ("engine", engine, lambda: engine.Tensor(data.copy(),
                                                             requires_grad=True)),
                    ("torch", torch, lambda: torch.tensor(data, requires_grad=True))):
                x = make()
                start = time.perf_counter()
                y = _chain(lib, x, length, ops)
                mid = time.perf_counter()
                y.backward()
                end = time.perf_counter()
                times[f"{name} forward"].append(mid - start)
                times[f"{name} backward"].append(end - mid)
        what = f"chain of {length} ops ({label})"
        rows += [Row(what, k, n, statistics.median(v), "forward pass" if "forward" in k
                     else "backward pass (all leaf gradients)") for k, v in times.items()]
    return rows


def engine_ratios(rows: list[Row]) -> dict[str, float]:
    """Per chain: backward/forward of the engine (target <= 3) and engine/torch
    (target <= 2), keyed "<ratio> [<chain>]"."""
    out = {}
    for label in CHAINS:
        t = {r.checker: r.seconds for r in rows if r.workload.endswith(f"({label})")}
        if not t:
            continue
        out[f"engine backward / engine forward [{label}]"] = (
            t["engine backward"] / t["engine forward"])
        out[f"engine (forward+backward) / torch (forward+backward) [{label}]"] = (
            (t["engine forward"] + t["engine backward"])
            / (t["torch forward"] + t["torch backward"]))
    return out


def run_bench(sizes=(1000, 2000), big: int = 1_000_000, repeat: int = 3,
              chain: tuple[int, int] = (10_000, 1000),
              progress: Callable[[str], None] | None = None) -> list[Row]:
    """Measure every workload; returns the rows (nothing is printed here)."""
    import torch

    say = progress or (lambda _msg: None)
    threads = torch.get_num_threads()
    # One thread, as NumPy's elementwise kernels: a fair comparison, and it keeps torch's
    # OpenMP workers from spinning against a busy core (which costs it 100x here).
    torch.set_num_threads(1)
    try:
        return _measure(sizes, big, repeat, chain, say)
    finally:
        torch.set_num_threads(threads)


def _measure(sizes, big, repeat, chain, say) -> list[Row]:
    _gradcheck_row(10, 1)  # warm-up: imports and first compile are not measured
    rows: list[Row] = []
    say(f"engine and torch: chain of {chain[1]} ops on {chain[0]} elements")
    rows.extend(_engine_rows(chain[0], chain[1], repeat))
    for n in sizes:
        say(f"gradcheck n={n}")
        rows.append(_gradcheck_row(n, repeat))
        say(f"torch.autograd.gradcheck n={n}")
        rows.extend(_torch_rows(n, repeat))
    say(f"gradcheck n={big}")
    rows.append(_gradcheck_row(big, repeat))
    return rows


def markdown(rows: list[Row]) -> str:
    checks = [r for r in rows if r.workload == "elementwise"]
    chain = [r for r in rows if r.workload != "elementwise"]
    out = [f"Checkers on `{ELEMENTWISE}`, float64, one point (median of runs).", "",
           "| checker | n | seconds | vs gradcheck | verified |", "|---|---|---|---|---|"]
    ours = {r.n: r.seconds for r in checks if r.checker == "gradcheck"}
    for r in checks:
        ratio = f"{r.seconds / ours[r.n]:.2f}x" if r.n in ours else "-"
        out.append(f"| {r.checker} | {r.n} | {r.seconds:.4f} | {ratio} | {r.verified} |")
    if chain:
        out += ["", f"Engine overhead on {chain[0].n} float64 elements (median of runs).",
                "", "| workload | pass | seconds |", "|---|---|---|"]
        out += [f"| {r.workload} | {r.checker} | {r.seconds:.4f} |" for r in chain]
        out += ["", "| ratio | value | target |", "|---|---|---|"]
        out += [f"| {k} | {v:.2f} | {'<= 3' if 'backward /' in k else '<= 2'} |"
                for k, v in engine_ratios(rows).items()]
    return "\n".join(out) + "\n"


def main(out_dir: str = "reports") -> int:
    """Run the benchmark, print the table, save ``bench.json`` and ``bench.md``."""
    from .cli import write_atomic

    rows = run_bench(progress=lambda msg: print(f"bench: {msg}", file=sys.stderr,
                                                flush=True))
    table = markdown(rows)
    sys.stdout.write(table)
    write_atomic(Path(out_dir) / "bench.json",
                 json.dumps({"rows": [asdict(r) for r in rows],
                             "ratios": engine_ratios(rows)}, indent=2) + "\n")
    write_atomic(Path(out_dir) / "bench.md", table)
    print(f"saved {out_dir}/bench.json and {out_dir}/bench.md")
    return 0
