"""Long fuzzing of the case-file loader, outside CI (no ``test_`` prefix: pytest does not
collect it). Every text must read as cases and CaseFileErrors, nothing raised.

    python tests/fuzz_loader.py --minutes 10        # Hypothesis, random seeds
    python tests/fuzz_loader.py --atheris -- -max_total_time=600

With ``--atheris`` (``pip install atheris``), coverage-guided by atheris/libFuzzer: the
arguments after ``--`` are libFuzzer's. Without it, the Hypothesis strategy of
tests/test_hostile_budgets.py (real and hostile case files mutated, or random text) runs
unseeded, in rounds of 500 examples, until the minutes are up. A failure prints the
text that raised, and exits 1.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from test_hostile_budgets import load_anything, mutated_case_files  # noqa: E402


def hypothesis_rounds(minutes: float, folder: str) -> int:
    from hypothesis import HealthCheck, given, settings

    @settings(max_examples=500, derandomize=False, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(mutated_case_files())
    def one(drawn):
        load_anything(folder, *drawn)

    end, rounds = time.monotonic() + 60 * minutes, 0
    while time.monotonic() < end:
        one()
        rounds += 1
        print(f"round {rounds}: 500 texts read", flush=True)
    return rounds


def atheris_main(folder: str, argv: list[str]) -> None:
    import atheris

    def one_input(data: bytes) -> None:
        provider = atheris.FuzzedDataProvider(data)
        suffix = ".toml" if provider.ConsumeBool() else ".yaml"
        text = provider.ConsumeUnicodeNoSurrogates(len(data))
        load_anything(folder, suffix, text)

    atheris.Setup([sys.argv[0], *argv], one_input)
    atheris.Fuzz()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--atheris", action="store_true")
    parser.add_argument("libfuzzer", nargs="*", help="libFuzzer's arguments (after --)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gradcheck-fuzz-") as folder:
        if args.atheris:
            atheris_main(folder, args.libfuzzer)
        else:
            rounds = hypothesis_rounds(args.minutes, folder)
            print(f"{rounds * 500} texts read, nothing raised")
    return 0


if __name__ == "__main__":
    sys.exit(main())
