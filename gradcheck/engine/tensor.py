"""``Tensor``: a NumPy array that records the operations applied to it (PyTorch semantics).

A tensor is a *leaf* when no recorded operation made it (``grad_fn is None``). A leaf
created with ``requires_grad=True`` gets its gradient summed into ``.grad`` by every
backward pass; a non-leaf's ``.grad`` stays ``None`` unless ``retain_grad()`` was called.
"""

from __future__ import annotations

import warnings
import weakref

import numpy as np

from .graph import edge, run_backward

_NONLEAF_GRAD = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
    "attribute won't be populated during autograd.backward(). If you indeed want the .grad "
    "field to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf "
    "Tensor. If you access the non-leaf Tensor by mistake, make sure you access the leaf "
    "Tensor instead. See github.com/pytorch/pytorch/pull/30531 for more information.")


def _size(shape) -> str:
    return f"torch.Size([{', '.join(map(str, shape))}])"


class Tensor:
    """An array with autograd: ``data`` (a NumPy array), ``grad``, ``grad_fn``."""

    __slots__ = ("data", "grad_fn", "_grad", "_requires_grad", "_accumulator", "__weakref__")
    __array_ufunc__ = None      # ndarray + Tensor defers to Tensor.__radd__

    def __init__(self, data, requires_grad: bool = False):
        self.data = data.data if isinstance(data, Tensor) else np.asarray(data)
        self.grad_fn = None
        self._grad = None
        self._accumulator = None     # a weak reference to its AccumulateGrad (graph.edge)
        self._requires_grad = False
        if requires_grad:
            self.requires_grad = True

    # ------------------------------------------------------------------ attributes
    shape = property(lambda self: self.data.shape)
    dtype = property(lambda self: self.data.dtype)
    ndim = property(lambda self: self.data.ndim)
    is_leaf = property(lambda self: self.grad_fn is None)

    def numel(self) -> int:
        return self.data.size

    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        if self.grad_fn is not None:
            if not flag:
                raise RuntimeError(
                    "you can only change requires_grad flags of leaf variables. If you want "
                    "to use a computed variable in a subgraph that doesn't require "
                    "differentiation use var_no_grad = var.detach().")
            return
        if flag and self.data.dtype.kind not in "fc":
            raise RuntimeError(
                "Only Tensors of floating point and complex dtype can require gradients")
        self._requires_grad = bool(flag)

    def requires_grad_(self, flag: bool = True) -> "Tensor":
        self.requires_grad = flag
        return self

    @property
    def grad(self) -> "Tensor | None":
        if self.grad_fn is not None and not self.retains_grad:
            warnings.warn(_NONLEAF_GRAD, UserWarning, stacklevel=2)
        return self._grad

    @grad.setter
    def grad(self, value) -> None:
        self._grad = None if value is None else Tensor(value)

    @property
    def retains_grad(self) -> bool:
        return self.grad_fn is not None and self.grad_fn._retained is not None

    def retain_grad(self) -> None:
        """Keep this non-leaf's gradient in ``.grad`` (a no-op on a leaf)."""
        if not self._requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self.grad_fn is not None:
            self.grad_fn._retained = weakref.ref(self)

    # ------------------------------------------------------------------ backward
    def backward(self, gradient=None, retain_graph: bool | None = None) -> None:
        """Accumulate ``gradientᵀ · d self / d leaf`` into the ``.grad`` of every leaf.

        Args:
            gradient: the cotangent ``v`` (``self``'s shape); optional for one element.
            retain_graph: keep saved values so that the graph can be walked again.

        Raises:
            RuntimeError: in PyTorch's words: ``self`` does not require grad, ``gradient``
                is missing for a non-scalar or has the wrong shape, or the graph was freed
                by an earlier backward.
        """
        # PyTorch's order: the gradient is made or checked first, then the graph.
        if gradient is None:
            if self._requires_grad and self.data.size != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            g = np.ones_like(self.data)
        else:
            g = np.asarray(gradient.data if isinstance(gradient, Tensor) else gradient)
            if g.shape != self.shape:
                raise RuntimeError(f"Mismatch in shape: grad_output[0] has a shape of "
                                   f"{_size(g.shape)} and output[0] has a shape of "
                                   f"{_size(self.shape)}.")
            g = g.astype(self.dtype, copy=False)
        root = edge(self)
        if root is None:
            raise RuntimeError(
                "element 0 of tensors does not require grad and does not have a grad_fn")
        run_backward(root, g, bool(retain_graph))

    # ------------------------------------------------------------------ conversions
    def detach(self) -> "Tensor":
        """The same data, cut from the graph (shares memory, as in PyTorch)."""
        return Tensor(self.data)

    def numpy(self) -> np.ndarray:
        if self._requires_grad:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use "
                               "tensor.detach().numpy() instead.")
        return self.data

    def item(self):
        if self.data.size != 1:
            raise RuntimeError(
                f"a Tensor with {self.data.size} elements cannot be converted to Scalar")
        return self.data.item()

    def __float__(self):
        return float(self.item())

    def __repr__(self) -> str:
        body = np.array2string(self.data, separator=", ", prefix="tensor(")
        extra = (f", grad_fn=<{self.grad_fn.name()}>" if self.grad_fn is not None
                 else ", requires_grad=True" if self._requires_grad else "")
        return f"tensor({body}, dtype={self.dtype}{extra})"

    # Operators (x + y, x @ W, -x, x < y) and the methods of one-argument ops (x.exp(),
    # x.sum(axis=1)) are attached by gradcheck.engine.ops, which needs this class.


def tensor(data, dtype=None, requires_grad: bool = False) -> Tensor:
    """A new leaf tensor holding a copy of ``data``.

    As ``torch.tensor``: Python floats become float32 unless ``dtype`` says otherwise;
    NumPy arrays keep their dtype.
    """
    if isinstance(data, Tensor):
        data = data.data
    if dtype is None and not isinstance(data, np.ndarray):
        array = np.array(data)
        data = array.astype(np.float32) if array.dtype == np.float64 else array
    return Tensor(np.array(data, dtype=dtype), requires_grad=requires_grad)

