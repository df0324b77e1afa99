"""The rounding model: how far a correct computation in a dtype may stray from the
exact value, per node and per cotangent, and the tolerances made from it.

- :mod:`.point`: what callers use: :func:`~.point.error_bounds` (a case's value and
  vᵀJ at a point), :func:`~.point.forward_bound` (a formula's forward), and
  :class:`~.point.PointBounds`, the one object per point that hands the forward bound
  of the one to the other;
- :mod:`.model`: :class:`~.model.RoundingModel`, the walk over the formula, forward
  then backward, and the small public protocol the family modules read it through;
- :mod:`.families`: the one dispatch by ``rule.family`` to one module per family:
  :mod:`.elementwise` (elementwise rows, reductions, comparisons), :mod:`.bilinear`
  (matmul, dot, convolutions), :mod:`.structure`, :mod:`.pooling`, :mod:`.composite`;
- :mod:`.summation` (γ(n)), :mod:`.blocks` (arrays a block of rows at a time),
  :mod:`.kept` (what the backward reads), :mod:`.slab` (large elementwise formulas by
  slabs);
- :mod:`.tolerance`: the one table of every tolerance factor.
"""
