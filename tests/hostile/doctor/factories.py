"""Hostile ``gradcheck doctor`` factories (tests/test_hostile_doctor.py runs each with
``gradcheck doctor hostile_factories:NAME``): names and output that would be GitHub
Actions workflow commands if printed raw, and writes to the runner's control files."""

import ctypes
import os
import subprocess
import sys

import torch

COMMAND = "::error file=x.py,line=1::forged by the factory"
# (a parameter's name cannot hold ".")
NAMED = "::error file=x,line=1::forged by a name"
ALL = [COMMAND, "##[error]forged", "::stop-commands::TOKEN", "::add-mask::FAIL",
       "  ::warning::indented", "\x1b[31mred\x1b[0m ::notice::after an escape"]


class _Cut(torch.nn.Module):
    """A model with a parameter named like a workflow command, cut from the loss."""

    def __init__(self):
        super().__init__()
        self.used = torch.nn.Linear(3, 1)
        self.register_parameter("x\n" + NAMED, torch.nn.Parameter(torch.ones(2)))
        self.register_parameter("y\r##[error]forged\u2028::error::z",
                                torch.nn.Parameter(torch.ones(2)))


def _loss(model, x):
    return model.used(x).sum()


def names():
    """Parameters whose names hold line breaks then workflow commands (never used: each
    is a param-no-grad finding that prints its name)."""
    return {"model": _Cut(), "loss_fn": _loss, "batch": torch.ones(4, 3)}


def _print_everywhere(where: str) -> None:
    for line in ALL:
        print(line)
        print(line, file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os.write(1, f"{COMMAND} os.write(1) {where}\n".encode())
    os.write(2, f"##[error]os.write(2) {where}\n".encode())
    subprocess.run(["sh", "-c", f"echo '{COMMAND} child {where}'; "
                                f"echo '##[error]child stderr' >&2"])
    libc = ctypes.CDLL(None)
    libc.printf(f"{COMMAND} printf {where}\n".encode())
    libc.fflush(None)


class _Loud(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 1)

    def forward(self, x):
        _print_everywhere("forward")
        return self.lin(x)


def _loud_loss(model, x):
    y = model(x).sum()
    y.register_hook(lambda g: _print_everywhere("backward") or g)
    return y


def _write_control_files() -> None:
    """Append to the runner's files the step would read, where the factory sees them."""
    for name, text in [("GITHUB_ENV", "LD_PRELOAD=/tmp/evil.so\n"),
                       ("GITHUB_OUTPUT", "verdict=pass\n"),
                       ("GITHUB_PATH", "/tmp/evil\n"),
                       ("GITHUB_STATE", "x=1\n"),
                       ("GITHUB_STEP_SUMMARY", "✅ 1 passed\n")]:
        path = os.environ.get(name)
        if path:
            with open(path, "a", encoding="utf-8") as f:
                f.write(text)


def loud():
    """Prints workflow commands by every route (print, sys.stderr, os.write, a child
    process, C printf) while the factory, the forward and the backward run, and writes
    to the GitHub Actions control files it can find in its environment."""
    _print_everywhere("factory")
    _write_control_files()
    return {"model": _Loud(), "loss_fn": _loud_loss, "batch": torch.ones(4, 3)}


def flood():
    """Ten megabytes of output, workflow commands included."""
    line = (COMMAND + " " + "x" * 60 + "\n").encode()
    for _ in range(10 * 1024 * 1024 // len(line)):
        os.write(1, line)
    return {"model": torch.nn.Linear(3, 1), "loss_fn": _loss_plain,
            "batch": torch.ones(4, 3)}


def _loss_plain(model, x):
    return model(x).sum()


def raises():
    """Prints, then raises with a message holding a workflow command."""
    _print_everywhere("before raising")
    raise RuntimeError("boom\n" + COMMAND)


def lingers():
    """Leaves a process behind that prints a workflow command later."""
    subprocess.Popen(["sh", "-c", f"sleep 1; echo '{COMMAND} late'"])
    return {"model": torch.nn.Linear(3, 1), "loss_fn": _loss_plain,
            "batch": torch.ones(4, 3)}


def dies():
    """Ends its process before the doctor reports, after printing."""
    _print_everywhere("dying")
    os._exit(0)


def parent_stdout():
    """Writes a workflow command into the doctor's own stdout through /proc (the parent
    process's descriptor 1): the capture cannot stop this where the same user may read
    the parent's /proc entries."""
    try:
        with open(f"/proc/{os.getppid()}/fd/1", "w") as out:
            out.write(COMMAND + " via the parent's stdout\n")
    except OSError:
        pass
    return {"model": torch.nn.Linear(3, 1), "loss_fn": _loss_plain,
            "batch": torch.ones(4, 3)}
