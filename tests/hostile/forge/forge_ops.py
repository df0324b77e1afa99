"""Ops that try to forge their own verdict, bleed into later cases, or speak in the CI
log (tests/test_hostile_forge.py). Every op here whose name starts with ``Wrong`` has a
wrong backward (3x where the reference x ** 2 has 2x) and some trick to get it passed;
each must be reported failed. The ``Right`` ops are correct and must pass whatever ran
before them."""

from __future__ import annotations

import ctypes
import gc
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


class WrongSquare(Square):
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x * g


def _forging(trick):
    """A wrong square whose forward plays ``trick`` first."""

    class Forging(WrongSquare):
        @staticmethod
        def forward(ctx, x):
            trick()
            return WrongSquare.forward(ctx, x)

    Forging.__name__ = Forging.__qualname__ = f"Wrong_{trick.__name__}"
    return Forging


# ----------------------------------------------------------------- forged verdicts

def patch_tally():
    """Make every tally of gradcheck's report a pass (the judge's, were it here)."""
    import gradcheck.checking.compare as compare
    from gradcheck.base.result import PASSED, WitnessResult

    compare.Tally.result = lambda self: WitnessResult(self.witness, PASSED)
    compare.Tally.mismatched = 0


def loosen_stack():
    """Walk every frame and every object and set each check's atol to 1e9."""
    frame = sys._getframe()
    while frame is not None:
        for value in list(frame.f_locals.values()):
            if hasattr(value, "atol"):
                try:
                    value.atol = 1e9
                except Exception:
                    pass
        frame = frame.f_back
    for obj in gc.get_objects():
        if type(obj).__name__ == "Tally":
            obj.atol = obj.rtol = 1e9


def replace_numpy_abs():
    np.abs = np.absolute = lambda a, *args, **kwargs: np.zeros_like(np.asarray(a))


def raise_dtype_error():
    from gradcheck.checking.opcheck.loader import OpDtypeError

    raise OpDtypeError("this op cannot run in float64")


def write_fake_results():
    """Write a fake result, and a pickle that would run code, into every descriptor
    that may lead to the run (the worker's result pipe was one)."""
    import pickle

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {os.environ.get('FORGE_MARK', '/nonexistent')}",))

    message = pickle.dumps(("result", Payload()))
    for fd in range(3, 256):
        try:
            os.write(fd, len(message).to_bytes(4, "big") + message)
        except OSError:
            pass


WrongPatchTally = _forging(patch_tally)
WrongLoosenStack = _forging(loosen_stack)
WrongNumpyAbs = _forging(replace_numpy_abs)
WrongRaisesDtypeError = _forging(raise_dtype_error)
WrongWritesPipes = _forging(write_fake_results)


class TrueDetach(torch.Tensor):
    """A tensor whose ``.detach()`` shows what the output should have been."""

    def detach(self):
        return (torch.Tensor.detach(self) - 1).as_subclass(torch.Tensor)


class WrongDetachLies(Square):
    """Forward off by one; its output's detach() says the true x ** 2."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return (x * x + 1).as_subclass(TrueDetach)


class RightGradWrongBackward(torch.Tensor):
    """autograd.grad is right; the ``.backward()`` training calls is wrong."""

    def backward(self, gradient=None, *args, **kwargs):
        return torch.Tensor.backward(self, gradient * 1.5, *args, **kwargs)


def wrong_backward_method(x):
    return Square.apply(x).as_subclass(RightGradWrongBackward)


def gelu_tanh_as_erf(x):
    """Patches F.gelu to the tanh approximation, then computes it: checked against the
    exact (erf) gelu, it must fail, whatever the judge's F.gelu would have said."""
    exact = F.gelu
    F.gelu = lambda t, approximate="none": exact(t, approximate="tanh")
    torch.nn.functional.gelu = F.gelu
    return F.gelu(x)


# ----------------------------------------------------------------- bleeding state

def leave_grad_disabled_and_patch(x):
    """A right square that leaves a poisoned world behind: grad mode off, float32 as
    the default dtype, numpy.abs and F.gelu replaced, gradcheck's tally passing
    everything, a module swapped in sys.modules, the environment changed."""
    out = Square.apply(x)
    torch.set_grad_enabled(False)
    torch.set_default_dtype(torch.float32)
    replace_numpy_abs()
    F.gelu = lambda t, approximate="none": t
    patch_tally()
    sys.modules["forge_victim"] = sys.modules[__name__]
    os.environ["GRADCHECK_NO_CACHE"] = "0"
    os.environ["FORGE_POISON"] = "1"
    return out


def right_square(x):
    """Correct; fails if the world it was given is poisoned."""
    assert torch.is_grad_enabled() and "FORGE_POISON" not in os.environ
    return Square.apply(x)


def wrong_square(x):
    return WrongSquare.apply(x)


# ----------------------------------------------------------------- the CI log

COMMANDS = ["::error file=cases/a.toml,line=1::forged by the op",
            "::stop-commands::FORGETOKEN",
            "::add-mask::FAIL",
            "##[error]forged v1",
            "  ::warning::indented"]


def speaks(x):
    """Correct, and prints workflow commands every way a process can."""
    for line in COMMANDS:
        print(line)
        print(line, file=sys.stderr)
        os.write(1, (line + "\n").encode())
        os.write(2, (line + "\n").encode())
    sys.stdout.flush()
    subprocess.run(["sh", "-c", "printf '%s\\n' '::error::from a child' '##[error]child'"],
                   check=False)
    libc = ctypes.CDLL(None)
    libc.printf(b"::error::from C printf\n")
    libc.fflush(None)
    for name in ("GITHUB_STEP_SUMMARY", "GITHUB_ENV", "GITHUB_OUTPUT", "GITHUB_PATH"):
        path = os.environ.get(name)
        if path:   # (never set here: the op's process has none of them)
            with open(path, "a") as f:
                f.write("LD_PRELOAD=/tmp/evil.so\n## \u2705 1 passed\n")
    return Square.apply(x)


def environment_seen(x):
    """Fails (raises) when any CI control variable reached the op."""
    seen = [n for n in os.environ if n.startswith(("GITHUB_", "ACTIONS_", "RUNNER_"))]
    if seen:
        raise RuntimeError(f"the op sees {seen}")
    return Square.apply(x)


# ----------------------------------------------------------------- layouts

class WrongWhenStrided(Square):
    """Right for contiguous inputs; for a non-contiguous one its backward reads the
    input's memory as if it were contiguous (a kernel that ignores strides)."""

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        if x.is_contiguous():
            return 2 * x * g
        flat = torch.as_strided(x, x.shape, torch.empty(x.shape).stride())
        return 2 * flat * g


class MatmulWrongWhenTransposed(torch.autograd.Function):
    """x @ w, right unless w comes transposed: then its backward uses w's storage as
    if w were contiguous."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x @ w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        if not w.is_contiguous():
            w = torch.as_strided(w, w.shape, torch.empty(w.shape).stride())
        return g @ w.mT, x.mT @ g
