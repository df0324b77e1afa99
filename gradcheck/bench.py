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


def run_bench(sizes=(1000, 2000), big: int = 1_000_000, repeat: int = 3,
              progress: Callable[[str], None] | None = None) -> list[Row]:
    """Measure every workload; returns the rows (nothing is printed here)."""
    say = progress or (lambda _msg: None)
    _gradcheck_row(10, 1)  # warm-up: imports and first compile are not measured
    rows: list[Row] = []
    for n in sizes:
        say(f"gradcheck n={n}")
        rows.append(_gradcheck_row(n, repeat))
        say(f"torch.autograd.gradcheck n={n}")
        rows.extend(_torch_rows(n, repeat))
    say(f"gradcheck n={big}")
    rows.append(_gradcheck_row(big, repeat))
    return rows


def markdown(rows: list[Row]) -> str:
    out = [f"Workload: `{ELEMENTWISE}`, float64, one point.", "",
           "| checker | n | seconds | vs gradcheck | verified |", "|---|---|---|---|---|"]
    ours = {r.n: r.seconds for r in rows if r.checker == "gradcheck"}
    for r in rows:
        ratio = f"{r.seconds / ours[r.n]:.2f}x" if r.n in ours else "-"
        out.append(f"| {r.checker} | {r.n} | {r.seconds:.4f} | {ratio} | {r.verified} |")
    return "\n".join(out) + "\n"


def main(out_dir: str = "reports") -> int:
    """Run the benchmark, print the table, save ``bench.json`` and ``bench.md``."""
    from .cli import write_atomic

    rows = run_bench(progress=lambda msg: print(f"bench: {msg}", file=sys.stderr,
                                                flush=True))
    table = markdown(rows)
    sys.stdout.write(table)
    write_atomic(Path(out_dir) / "bench.json",
                 json.dumps([asdict(r) for r in rows], indent=2) + "\n")
    write_atomic(Path(out_dir) / "bench.md", table)
    print(f"saved {out_dir}/bench.json and {out_dir}/bench.md")
    return 0
