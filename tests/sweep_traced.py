"""Sweep (a script, not a test): every traced call of ``tests/test_tracing_ops.py`` as a
formula case, checked by every witness in every dtype; counts by status, then each run
that did not pass. Every call is right: a failed or errored run is a false alarm.

    python tests/sweep_traced.py
"""

from __future__ import annotations

import collections
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import test_tracing_ops as calls  # noqa: E402
from tracing_harness import traced_case  # noqa: E402

from gradcheck.checking.case import run_case  # noqa: E402

DTYPES = ("float64", "float32", "bfloat16", "float16")


def main() -> int:
    counts: collections.Counter = collections.Counter()
    bad = []
    start = time.time()
    for name, (fn, arguments, domains, frozen, _) in calls.CASES.items():
        try:
            case, _ = traced_case(fn, arguments, domains, frozen)
        except Exception as exc:
            counts["not traced"] += 1
            bad.append((name, "-", "not traced", str(exc)[:200]))
            continue
        for dtype in DTYPES:
            result = run_case(case, dtype, timeout=120)
            counts[result.status] += 1
            if result.status != "passed":
                bad.append((name, dtype, result.status, (result.message or "")[:300]))
    print(f"{len(calls.CASES)} traced calls x {len(DTYPES)} dtypes: {dict(counts)} "
          f"in {time.time() - start:.0f} s")
    for row in bad:
        print("  ", *row)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
