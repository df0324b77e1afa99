"""What each hostile input of tests/hostile/ costs gradcheck to refuse: a table of
seconds and peak memory, reading and running (not a test: pytest does not collect it).

    python tests/hostile/measure.py                 # every input, read and run
    python tests/hostile/measure.py --read-only     # reading only (no worker processes)
    python tests/hostile/measure.py --timeout 5 --max-memory 512M

The inputs: every case file (.toml, .yaml, .yml) under tests/hostile/, and those that an
area's ``generate.py`` writes (``generate(folder) -> list of paths``: inputs too big to
commit). Each is measured in a fresh process of its own, so that one input's peak is
not another's:

- **read**: :func:`gradcheck.cases.read_file`, timed once as it is, then again under
  tracemalloc for its peak of traced memory (Python's and NumPy's allocations);
- **run**: the cases it holds, as ``gradcheck run`` runs them (each in a worker
  process, with ``--timeout``): seconds, and the largest resident memory of the worker
  processes (``RUSAGE_CHILDREN``). A worker imports torch first, so the run of a
  trivial case (the ``baseline`` row) is what any run costs; the rest is the input's.

The targets of issue 14 are 2 s and 500 MB for each rejection.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HOSTILE = Path(__file__).resolve().parent
SUFFIXES = (".toml", ".yaml", ".yml")
BASELINE = '[[case]]\nname = "baseline"\nexpr = "sum(x * x)"\ninputs.x = { shape = [3] }\n' \
           'points = 1\nextreme_points = 0\ndtype = "float64"\n'


def inputs(folder: Path) -> list[tuple[str, Path]]:
    """(area, path) of every hostile input, the generated ones written under ``folder``."""
    found = [(p.relative_to(HOSTILE).parts[0], p) for p in sorted(HOSTILE.rglob("*"))
             if p.suffix in SUFFIXES and p.parent != HOSTILE]
    for script in sorted(HOSTILE.glob("*/generate.py")):
        spec = importlib.util.spec_from_file_location(f"generate_{script.parent.name}",
                                                      script)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        area = script.parent.name
        found += [(area, Path(p)) for p in module.generate(folder / area)]
    return found


def measure_one(path: Path, timeout: float, run: bool, max_memory: str | None) -> dict:
    """The costs of ``path`` (in this process, which should be a fresh one)."""
    import resource
    import tracemalloc

    from gradcheck.process.budgets import memory_budget
    from gradcheck.cases import read_file
    from gradcheck.session.runner import run as run_cases

    start = time.perf_counter()
    cases, errors = read_file(path)
    read_s = time.perf_counter() - start
    tracemalloc.start()
    read_file(path)
    read_mb = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    out = {"read_s": read_s, "read_mb": read_mb, "cases": len(cases),
           "errors": [str(e) for e in errors]}
    if run and cases:
        start = time.perf_counter()
        with memory_budget(max_memory):
            result = run_cases([path], timeout=timeout, isolate=True)
        out["run_s"] = time.perf_counter() - start
        # kilobytes on Linux: the largest worker (and case) process that has ended
        out["run_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        out["statuses"] = [f"{c.status}/{c.error_kind or '-'}" for c in result.cases]
        out["messages"] = [c.message for c in result.cases if c.message]
    return out


def _subprocess(path: Path, args) -> dict:
    command = [sys.executable, __file__, "--one", str(path), "--timeout", str(args.timeout)]
    if args.read_only:
        command.append("--read-only")
    if args.max_memory:
        command += ["--max-memory", args.max_memory]
    done = subprocess.run(command, capture_output=True, text=True,
                          timeout=60 + 3 * args.timeout)
    lines = done.stdout.strip().splitlines()
    if done.returncode or not lines:
        return {"failed": f"exit {done.returncode}: {done.stderr.strip()[-300:]}"}
    return json.loads(lines[-1])


def _outcome(got: dict) -> str:
    if "failed" in got:
        return "MEASURE FAILED " + got["failed"]
    text = (got["errors"] or got.get("messages") or [""])[0]
    statuses = ", ".join(sorted(set(got.get("statuses", []))))
    head = (f"{got['cases']} cases read" + (f", run: {statuses}" if statuses else "")
            if got["cases"] else "refused")
    first = text.splitlines()[0] if text else ""
    return f"{head}: {first[:110]}" if first else head


def _row(area: str, name: str, got: dict) -> str:
    def num(key: str, fmt: str) -> str:
        return format(got[key], fmt) if key in got else "-"

    return (f"| {area} | {name} | {num('read_s', '.3f')} | {num('read_mb', '.1f')} | "
            f"{num('run_s', '.2f')} | {num('run_mb', '.0f')} | "
            f"{_outcome(got).replace('|', '/')} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--one", metavar="PATH", help=argparse.SUPPRESS)
    parser.add_argument("--read-only", action="store_true", help="do not run the cases")
    parser.add_argument("--timeout", type=float, default=10.0,
                        help="each case's time limit when run (default 10 s)")
    parser.add_argument("--max-memory", metavar="SIZE",
                        help="run under gradcheck run's --max-memory SIZE")
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure_one(Path(args.one), args.timeout, not args.read_only,
                                     args.max_memory)))
        return 0
    with tempfile.TemporaryDirectory(prefix="gradcheck-hostile-") as folder:
        found = inputs(Path(folder))
        baseline = Path(folder) / "baseline.toml"
        baseline.write_text(BASELINE)
        print("| area | input | read s | read MB (traced) | run s | run MB (worker RSS) "
              "| outcome |")
        print("|---|---|---|---|---|---|---|")
        rows = []
        for area, path in [("-", baseline), *found]:
            got = _subprocess(path, args)
            rows.append((area, path.name, got))
            print(_row(area, path.name, got), flush=True)
    measured = [(a, n, g) for a, n, g in rows[1:] if "read_s" in g]
    slow = max(measured, key=lambda r: r[2]["read_s"])
    big = max(measured, key=lambda r: r[2]["read_mb"])
    print(f"\n{len(measured)} hostile inputs; slowest read {slow[1]} {slow[2]['read_s']:.3f} s; "
          f"largest traced read {big[1]} {big[2]['read_mb']:.1f} MB")
    ran = [(a, n, g) for a, n, g in measured if "run_s" in g]
    if ran:
        slow = max(ran, key=lambda r: r[2]["run_s"])
        big = max(ran, key=lambda r: r[2]["run_mb"])
        base = rows[0][2]
        print(f"slowest run {slow[1]} {slow[2]['run_s']:.2f} s, largest worker {big[1]} "
              f"{big[2]['run_mb']:.0f} MB (a trivial case: {base.get('run_s', 0):.2f} s, "
              f"{base.get('run_mb', 0):.0f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
