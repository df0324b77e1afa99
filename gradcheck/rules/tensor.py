"""What every family's tensor column shares. A tensor column holds exact tensor-level
adjoints, the matrix-calculus identities, written over a builder ``b`` of tensor expressions
(:class:`gradcheck.reference.texpr.Builder`) so that the reference can evaluate them in
float64 at the cost of the forward and print them as formulas.

Every function has the signature of :class:`gradcheck.rules.row.TensorRule`'s
``vjps``: ``(b, g, ans, *args, *params)``, each argument a tensor expression with a
``shape``. Nothing here imports the reference: the builder is passed in. Each family's
own adjoints are in its folder (``reduction/tensor.py``...).
"""

from __future__ import annotations

from .row import TensorRule


def _kept(b, g, shape, axis, keepdims):
    """A reduction's cotangent with its reduced axes back as size 1, broadcast to the
    argument's ``shape``: the adjoint of a sum is a broadcast."""
    if not keepdims:
        g = b.reshape(g, tuple(1 if d in axis else n for d, n in enumerate(shape)))
    return b.broadcast(g, shape)


def tensor_rule(*vjps) -> TensorRule:
    return TensorRule(vjps)
