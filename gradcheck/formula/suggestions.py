"""Suggestions in parse errors: the name that exists for a misspelled or foreign one
(``clip`` -> ``clamp(x, min, max)``), the row that takes as many tensors as were given
(``max(x, y)`` -> ``maximum(a, b)``), and how a row is called."""

from __future__ import annotations

from ..base.spelling import closest
from ..rules import FUNCTIONS, RULES
from ..rules.complex import COMPLEX, COMPLEX_ONLY

#: Every name a formula calls: the real table's functions and the complex table's
#: functions of complex values (conj, real, view_as_complex...).
CALLABLE = frozenset(FUNCTIONS | COMPLEX_ONLY)

# Names people reach for, from NumPy and PyTorch, and the row that does the job.
_ALIASES = {"clip": "clamp", "cat": "concat", "concatenate": "concat", "amax": "max",
            "amin": "min", "absolute": "abs", "arctan2": "atan2", "power": "pow",
            "arctan": "atan", "arcsin": "asin", "arccos": "acos", "arctanh": "atanh",
            "arcsinh": "asinh", "arccosh": "acosh", "logistic": "sigmoid", "expit":
            "sigmoid", "swish": "silu", "swapaxes": "transpose", "view": "reshape",
            "matmul": "matmul", "mm": "matmul", "bmm": "matmul", "inner": "dot",
            "average": "mean", "sqr": "square", "log_sum_exp": "logsumexp",
            "conjugate": "conj", "arg": "angle", "phase": "angle"}


def suggest(name: str, known=None, suffix: str = "(...)") -> str:
    """"; did you mean ...?" for a misspelled or foreign ``name``: the row a NumPy or
    PyTorch name stands for, else the closest of ``known`` (the callable rows)."""
    rows = known is None   # a function's name: only a close one (short names: looser)
    known = sorted(CALLABLE) if rows else list(known)
    if rows and name in _ALIASES or name in _ALIASES and _ALIASES[name] in known:
        return f"; did you mean {usage(_ALIASES[name])}?"
    close = closest(name, known, cutoff=0.75 if rows else 0.6)
    if close is None:
        return ""
    return f"; did you mean {usage(close) if suffix == '(...)' else close + suffix}?"


def suggest_arity(fname: str, count: int) -> str:
    """"; did you mean maximum(a, b)?" where another row of a related name takes
    ``count`` tensors (``max`` reduces one tensor, ``maximum`` compares two)."""
    for other in sorted(FUNCTIONS):
        rule = RULES[other]
        if (other != fname and (other.startswith(fname) or fname.startswith(other))
                and rule.variadic is None and rule.arity == count):
            return f"; did you mean {usage(other)}?"
    return ""


def usage(name: str) -> str:
    """``name`` as a user calls it: its operands and parameters (``clamp(x, min, max)``)."""
    rule = RULES[name] if name in RULES else COMPLEX[name]
    operands = ["x"] if rule.arity == 1 else [f"{c}" for c in "abcdefgh"[: rule.arity]]
    if rule.symbol is not None:   # an operator: matmul is a @ b
        return rule.spell(operands)
    if rule.variadic == "list":
        operands = ["[a, b]"]
    return f"{name}({', '.join([*operands, *(p.name for p in rule.params)])})"


