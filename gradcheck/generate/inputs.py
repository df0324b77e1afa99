"""The checks of :func:`gradcheck.strategies.formulas`' ``inputs`` and ``shapes``: each
name may name an input, each shape is a list of at most 8 positive integers within the
parser's element limit (Hypothesis's ``InvalidArgument`` otherwise)."""

from __future__ import annotations

import keyword
import math
from typing import Any, Mapping, Sequence

import numpy as np
from hypothesis.errors import InvalidArgument

from ..formula.parser import CONSTANTS, MAX_ELEMENTS
from ..rules import FUNCTIONS


def check_shape(shape: Any, what: str) -> tuple[int, ...]:
    if isinstance(shape, (str, bytes)) or not isinstance(shape, (Sequence, np.ndarray)) \
            or not all(isinstance(n, (int, np.integer)) and not isinstance(n, bool)
                       and n > 0 for n in shape) or len(shape) > 8:
        raise InvalidArgument(f"{what} must be a list of at most 8 positive integers, got "
                              f"{shape!r}")
    if math.prod(shape) > MAX_ELEMENTS:
        raise InvalidArgument(f"{what} has more than {MAX_ELEMENTS} elements")
    return tuple(int(n) for n in shape)


def check_inputs(inputs: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(inputs, Mapping) or not inputs:
        raise InvalidArgument(f"inputs must be a non-empty dict of name -> shape or "
                              f"input table, got {inputs!r}")
    out: dict[str, Any] = {}
    for name, value in inputs.items():
        if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name) \
                or name in FUNCTIONS or name in CONSTANTS or name in ("axis", "keepdims"):
            raise InvalidArgument(f"{name!r} cannot name an input")
        if isinstance(value, Mapping):
            table = dict(value)
            table["shape"] = list(check_shape(table.get("shape", []), f"inputs[{name!r}]"))
            out[name] = table
        else:
            out[name] = check_shape(value, f"inputs[{name!r}]")
    return out
