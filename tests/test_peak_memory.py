"""Each case run in a worker reports the memory its check took at its peak (the JSON
report's ``peak_memory``); a case run in the caller's process reports none."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gradcheck.process.peak_memory import PeakMemory, rss_kib
from gradcheck.base.result import CaseResult
from gradcheck.session.runner import run

pytestmark = pytest.mark.skipif(rss_kib()[0] is None, reason="Linux's /proc only")

N = 1 << 20   # elements: 8 MiB in float64


def test_the_peak_counts_what_was_allocated_after_the_start():
    memory = PeakMemory()
    assert memory.method == "VmHWM"
    big = np.ones(8 * N)      # 64 MiB, written
    del big
    # (less what else the process held at the start and gave back meanwhile: a test
    # session's worker frees memory of earlier tests as it goes)
    assert memory.above() >= 48 << 20, memory.above()


def test_a_case_in_a_worker_reports_its_peak_and_one_in_process_none(tmp_path: Path):
    """Every witness of a check of 10⁶ elements holds several arrays of them: the peak
    is at least four; in the caller's process (a test session, another tool's memory
    readings) nothing is reset or reported."""
    path = tmp_path / "big.toml"
    path.write_text(f'[[case]]\nname = "big"\nexpr = "sum(tanh(x) * exp(-x))"\n'
                    f'inputs.x.shape = [{N}]\npoints = 1\nextreme_points = 0\n'
                    f'dtype = ["float64"]\n', encoding="utf-8")
    isolated = run([path], isolate=True).cases[0]
    assert isolated.status == "passed"
    assert isolated.peak_memory >= 4 * 8 * N
    again = CaseResult.from_dict(isolated.to_dict())
    assert again.peak_memory == isolated.peak_memory
    assert run([path]).cases[0].peak_memory is None
