"""Validation of one declared input (``inputs.NAME = { shape, domain, value,
requires_grad, dtype }``) into an :class:`~gradcheck.cases.model.InputSpec`.

A float input (no ``dtype``: the run's float dtype) is sampled in a domain name or a
closed interval ``[lo, hi]``. An integer input (``dtype = "int64"`` or ``"int32"``) is
sampled uniformly in ``[lo, hi)``, the upper bound exclusive as in ``range`` and
``torch.randint``; a boolean one (``"bool"``) at random. Integer and boolean inputs are
exact constants of the formula: they never require grad (``requires_grad = true`` on
them is an error, as PyTorch refuses it), and a pinned ``value`` must hold integers
(booleans) of the domain.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ..base.errors import CaseFileError
from ..formula.parser import MAX_ELEMENTS
from ..sampling.domains import Modulus
from .model import DOMAINS, InputSpec, in_domain
from .vocabulary import INPUT_DTYPES

INPUT_KEYS = {"shape", "domain", "value", "requires_grad", "dtype"}
#: the magnitude an integer input's bounds may have: int32's range, and exact in float64
INTEGER_LIMIT = 2**31 - 1

Fail = Callable[[str], CaseFileError]


def read_input(name: str, spec: dict, fail: Fail) -> InputSpec:
    """The input ``name`` from its table ``spec`` (keys already checked against
    :data:`INPUT_KEYS`); ``fail(message)`` makes the error, located at the input."""
    shape = spec.get("shape", [])
    if not isinstance(shape, list) or not all(
            type(n) is int and 0 < n for n in shape) or len(shape) > 8:
        raise fail(f"input {name!r}: shape must be a list of at most 8 positive "
                   f"integers, got {shape!r}")
    if math.prod(shape) > MAX_ELEMENTS:
        raise fail(f"input {name!r} has {math.prod(shape)} elements; the limit is "
                   f"{MAX_ELEMENTS}")
    dtype = spec.get("dtype")
    if dtype == "complex":
        return _complex_input(name, tuple(shape), spec, fail)
    if dtype is not None:
        if dtype not in INPUT_DTYPES:
            raise fail(f"input {name!r}: dtype must be one of {', '.join(INPUT_DTYPES)} "
                       "or complex "
                       f"(a float input takes the case's dtype), got {dtype!r}")
        return _integer_input(name, tuple(shape), dtype, spec, fail)
    domain = read_domain(name, spec.get("domain", "real"), fail)
    requires_grad = spec.get("requires_grad", True)
    if not isinstance(requires_grad, bool):
        raise fail(f"input {name!r}: requires_grad must be true or false")
    value = None
    if "value" in spec:
        value = numbers(spec["value"], lambda m: fail(f"input {name!r}: {m}"))
        value = _shaped(name, value, shape, fail)
        if not np.all(in_domain(value, domain)):
            raise fail(f"input {name!r}: value lies outside its domain {domain!r}")
    return InputSpec(name, tuple(shape), domain, value, requires_grad)


def read_domain(name: str, domain: Any, fail: Fail) -> str | tuple[float, float]:
    """A float input's domain: a name of :data:`DOMAINS` or ``[lo, hi]``."""
    if isinstance(domain, str):
        if domain not in DOMAINS:
            raise fail(f"input {name!r}: unknown domain {domain!r}; use one of "
                       f"{', '.join(DOMAINS)} or [lo, hi]")
        return domain
    if (isinstance(domain, list) and len(domain) == 2
            and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                    and math.isfinite(v) and abs(v) <= 1e6 for v in domain)
            and domain[0] < domain[1]):
        return (float(domain[0]), float(domain[1]))
    raise fail(f"input {name!r}: a domain is a name or [lo, hi] with finite "
               f"lo < hi, got {domain!r}")


def _complex_input(name: str, shape: tuple, spec: dict, fail: Fail) -> InputSpec:
    """A complex input (complex128 in a float64 run, complex64 in float32), held as its
    ``[re, im]`` pairs (``torch.view_as_real``'s layout): each part is drawn in its
    domain, "real" or ``[lo, hi]``, or |z| in ``{ modulus = [lo, hi] }`` (the phase
    uniform); a pinned ``value`` holds ``[re, im]`` pairs."""
    raw = spec.get("domain", "real")
    domain = (_modulus(name, raw, fail) if isinstance(raw, dict)
              else read_domain(name, raw, fail))
    if isinstance(domain, str) and domain != "real":
        raise fail(f"input {name!r} is complex: its domain is \"real\" or [lo, hi] "
                   f"(for the real and imaginary parts alike) or {{ modulus = [lo, hi] }}, "
                   f"got {domain!r}")
    requires_grad = spec.get("requires_grad", True)
    if not isinstance(requires_grad, bool):
        raise fail(f"input {name!r}: requires_grad must be true or false")
    layout = (*shape, 2)
    value = None
    if "value" in spec:
        pairs = numbers(spec["value"], lambda m: fail(f"input {name!r}: {m}"))
        if pairs.ndim == 0 or pairs.shape[-1] != 2:
            raise fail(f"input {name!r} is complex: its value holds [re, im] pairs")
        value = _shaped(name, pairs, list(layout), fail)
        if not np.all(in_domain(value, domain)):
            raise fail(f"input {name!r}: value lies outside its domain {domain!r}")
    return InputSpec(name, layout, domain, value, requires_grad, complex=True)


def _modulus(name: str, domain: dict, fail: Fail) -> Modulus:
    """``{ modulus = [lo, hi] }``: |z| in [lo, hi], 0 <= lo < hi (finite, at most 1e6)."""
    bounds = domain.get("modulus")
    if (set(domain) == {"modulus"} and isinstance(bounds, list) and len(bounds) == 2
            and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                    and math.isfinite(v) and abs(v) <= 1e6 for v in bounds)
            and 0 <= bounds[0] < bounds[1]):
        return Modulus(float(bounds[0]), float(bounds[1]))
    extra = sorted(set(domain) - {"modulus"})
    raise fail(f"input {name!r}: a complex domain table is {{ modulus = [lo, hi] }} with "
               "finite 0 <= lo < hi (|z| in [lo, hi], its phase uniform), got "
               + (f"unknown key{'s' * (len(extra) > 1)} {', '.join(map(repr, extra))}"
                  if extra else repr(domain)))


def _integer_input(name: str, shape: tuple, dtype: str, spec: dict,
                   fail: Fail) -> InputSpec:
    """An integer or boolean input: exact, never requiring grad."""
    if spec.get("requires_grad", False) is not False:
        raise fail(f"input {name!r} is {dtype}: it cannot require grad (only floating "
                   "point tensors can); leave requires_grad out")
    if dtype == "bool":
        if "domain" in spec:
            raise fail(f"input {name!r} is bool: it takes no domain (its elements are "
                       "drawn true or false at random)")
        domain = (0, 2)
    elif "domain" in spec:
        domain = _integer_domain(name, spec["domain"], fail)
    elif "value" not in spec:
        raise fail(f"input {name!r} is {dtype}: give its domain = [lo, hi] (hi "
                   "exclusive), or pin its value")
    else:
        domain = None
    value = None
    if "value" in spec:
        value = _shaped(name, _integers(spec["value"], dtype,
                                        lambda m: fail(f"input {name!r}: {m}")), shape,
                        fail)
        if domain is None:
            domain = (int(value.min()), int(value.max()) + 1) if value.size else (0, 1)
        if not np.all(in_domain(value, domain, integer=True)):
            raise fail(f"input {name!r}: value lies outside its domain "
                       f"[{domain[0]}, {domain[1]}) (the upper bound is exclusive)")
    return InputSpec(name, shape, domain, value, requires_grad=False, dtype=dtype)


def _integer_domain(name: str, domain: Any, fail: Fail) -> tuple[int, int]:
    if (isinstance(domain, list) and len(domain) == 2
            and all(type(v) is int and abs(v) <= INTEGER_LIMIT for v in domain)
            and domain[0] < domain[1]):
        return (domain[0], domain[1])
    raise fail(f"input {name!r}: an integer input's domain is [lo, hi] with integers "
               f"lo < hi (hi exclusive, at most {INTEGER_LIMIT} in magnitude), got "
               f"{domain!r}")


def _shaped(name: str, value: np.ndarray, shape: list, fail: Fail) -> np.ndarray:
    """A pinned value at the input's shape (a single number fills it)."""
    if value.shape == tuple(shape):
        return value
    if value.ndim != 0:
        raise fail(f"input {name!r}: value has shape {list(value.shape)} but the input's "
                   f"shape is {shape}")
    return np.full(shape, value[()], dtype=value.dtype)


def _flat(raw: Any, ok: Callable[[Any], bool], what: str, fail) -> None:
    """Every leaf of the nested lists ``raw`` passes ``ok``, and they are bounded."""
    count, stack = 0, [raw]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif not ok(item):
            raise fail(f"expected {what}, found {item!r}")
        else:
            count += 1
            if count > MAX_ELEMENTS:
                raise fail(f"too many {what}")


def _array(raw: Any, dtype, fail) -> np.ndarray:
    try:
        return np.array(raw, dtype=dtype)
    except (ValueError, OverflowError):
        raise fail("nested lists must be rectangular") from None


def numbers(raw: Any, fail) -> np.ndarray:
    """Nested lists of finite numbers -> float64 array (ragged lists are an error)."""
    _flat(raw, lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
          "numbers", fail)
    value = _array(raw, np.float64, fail)
    if not np.all(np.isfinite(value)):
        raise fail("numbers must be finite")
    return value


def _integers(raw: Any, dtype: str, fail) -> np.ndarray:
    """Nested lists of integers (``dtype`` int64/int32) or of true/false (``bool``)."""
    if dtype == "bool":
        _flat(raw, lambda v: isinstance(v, bool), "true or false", fail)
        return _array(raw, np.bool_, fail)
    _flat(raw, lambda v: type(v) is int and abs(v) <= INTEGER_LIMIT,
          f"integers of at most {INTEGER_LIMIT} in magnitude", fail)
    return _array(raw, np.dtype(dtype), fail)
