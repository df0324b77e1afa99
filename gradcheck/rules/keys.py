"""Subscripts (``x[0]``, ``x[:, 1:3]``, ``x[..., ::-1]``, ``x[:, None]``) as hashable data:
the ``key`` parameter of the ``index`` row, checked against the operand's shape, turned
into a NumPy key, spelled back as text, and planned as the view steps PyTorch records.

A key is kept as written (PyTorch's graph depends on the spelling: ``x[:, 0:]`` is
optimised away, ``x[:, -4:]`` is a slice): a single entry (``x[0]``) or a tuple of
entries (``x[0, 1:3]``), each an int, a :class:`Slice` (its parts as written, None where
omitted), ``None`` (a new axis) or ``Ellipsis``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..base.shapes import ShapeError

MAX_ENTRIES = 16     # entries of one subscript
MAX_PART = 1 << 31   # magnitude of an index or a slice bound


class Slice(NamedTuple):
    """``start:stop:step`` as written (None where omitted): hashable, unlike ``slice``."""

    start: int | None = None
    stop: int | None = None
    step: int | None = None

    def indices(self, n: int) -> tuple[int, int, int]:
        return slice(self.start, self.stop, self.step).indices(n)


def entries(key) -> tuple:
    """The key's entries: a written tuple's, or the one entry of ``x[entry]``."""
    return key if isinstance(key, tuple) and not isinstance(key, Slice) else (key,)


def _part(value, what: str):
    if value is None or (type(value) is int and abs(value) < MAX_PART):
        return value
    raise ShapeError(f"{what} must be an integer literal, got {value!r}")


def check(key) -> Any:
    """``key`` if it is a subscript of bounded literals (else ShapeError), slices as
    :class:`Slice`."""
    def one(e):
        if e is None or e is Ellipsis:
            return e
        if isinstance(e, Slice):
            if e.step == 0:
                raise ShapeError("a slice step cannot be zero")
            return Slice(*(_part(v, "a slice bound") for v in e))
        return _part(e, "an index")

    if isinstance(key, tuple) and not isinstance(key, Slice):
        if len(key) > MAX_ENTRIES:
            raise ShapeError(f"a subscript takes at most {MAX_ENTRIES} entries")
        return tuple(one(e) for e in key)
    return one(key)


def _dims(key, ndim: int) -> list[int | None]:
    """The input axis each entry indexes (None for a new axis and for ``...``)."""
    es = entries(key)
    if sum(e is Ellipsis for e in es) > 1:
        raise ShapeError("a subscript takes at most one ellipsis (...)")
    used = sum(e is not None and e is not Ellipsis for e in es)
    if used > ndim:
        raise ShapeError(f"too many indices for a tensor of {ndim} dimension"
                         f"{'s' if ndim != 1 else ''}: {used}")
    dims, d = [], 0
    for e in es:
        if e is Ellipsis:
            dims.append(None)
            d += ndim - used
        elif e is None:
            dims.append(None)
        else:
            dims.append(d)
            d += 1
    return dims


def shape(x: tuple[int, ...], key) -> tuple[int, ...]:
    """The shape of ``x[key]`` (raises ShapeError: an index out of range, too many)."""
    es, out, d = entries(key), [], 0
    dims = _dims(key, len(x))
    for e, dim in zip(es, dims):
        if e is Ellipsis:
            n = len(x) - sum(f is not None and f is not Ellipsis for f in es)
            out += x[d:d + n]
            d += n
        elif e is None:
            out.append(1)
        elif isinstance(e, Slice):
            out.append(len(range(*e.indices(x[dim]))))
            d += 1
        else:
            if not -x[dim] <= e < x[dim]:
                raise ShapeError(f"index {e} is out of range for axis {dim} of size "
                                 f"{x[dim]}")
            d += 1
    return tuple(out) + tuple(x[d:])


def numpy_key(key):
    """The key as NumPy (and Python) take it: slices as ``slice``."""
    def one(e):
        return slice(*e) if isinstance(e, Slice) else e

    if isinstance(key, tuple) and not isinstance(key, Slice):
        return tuple(one(e) for e in key)
    return one(key)


def text(key) -> str:
    """The subscript as written: ``[0, 1:3]``, ``[..., ::-1]``, ``[:, None]``."""
    def one(e):
        if e is Ellipsis:
            return "..."
        if isinstance(e, Slice):
            start, stop, step = ("" if v is None else str(v) for v in e)
            return f"{start}:{stop}" + (f":{step}" if step else "")
        return str(e)

    es = entries(key)
    lone = not (isinstance(key, tuple) and not isinstance(key, Slice))
    return "[" + ", ".join(map(one, es)) + ("," if len(es) == 1 and not lone else "") + "]"


def positive(key, x: tuple[int, ...]) -> tuple[tuple[int, ...], Any]:
    """``(axes, key2)`` with ``x[key] == flip(x, axes)[key2]`` and every step of key2
    positive: PyTorch slices with positive steps only, so a user flips first. A slice
    with step s < 0 over the indices i₀ > i₁ > ... of an axis of size n becomes, on the
    flipped axis (j = n - 1 - i), the slice from n - 1 - i₀ with step -s."""
    es, axes, out = entries(key), [], []
    for e, dim in zip(es, _dims(key, len(x))):
        if isinstance(e, Slice) and e.step is not None and e.step < 0:
            r, step = range(*e.indices(x[dim])), -e.step
            first = x[dim] - 1 - r[0] if len(r) else 0
            e = Slice(first, first + (len(r) - 1) * step + 1 if len(r) else 0, step)
            axes.append(dim)
        out.append(e)
    if not axes:
        return (), key
    return tuple(axes), tuple(out) if isinstance(key, tuple) and not isinstance(
        key, Slice) else out[0]


def plan(key, x: tuple[int, ...]) -> list[tuple]:
    """The views PyTorch's ``x[key]`` records (THPVariable_getitem and applySlicing in
    torch/csrc/autograd/python_variable_indexing.cpp), for a key of positive steps:
    ``("select", axis, i)``, ``("slice", axis, Slice)``, ``("unsqueeze", axis)`` or
    ``("alias",)``, in order. A lone entry is one view (a lone slice always a slice);
    in a tuple an int selects (the axis goes), a slice that keeps the whole axis
    (start 0 or omitted, stop at least the size, step 1) records nothing, ``...``
    skips axes, and a key that records nothing is an alias."""
    if not (isinstance(key, tuple) and not isinstance(key, Slice)):
        if key is None:
            return [("unsqueeze", 0)]
        if key is Ellipsis:
            return [("alias",)]
        return [("slice", 0, key)] if isinstance(key, Slice) else [("select", 0, key)]
    steps, d = [], 0
    used = sum(e is not None and e is not Ellipsis for e in key)
    for e in key:
        if e is Ellipsis:
            d += len(x) - used
        elif e is None:
            steps.append(("unsqueeze", d))
            d += 1
        elif isinstance(e, Slice):
            steps.append(("slice", d, e))
            d += 1
        else:
            steps.append(("select", d, e))
    return _drop_whole(steps, key, x) or [("alias",)]


def _drop_whole(steps: list[tuple], key, x) -> list[tuple]:
    """``steps`` without the slices that keep a whole axis (torch's applySlice returns
    the tensor itself for them), sizes read from the shape as the steps change it."""
    out, size = [], list(x)
    for step in steps:
        if step[0] == "slice":
            _, d, e = step
            whole = (e.start in (None, 0) and (e.stop is None or e.stop >= size[d])
                     and e.step in (None, 1))
            if whole:
                continue
            size[d] = len(range(*e.indices(size[d])))
        elif step[0] == "select":
            del size[step[1]]
        elif step[0] == "unsqueeze":
            size.insert(step[1], 1)
        out.append(step)
    return out
