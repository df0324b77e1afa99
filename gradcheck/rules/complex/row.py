"""A row of the complex table: one complex primitive, as named data.

A complex value is held as ``torch.view_as_real`` holds it (a last axis of 2: real
part, imaginary part), so a complex primitive is not computed by a column of its own:
its ``expand`` column lowers it, at parse time, to rows of the real table over that
layout (``z * w`` -> ``stack([zr*wr - zi*wi, zr*wi + zi*wr], -1)``), and every witness
(SymPy, the engine, torch, finite differences, the rounding model) checks the lowered
real program. The ``torch`` column is the same operation on complex torch tensors, for
the per-row tests against PyTorch's own complex autograd (tests/test_complex_rows.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ..families import COMPLEX
from ..row import Param


@dataclass(frozen=True, kw_only=True)
class ComplexRow:
    """One complex primitive. ``name`` is the real table's name of the operation it
    extends (``mul``, ``sum``, ``index``) or its own (``conj``, ``fft``).

    - ``expand(b, args, given)``: the lowering, building real rows with ``b`` (the
      parser's :class:`gradcheck.formula.complexes.Lowering`: ``b.row``, ``b.re``,
      ``b.im``, ``b.pack``...) from the operand nodes ``args`` (a complex one in the
      layout) and the parameters as written (``given``: name -> literal);
    - ``torch(*tensors, **given)``: the operation on complex torch tensors;
    - ``params``, ``symbol``, ``variadic``, ``arity``: how it is called, as a row of the
      real table (a row that extends one is called as that row is);
    - ``only``: a function of complex values alone (``real``, ``conj``, ``fft``): a call
      of it is lowered whatever its operands, where an operation of the real table
      (``exp``, ``sum``) is lowered only where an operand is complex.
    """

    name: str
    arity: int
    expand: Callable[..., Any]
    torch: Callable[..., Any]
    doc: str
    example: str
    params: tuple[Param, ...] = ()
    symbol: str | None = None
    variadic: str | None = None
    only: bool = False
    family: str = field(default=COMPLEX, init=False)   # (what families.NEEDS reads)
