"""The backward graph: nodes named like PyTorch's ``grad_fn`` classes, and the walk.

A node stands for one operation of the forward pass. ``next_functions`` holds one
``(node, 0)`` pair per differentiable input: the input's own ``grad_fn``, the
``AccumulateGrad`` node of a leaf that requires grad, or ``None`` for a constant.
:func:`run_backward` visits the nodes reachable from the output once each, in
topological order (iteratively: depth is unbounded), and is the one place where an
input's gradient is summed back over broadcast axes to the input's shape.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import threading
import weakref

import numpy as np

from ..base.arrays import unbroadcast

# PyTorch's own words (torch/csrc/autograd/saved_variable.cpp).
FREED = ("Trying to backward through the graph a second time (or directly access saved "
         "tensors after they have already been freed). Saved intermediate values of the "
         "graph are freed when you call .backward() or autograd.grad(). Specify "
         "retain_graph=True if you need to backward through the graph a second time or if "
         "you need to access saved tensors after calling backward.")

# Nodes for which PyTorch keeps a Python number operand as a Scalar attribute, not as an
# input: their next_functions lists the tensor operands only (x ** 2, 2 ** x, 2 - x).
SCALAR_ATTRIBUTE = frozenset({"PowBackward0", "PowBackward2", "RsubBackward1",
                              "ReciprocalBackward0"})


# --------------------------------------------------------------------------- grad mode

class _GradMode(threading.local):     # per thread, as in PyTorch
    enabled = True


grad_mode = _GradMode()


def is_grad_enabled() -> bool:
    return grad_mode.enabled


class no_grad(contextlib.ContextDecorator):
    """Context manager (or decorator) under which operations record no graph."""

    def __init__(self):
        self._prev: list[bool] = []

    def __enter__(self):
        self._prev.append(is_grad_enabled())
        grad_mode.enabled = False

    def __exit__(self, *exc):
        grad_mode.enabled = self._prev.pop()
        return False


# --------------------------------------------------------------------------- nodes

_SEQUENCE = itertools.count()


class Node:
    """One step of the backward pass. ``apply(grad)`` returns one gradient (or ``None``)
    per entry of ``next_functions``; ``_meta`` holds each input's (shape, dtype)."""

    __slots__ = ("next_functions", "_meta", "_retained", "_seq", "__weakref__")

    def __new__(cls, *args, **kwargs):
        self = super().__new__(cls)
        self._seq = next(_SEQUENCE)     # creation order: PyTorch's sequence_nr
        return self

    def name(self) -> str:
        return type(self).__name__

    def apply(self, grad):
        raise NotImplementedError

    def release(self) -> None:
        """Free saved values after a backward without ``retain_graph``."""

    def __repr__(self) -> str:
        return f"<{self.name()} object at {id(self):#x}>"


class AccumulateGrad(Node):
    """Sink of a leaf that requires grad: adds the incoming gradient to ``variable.grad``."""

    __slots__ = ("variable",)

    def __init__(self, variable):
        self.variable = variable
        self.next_functions = ()
        self._meta = ()
        self._retained = None

    def apply(self, grad):
        v = self.variable
        if v._grad is None:
            v._grad = type(v)(np.array(grad, dtype=v.dtype))      # own, writable copy
        else:
            v._grad.data += grad    # in place, as PyTorch does outside create_graph
        return ()


class RuleNode(Node):
    """A node for one row of the rule table: ``vjps[i](g, ans, *args)`` per input."""

    __slots__ = ("_vjps", "_args", "_ans", "_slots", "_saves", "_freed")

    def apply(self, grad):
        if self._freed:
            raise RuntimeError(FREED)
        args, ans, vjps = self._args, self._ans, self._vjps
        return [None if fn is None else vjps[i](grad, ans, *args)
                for (fn, _), i in zip(self.next_functions, self._slots)]

    def release(self):
        if self._saves:
            self._freed, self._args, self._ans = True, None, None


_CLASSES: dict[str, type] = {}


def node_class(name: str) -> type:
    """The node class called ``name`` (``ExpBackward0``...), made once."""
    cls = _CLASSES.get(name)
    if cls is None:
        cls = _CLASSES[name] = type(name, (RuleNode,), {"__slots__": ()})
    return cls


def edge(t) -> Node | None:
    """Where gradient for input ``t`` goes: its grad_fn, its AccumulateGrad, or nowhere."""
    if t.grad_fn is not None:
        return t.grad_fn
    if t._requires_grad:
        # held weakly by the leaf, strongly by the graphs that use it, as PyTorch does
        # (a leaf's grad_accumulator_ is a weak_ptr): no cycle leaf -> node -> leaf,
        # so a leaf and its .grad are freed when the last reference goes, not at gc
        acc = None if t._accumulator is None else t._accumulator()
        if acc is None:
            acc = AccumulateGrad(t)
            t._accumulator = weakref.ref(acc)
        return acc
    return None


def record(out, name: str, operands, args, vjps, saves: bool = True):
    """Make ``out`` the result of ``name`` applied to ``operands`` (Tensors or numbers).

    ``args`` are the raw values the VJPs receive after ``(g, ans)``; ``vjps[i]`` is
    ``None`` where operand ``i`` is not differentiable (the condition of ``where``).
    """
    node = node_class(name)()
    drop_numbers = name in SCALAR_ATTRIBUTE
    slots, nexts, meta = [], [], []
    for i, a in enumerate(operands):
        if vjps[i] is None:
            continue
        is_tensor = hasattr(a, "grad_fn")          # an engine Tensor (no import cycle)
        if drop_numbers and not is_tensor:
            continue
        slots.append(i)
        nexts.append((edge(a) if is_tensor else None, 0))
        meta.append((a.data.shape, a.data.dtype) if is_tensor else None)
    node.next_functions, node._meta, node._slots = tuple(nexts), tuple(meta), tuple(slots)
    node._vjps, node._args, node._ans, node._saves = vjps, args, out.data, saves
    node._freed, node._retained = False, None
    out.grad_fn, out._requires_grad = node, True
    return out


# --------------------------------------------------------------------------- the walk

def _fit(node: Node, index: int, grad, meta) -> np.ndarray:
    """The one place a gradient is brought to its input's shape (summing broadcast axes)
    and dtype, or rejected, in PyTorch's words, when it cannot be."""
    grad = np.asarray(grad)
    shape, dtype = meta
    if grad.shape != shape:
        try:
            fits = np.broadcast_shapes(grad.shape, shape) == grad.shape
        except ValueError:
            fits = False
        if not fits:
            raise RuntimeError(
                f"Function {node.name()} returned an invalid gradient at index {index} - "
                f"got {list(grad.shape)} but expected shape compatible with {list(shape)}")
        grad = unbroadcast(grad, shape)
    return grad if grad.dtype == dtype else grad.astype(dtype)


def run_backward(root: Node, grad: np.ndarray, retain_graph: bool = False) -> None:
    """Propagate ``grad`` (the cotangent of ``root``'s output) to every leaf below.

    Kahn's algorithm: count each node's incoming edges from the reachable graph once,
    then run a node when all its consumers have run, so each node sees the sum of its
    gradients exactly once. No recursion: a chain 10^5 nodes deep is fine.
    """
    deps = {root: 0}
    stack = [root]
    while stack:
        for child, _ in stack.pop().next_functions:
            if child is None:
                continue
            if child in deps:
                deps[child] += 1
            else:
                deps[child] = 1
                stack.append(child)

    grads = {root: grad}
    # PyTorch's order among ready nodes: AccumulateGrad first, then the node created
    # last. It shows when a second backward stops at a freed node part way.
    ready = [_priority(root)]
    with np.errstate(all="ignore"):   # PyTorch returns inf/nan silently, so do we
        while ready:
            node = heapq.heappop(ready)[2]
            g = grads.pop(node, None)
            if g is not None:
                if node._retained is not None:
                    _retain(node._retained(), g)
                outs = node.apply(g)
                for i, ((child, _), meta, gi) in enumerate(
                        zip(node.next_functions, node._meta, outs)):
                    if child is None or gi is None:
                        continue
                    gi = _fit(node, i, gi, meta)
                    grads[child] = gi if child not in grads else grads[child] + gi
            if not retain_graph:
                node.release()
            for child, _ in node.next_functions:
                if child is not None:
                    deps[child] -= 1
                    if deps[child] == 0:
                        heapq.heappush(ready, _priority(child))


def _priority(node: Node) -> tuple:
    return (not isinstance(node, AccumulateGrad), -node._seq, node)


def _retain(tensor, g) -> None:
    """A non-leaf's ``.grad`` after ``retain_grad()``: accumulated out of place."""
    if tensor is not None:
        tensor._grad = type(tensor)(np.array(g) if tensor._grad is None
                                    else tensor._grad.data + g)
