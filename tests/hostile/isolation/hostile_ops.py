"""Ops that attack the process they run in (tests/test_hostile_isolation.py): each must
cost only its own case, never the run or its report."""

import ctypes
import os
import signal
import time

import torch


class Square(torch.autograd.Function):
    """A correct op: the cases around the hostile ones must still pass."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


def exit_zero(x):
    os._exit(0)   # a "success" exit in the middle of the run


def exit_one(x):
    os._exit(1)


def system_exit(x):
    raise SystemExit(0)


def keyboard_interrupt(x):
    raise KeyboardInterrupt


def segfault(x):
    ctypes.string_at(0)   # reads address 0: SIGSEGV


def sigkill(x):
    os.kill(os.getpid(), signal.SIGKILL)   # as the OOM killer would


def blocks_alarm(x):
    # the time limit's SIGALRM never arrives
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
    time.sleep(60)
    return x * x


def ignores_alarm(x):
    signal.signal(signal.SIGALRM, signal.SIG_IGN)
    end = time.monotonic() + 60
    while time.monotonic() < end:
        pass
    return x * x


def interrupts_its_process(x):
    """Sends SIGINT to the process that started its own, the judge's: with
    --in-process, the run's own (as a Ctrl-C would), which must stop the run and keep
    what finished. (A Ctrl-C reaches the terminal's foreground group, which the op's
    process has left: only the run is interrupted, and it ends the op's process.)"""
    os.kill(os.getppid(), signal.SIGINT)
    time.sleep(5)   # the signal's handler raises here
    return x * x


def slow_square(x):
    """Correct, but slow enough that a run of several can be interrupted half-way: the
    first call at each point sleeps $HOSTILE_SLOW_SECONDS and leaves a file in
    $HOSTILE_MARKS (when set) named by its process id and the point, so a test can count
    the cases begun and knows the processes that ran them."""
    marks = os.environ.get("HOSTILE_MARKS")
    try:
        point = "_".join(f"{v:.6e}" for v in x.detach().flatten().tolist())
    except RuntimeError:   # under torch.func.vmap (op.vmap): a batch has no values to read
        return x * x
    mark = os.path.join(marks, f"{os.getpid()}-{point}") if marks else None
    if mark is None or not os.path.exists(mark):
        if mark is not None:
            with open(mark, "w"):
                pass
        time.sleep(float(os.environ.get("HOSTILE_SLOW_SECONDS", "0.5")))
    return x * x
