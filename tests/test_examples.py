"""The examples run as written, and a failing check in a user's test prints pytest
approx's kind of report with gradcheck's own frames hidden."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent


def _pytest(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def test_the_examples_pass():
    run = _pytest("examples/")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "5 passed" in run.stdout


def test_a_wrong_op_fails_with_the_approx_style_table(tmp_path):
    (tmp_path / "test_wrong.py").write_text('''
import torch
import gradcheck

class HalfSquare(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return 0.5 * x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x * 2          # forgot the 1/2

def test_half_square():
    gradcheck.assert_op(HalfSquare, "0.5 * x**2", {"x": (6,)})
''')
    run = _pytest("test_wrong.py", cwd=tmp_path)
    out = run.stdout
    assert run.returncode == 1, out
    assert "GradientMismatch" in out
    assert "op.backward: Mismatched elements:" in out
    assert "Max absolute difference" in out and "Max relative difference" in out
    assert "Index" in out and "| Obtained" in out and "| Expected" in out
    assert "x.grad is 2 times the exact gradient" in out
    assert "reproduce: gradcheck.check_op(HalfSquare, '0.5 * x**2'" in out
    assert "gradcheck/testing.py" not in out       # helper frames are hidden
