"""What each rejection of the limits probes costs (not a test: pytest does not collect
it): every probe of ranges.py and nesting.py, and the intermediates case, run as
``gradcheck`` in a process of its own, measured by ``os.wait4`` (its wall time, CPU
time, and peak resident memory: the largest of the process and of the workers it
reaped). The targets of issue 31 are 2 s and 500 MB for each rejection.

    python tests/hostile/limits/measure_limits.py
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"limits_{name}", HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def probes(project: Path) -> list[tuple[str, list[str], str | None]]:
    """(name, argv after ``gradcheck``, the pyproject's [tool.gradcheck] table or None)."""
    ranges, nesting = _load("ranges"), _load("nesting")
    out = [(f"run {name}", ["run", "cases.toml", *argv], None)
           for name, (argv, _) in ranges.COMMAND_LINE.items()]
    out += [(f"table {name}", ["run", "cases.toml"], f"[tool.gradcheck]\n{table}\n")
            for name, (table, _) in ranges.TABLE.items()]
    out += [(name, argv, None) for name, argv in nesting.probes().items()]
    out += [(name, ["run", "cases.toml"], text) for name, text in nesting.settings().items()]
    out.append(("run intermediates.toml (16 terms)", ["run", "intermediates.toml"], None))
    return out


def measure(argv: list[str], cwd: Path) -> dict:
    """Exit code, wall seconds, CPU seconds and peak RSS (MB) of ``gradcheck argv``."""
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "gradcheck", *argv], cwd=cwd,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return {"code": process.returncode, "wall": time.perf_counter() - start,
            "cpu": usage.ru_utime + usage.ru_stime, "mb": usage.ru_maxrss / 1024}


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="gradcheck-limits-") as folder:
        project = Path(folder)
        for name in ("cases.toml", "intermediates.toml"):
            shutil.copy(HERE / name, project / name)
        print("| probe | exit | wall s | CPU s | peak MB |\n|---|---|---|---|---|")
        rows = []
        for name, argv, table in probes(project):
            (project / "pyproject.toml").write_text(table or "[project]\nname = 'p'\n")
            got = measure(argv, project)
            rows.append((name, got))
            print(f"| {name[:60]} | {got['code']} | {got['wall']:.2f} | {got['cpu']:.2f} | "
                  f"{got['mb']:.0f} |", flush=True)
    held = sum(g["code"] == 2 for _, g in rows)
    slow = max(rows, key=lambda r: r[1]["wall"])
    busy = max(rows, key=lambda r: r[1]["cpu"])
    big = max(rows, key=lambda r: r[1]["mb"])
    print(f"\n{len(rows)} probes, {held} refused with exit 2; slowest {slow[0]}: "
          f"{slow[1]['wall']:.2f} s wall; most CPU {busy[0]}: {busy[1]['cpu']:.2f} s; "
          f"largest {big[0]}: {big[1]['mb']:.0f} MB")
    return 0 if held == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
