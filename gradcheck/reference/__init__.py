"""The symbolic reference: the formula as a SymPy tree (:mod:`gradcheck.reference.lowering`),
differentiated exactly by reverse mode over its DAG (:mod:`.adjoint`, linear in the
formula's size where ``sympy.diff`` swells exponentially on nested formulas), compiled
once per case with ``lambdify``.

``Reference(case)`` builds one of three kinds, by the shape of the formula
(:func:`kind_of`, :func:`mode_of`), behind one interface (:class:`Reference`:
``evaluate``, ``evaluations``, ``sparsity``, ``hvp``, ``jvp``, ``mode``):

- :class:`ElementwiseReference` (``mode`` ``"elementwise"``; possibly under one final
  ``sum``/``mean``): every input is a single scalar symbol and the formula one scalar
  SymPy expression. Its partial derivatives are the Jacobian's diagonal; the compiled
  kernel runs on whole arrays, so a check is O(n) and works for millions of elements.
- :class:`TensorReference` (``"tensor"``: a formula that mixes elements, matmul,
  reductions over an axis, transpose, every structural row of which has a tensor
  column): the formula as a program of tensors, differentiated by reverse mode with
  the rule table's exact tensor adjoints, at real layer sizes; its Jacobian is never
  formed (no sparsity pattern).
- :class:`ExpandedReference` (``"expanded"``: a formula that mixes elements through a
  row without a tensor column): every input element is its own symbol and the formula
  an array of scalar expressions. One reverse sweep per output element gives its
  derivatives with respect to exactly the symbols it depends on (the Jacobian's
  sparsity), which is the exact Jacobian; vᵀJ is then a sum over its entries.

A ``let`` name listed in ``retain_grad`` becomes a symbol of its own (the other paths
from the inputs stay as they are), which is exactly what PyTorch's ``h.grad`` means.
"""

from .base import Reference, kind_of, mode_of
# Importing the kinds registers them with Reference (see .base).
from .elementwise import ElementwiseReference
from .expanded import EXPANSION_LIMIT, ExpandedReference
from .tensor import TensorReference

__all__ = ["EXPANSION_LIMIT", "ElementwiseReference", "ExpandedReference", "Reference",
           "TensorReference",
           "kind_of", "mode_of"]
