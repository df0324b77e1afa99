"""A process forked from one whose torch ran a parallel region (GNU OpenMP) waits
forever at its own first one unless it runs one thread (gradcheck.process.threads
.after_fork): an op's process forked by the judge in a library call that set no thread
limit (the test suite and the command line set OMP_NUM_THREADS=1, which hides it).
A hang is caught by the subprocess's limit, far above the seconds the case takes, so a
busy machine does not fail it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from gradcheck.process.threads import VARIABLES

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import torch
torch.set_num_threads(2)
torch.ones(1 << 20).exp().sum()           # the judge runs a parallel region: a team of 2
from gradcheck.cases import load_cases
from gradcheck.checking.case import run_case
case, = [c for c in load_cases("cases/ops/idioms.toml")
         if c.name == "label-smoothing-cross-entropy-unsmoothed"]
print(run_case(case, "float64", timeout=None).status)
"""


def test_an_op_forked_from_a_judge_with_openmp_threads_does_not_hang():
    env = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["passed"], proc.stdout
