"""Custom differentiable functions, as ``torch.autograd.Function``.

::

    class Cube(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            return 3 * x ** 2 * grad_output

    y = Cube.apply(x)       # y.grad_fn is a CubeBackward node, which is also the ctx
"""

from __future__ import annotations

import numpy as np

from .graph import FREED, Node, edge, is_grad_enabled, no_grad
from .tensor import Tensor


class BackwardFunction(Node):
    """The node of one ``Function.apply`` call; ``forward`` and ``backward`` get it as
    ``ctx``. Its class is named ``<Function>Backward``, as in PyTorch."""

    _function: type = None          # the Function subclass, set on each subclass

    def save_for_backward(self, *tensors) -> None:
        self._saved = tensors

    @property
    def saved_tensors(self) -> tuple:
        if getattr(self, "_freed", False):
            raise RuntimeError(FREED)
        return getattr(self, "_saved", ())

    def release(self) -> None:
        if getattr(self, "_saved", None):       # PyTorch frees only what was saved
            self._saved, self._freed = None, True

    def apply(self, grad):
        name, n = self.name(), len(self.needs_input_grad)
        with no_grad():
            grads = self._function.backward(self, Tensor(grad))
        grads = grads if isinstance(grads, tuple) else (grads,)
        if len(grads) < n or any(g is not None for g in grads[n:]):
            raise RuntimeError(f"function {name} returned an incorrect number of gradients "
                               f"(expected {n}, got {len(grads)})")
        grads = [grads[i] for i in self._slots]
        return [None if g is None else (g.data if isinstance(g, Tensor) else np.asarray(g))
                for g in grads]


class Function:
    """Base class of custom ops: define static ``forward(ctx, *args)`` and
    ``backward(ctx, grad_output)`` (one gradient, or ``None``, per argument of
    ``forward``), then call ``apply(*args)``.

    Raises (from backward):
        RuntimeError: ``backward`` returned the wrong number of gradients, or one whose
            shape does not broadcast to its input's, in PyTorch's words.
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._backward_cls = type(f"{cls.__name__}Backward", (BackwardFunction,),
                                 {"_function": cls})

    @staticmethod
    def forward(ctx, *args):
        raise NotImplementedError("a Function subclass must define forward(ctx, ...)")

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError("a Function subclass must define backward(ctx, ...)")

    @classmethod
    def apply(cls, *args) -> Tensor:
        ctx = cls._backward_cls()
        ctx._retained = None
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a._requires_grad
                                     for a in args)
        with no_grad():
            out = cls.forward(ctx, *args)
        if isinstance(out, tuple):
            raise TypeError(f"{cls.__name__}.forward returned a tuple; gradcheck.engine "
                            "Functions return one tensor")
        out = Tensor(out)        # a fresh tensor, even when forward returned an input
        if is_grad_enabled() and any(ctx.needs_input_grad):
            # One edge per tensor argument (None for one that needs no grad); other
            # arguments get a gradient slot in backward's result but no edge.
            ctx._slots = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
            ctx.next_functions = tuple((edge(args[i]), 0) for i in ctx._slots)
            ctx._meta = tuple((args[i].shape, args[i].dtype) for i in ctx._slots)
            out.grad_fn, out._requires_grad = ctx, True
        return out
