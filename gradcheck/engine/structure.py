"""The structural rows whose PyTorch graph is not one node of the row, by hand: reshape
and flatten (torch's reshape: a view, an alias with computed strides, or a copy then a
view, by the operand's layout; flatten of a single axis is the tensor itself, no node),
and ``x[key]`` (one select, slice or unsqueeze view per entry of the subscript, or an
alias, with a flip first where a step is negative). Each node's VJP is the row's own
engine VJP, looked up when the backward runs (a patched table is what runs)."""

from __future__ import annotations

import numpy as np

from ..rules import RULES, keys
from ..rules.structure.columns import axis_of, flatten_shape, reshape_shape
from ..rules.structure.take import take_along_shape
from .graph import grad_mode, record
from .tensor import Tensor
from .views import _data, _derive, _expand, _reshape


def _vjp(name: str, params):
    """The engine VJP of row ``name`` with ``params``, for a node of one operand."""
    return lambda g, ans, a: RULES[name].vjp(0, g, ans, [a], params)


def _tensor(x) -> Tensor:
    return x if isinstance(x, Tensor) else Tensor(np.asarray(x))


def _node(name: str, x, params, grad_fn: str | None = None) -> Tensor:
    """One node of row ``name`` on ``x``: its NumPy forward (a view keeps its strides)."""
    rule, a = RULES[name], _data(x)
    return _derive(x, rule.call("numpy", [a], params),
                   grad_fn or rule.grad_fn_name([a], params), _vjp(name, params))


def reshape(x, shape):
    """torch.reshape(x, shape): ViewBackward0, ReshapeAliasBackward0 or CloneBackward0
    then UnsafeViewBackward0, as the operand's layout decides."""
    x = _tensor(x)
    params = RULES["reshape"].bind([x.shape], {"shape": shape})
    new = reshape_shape(x.shape, dict(params)["shape"])
    return _reshape(x, new, _vjp("reshape", params))


def flatten(x, start: int = 0, end: int = -1):
    """torch.flatten(x, start, end): a reshape; of a single axis, ``x`` itself."""
    x = _tensor(x)
    params = RULES["flatten"].bind([x.shape], {"start": start, "end": end})
    new = flatten_shape(x.shape, start, end)
    if x.ndim and axis_of(start, x.ndim) == axis_of(end, x.ndim):
        return x
    return _reshape(x, new, _vjp("flatten", params))


def index(x, key):
    """x[key], recorded as PyTorch records it (:func:`gradcheck.rules.keys.plan`)."""
    x = _tensor(x)
    RULES["index"].bind([x.shape], {"key": key})     # validated, as the row says
    axes, key = keys.positive(key, x.shape)
    if axes:
        x = _node("flip", x, (("axis", tuple(sorted(axes))),))
    for step in keys.plan(key, x.shape):
        if step[0] == "alias":
            sub = Ellipsis
        else:
            entry = None if step[0] == "unsqueeze" else step[2]   # (alone at axis 0:
            sub = (keys.Slice(),) * step[1] + (entry,) if step[1] else entry  # x[1:])
        x = _node("index", x, (("key", sub),))
    return x


def take_along_axis(x, idx, axis: int = 0):
    """torch.take_along_dim(x, idx, axis): x broadcast to the indices' shape but along
    axis (ExpandBackward0, recorded even where nothing is broadcast), then
    GatherBackward0, which saves the indices."""
    x, i = _tensor(x), _data(idx)
    params = RULES["take_along_axis"].bind([x.shape, i.shape], {"axis": axis})
    d = axis_of(axis, x.ndim)
    wide = take_along_shape(i.shape, x.shape, d)      # x's shape, broadcast but along d
    xb = _expand(x, wide)
    out = Tensor(RULES["take_along_axis"].call("numpy", [xb.data, i], params))
    if xb._requires_grad and grad_mode.enabled:
        def vjp(g, ans, a, b):
            return RULES["take_along_axis"].vjp(0, g, ans, [a, b], params)

        record(out, "GatherBackward0", (xb, idx), (xb.data, i), (vjp, None), saves=True)
    return out


BY_HAND = {"reshape": reshape, "flatten": flatten, "index": index,
           "take_along_axis": take_along_axis}
