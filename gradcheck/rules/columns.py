"""What every family's columns share: SymPy and torch imported when a column that needs
them is first called (:func:`sympy_fn` and :func:`torch_fn` look a function up at call
time), so importing the table costs only NumPy and parsing or listing cases stays
instant; reductions over object arrays of SymPy scalars; a constant's exact SymPy value.
Each family's own columns are in its folder (``elementwise/columns.py``...).
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

import numpy as np


class _LazyModule:
    """A module imported on first attribute access (``sympy`` below: only the columns'
    bodies touch it, when called)."""

    def __init__(self, name: str):
        self._name = name
        self._module = None

    def __getattr__(self, attr: str):
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attr)


sympy = _LazyModule("sympy")


def _torch():
    import torch  # imported lazily: listing cases must not pay for torch

    return torch


def sympy_fn(fname: str) -> Callable[..., Any]:
    """``sympy.<fname>``, looked up when called (SymPy is imported lazily)."""

    def call(*args, **kwargs):
        return getattr(sympy, fname)(*args, **kwargs)

    call.__name__ = f"sympy_{fname}"
    return call


def torch_fn(fname: str) -> Callable[..., Any]:
    """``torch.<fname>``, looked up when called (torch is imported lazily)."""

    def call(*args):
        return getattr(_torch(), fname)(*args)

    call.__name__ = f"torch_{fname}"
    return call


def cfunction(name: str):
    """SymPy's C99 functions (``expm1``, ``log1p``): differentiable like ``exp(x) - 1``
    and ``log(1 + x)``, but lambdify prints them as NumPy's accurate ``expm1``/``log1p``,
    so the float64 reference does not lose the digits those forms cancel near 0."""
    from sympy.codegen import cfunctions

    return getattr(cfunctions, name)


def reduce_objects(a: np.ndarray, axis: tuple[int, ...], keepdims: bool,
                    combine: Callable[[list], Any]) -> np.ndarray:
    """Reduce an object array of SymPy scalars over ``axis`` with ``combine(elements)``."""
    a = np.asarray(a, dtype=object)
    keep = [d for d in range(a.ndim) if d not in axis]
    moved = np.transpose(a, keep + list(axis))
    kept_shape = moved.shape[: len(keep)]
    flat = moved.reshape(kept_shape + (-1,))
    out = np.empty(kept_shape, dtype=object)
    for idx in np.ndindex(*kept_shape):
        out[idx] = combine(list(flat[idx]))
    if keepdims:
        out = out.reshape([1 if d in axis else n for d, n in enumerate(a.shape)])
    return out


def top_two_gap(x, axis, keepdims):
    """Gap between the largest two elements along ``axis`` (where max switches)."""
    x = np.asarray(x, dtype=float)
    keep = [d for d in range(x.ndim) if d not in axis]
    flat = np.transpose(x, keep + list(axis)).reshape([x.shape[d] for d in keep] + [-1])
    if flat.shape[-1] < 2:
        return None
    part = -np.partition(-flat, 1, axis=-1)
    gap = part[..., 0] - part[..., 1]
    if keepdims:
        gap = gap.reshape([1 if d in axis else n for d, n in enumerate(x.shape)])
    return gap


def sympy_scalar_constant(text: str) -> sympy.Expr:
    """The exact SymPy number a constant's text stands for: a decimal literal (``0.1``
    becomes ``1/10``), ``pi`` or ``E``, possibly negated (``-pi``)."""
    from fractions import Fraction

    if text.startswith("-"):
        return -sympy_scalar_constant(text[1:])
    if text in ("pi", "E"):
        return getattr(sympy, text)
    f = Fraction(text)
    return sympy.Integer(f.numerator) if f.denominator == 1 else sympy.Rational(
        f.numerator, f.denominator)



