"""Ops for commands.toml: each fails in a way whose message carries GitHub Actions
workflow commands (newlines, ``::cmd::``, ``##[cmd]``), bidi controls and line
separators, or an exception that cannot be turned into text. A report that prints
them must neutralise every one (tests/test_hostile_publish.py)."""

import torch

# Everything a hostile message may try: forge an annotation, mask gradcheck's own words,
# stop the runner reading commands (so the real annotations vanish), the old ##[ form,
# a line separator, a lone CR, a right-to-left override.
FORGED = ("boom\n::error file=forged.py,line=1::forged annotation\n"
          "  ::add-mask::gradcheck\n::stop-commands::tok\n##[error]old-form forged\n"
          "mid ##[warning]line\u2028::warning::after U+2028\r::notice::after CR\n"
          "\u202eevil\u2066bidi\u200f\x1b[2J")


def raises_forged(x):
    raise ValueError(FORGED)


class Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("::error::from __str__")


def raises_unprintable(x):
    raise Unprintable()


class NotText(Exception):
    def __str__(self):
        return 42


def raises_not_text(x):
    raise NotText()


# an exception type whose very name is a command
Forged = type("Forged\n::error::type name", (Exception,), {})


def raises_forged_type(x):
    raise Forged("plain")


class Flipped(torch.autograd.Function):
    """x**2 with its gradient's sign flipped: a real mismatch, under a hostile name."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return -2 * x * g
