"""What one forward pass did, seen op by op: a ``TorchFunctionMode`` records every torch
call of the loss (and forward hooks name the module running it), so the doctor can say
where the graph was cut, which op first made a NaN or inf, and which elementwise op
broadcast two shapes to a larger one."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import torch
from torch.overrides import TorchFunctionMode

# elementwise ops of two operands: where [N, 1] against [N] silently becomes [N, N]
BINARY = frozenset({
    "add", "sub", "mul", "div", "rsub", "true_divide", "pow", "sub_", "add_", "mul_",
    "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
    "__rtruediv__", "__pow__", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "soft_margin_loss",
    "kl_div", "poisson_nll_loss", "gaussian_nll_loss"})
# the calls that cut a tensor from the graph, by what the user wrote
CUTS = {"detach": ".detach()", "data": ".data", "item": ".item()", "tolist": ".tolist()",
        "numpy": "a NumPy round trip (.detach().numpy())"}
_CARRY = frozenset({"cpu", "to", "clone", "contiguous", "double", "float"})   # on the way
_HERE = os.path.dirname(os.path.abspath(__file__))
_TORCH = os.path.dirname(os.path.abspath(torch.__file__))


@dataclass
class Event:
    """One op worth reporting: its name, the module running it and the user's line."""

    op: str
    where: str
    line: str
    shapes: tuple = ()
    params: frozenset = frozenset()   # the parameters a cut tensor depended on
    node: object = None               # the output's grad_fn (kept alive)


def _name(func) -> str:
    name = getattr(func, "__name__", str(func))
    if name == "__get__":   # a property read: Tensor.data arrives as data.__get__
        name = getattr(getattr(func, "__self__", None), "__name__", name)
    return name


def user_line() -> str:
    """The innermost frame of the user's code (not torch's, not this package's)."""
    frame = sys._getframe(1)
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if not (path.startswith(_TORCH) or path.startswith(_HERE)):
            cwd = os.getcwd() + os.sep   # a project's own file, as its user names it
            shown = path[len(cwd):] if path.startswith(cwd) else path
            return f"{shown}:{frame.f_lineno}"
        frame = frame.f_back
    return "?"


def _tensors(args, kwargs) -> list:
    flat = list(args) + list((kwargs or {}).values())
    out = []
    for a in flat:
        if isinstance(a, torch.Tensor):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            out.extend(t for t in a if isinstance(t, torch.Tensor))
    return out


def finite(t) -> bool:
    if not isinstance(t, torch.Tensor) or not (t.is_floating_point() or t.is_complex()):
        return True
    return bool(torch.isfinite(t).all())


class Recorder(TorchFunctionMode):
    """Records, while active: ``cuts`` (graph cuts of tensors that depended on a
    parameter), ``broadcasts`` (binary ops whose result is larger than both operands),
    ``origins`` (for each non-finite output, the op where its NaN or inf was born:
    its own op when no input was non-finite, else its non-finite input's origin, so a
    harmless -inf attention mask that softmax makes finite again is no loss's origin)
    and
    ``nodes`` (each output's grad_fn with the op that made it, for the backward)."""

    def __init__(self, names: dict[int, str]):
        super().__init__()
        self.names = names            # id(parameter) -> its name
        self.stack: list[str] = []    # the modules running now, innermost last
        self.cuts: list[Event] = []
        self.broadcasts: list[Event] = []
        self.origins: dict[int, tuple] = {}   # id(tensor) -> (it, its Event)
        self.nodes: dict[int, Event] = {}
        self._detached: dict[int, tuple] = {}   # id(detached) -> (it, its cut)

    def where(self) -> str:
        return self.stack[-1] if self.stack else "loss_fn"

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = _name(func)
        if name == "_set_grad_enabled" or name.startswith("__") and name not in BINARY:
            return out
        ins = _tensors(args, kwargs)
        self._cut(name, ins, out)
        if isinstance(out, torch.Tensor):
            self._output(name, ins, out)
        return out

    def _cut(self, name: str, ins: list, out) -> None:
        if ins and id(ins[0]) in self._detached and self._detached[id(ins[0])][0] is ins[0]:
            event = self._detached[id(ins[0])][1]
            if name == "numpy":   # .detach().numpy(), maybe by way of .cpu()
                event.op = CUTS["numpy"]
            elif name in _CARRY and isinstance(out, torch.Tensor):
                self._detached[id(out)] = (out, event)
            return
        graded = [t for t in ins if t.requires_grad]
        if not graded:
            return
        how = CUTS.get(name)
        if how is None and not torch.is_grad_enabled():
            how = ("torch.inference_mode()" if torch.is_inference_mode_enabled()
                   else "torch.no_grad()")
        if how is None:
            return
        params = frozenset().union(*(self.reached(t) for t in graded))
        if not params:
            return
        event = Event(how, self.where(), user_line(), params=params)
        self.cuts.append(event)
        if name == "detach" and isinstance(out, torch.Tensor):
            self._detached[id(out)] = (out, event)

    def _output(self, name: str, ins: list, out: torch.Tensor) -> None:
        if out.grad_fn is not None:
            self.nodes.setdefault(id(out.grad_fn),
                                  Event(name, self.where(), "", node=out.grad_fn))
        if not finite(out):
            self._birth(name, ins, out)
        if name in BINARY and len(ins) >= 2 and out.grad_fn is not None:
            self._broadcast(name, ins[0], ins[1], out)

    def _birth(self, name: str, ins: list, out: torch.Tensor) -> None:
        inherited = [self.origins[id(t)][1] for t in ins
                     if id(t) in self.origins and self.origins[id(t)][0] is t]
        event = inherited[0] if inherited else Event(name, self.where(), user_line(),
                                                     shapes=tuple(out.shape))
        self.origins[id(out)] = (out, event)

    def origin(self, t) -> Event | None:
        """The op where the NaN or inf of ``t`` (an output seen) was born."""
        got = self.origins.get(id(t))
        return got[1] if got is not None and got[0] is t else None

    def _broadcast(self, name: str, a, b, out: torch.Tensor) -> None:
        # operands of different ranks: [N, 1] against [N] (a pairwise op written with
        # explicit singleton axes, [N, 1, D] against [1, N, D], is meant)
        if not (a.dim() and b.dim()) or a.dim() == b.dim():
            return
        try:   # the operands' common shape: a reducing loss returns less than that
            shape = torch.broadcast_shapes(a.shape, b.shape)
        except RuntimeError:
            return
        if shape.numel() > max(a.numel(), b.numel()):
            self.broadcasts.append(Event(
                name, self.where(), user_line(),
                shapes=(tuple(a.shape), tuple(b.shape), tuple(shape)), node=out.grad_fn))

    def reached(self, t: torch.Tensor) -> frozenset:
        """The names of the parameters ``t`` depends on, read from its grad_fn graph."""
        if t.grad_fn is None:
            return frozenset([self.names[id(t)]]) if id(t) in self.names else frozenset()
        found, seen, todo = set(), set(), [t.grad_fn]
        while todo:
            node = todo.pop()
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            var = getattr(node, "variable", None)
            if var is not None and id(var) in self.names:
                found.add(self.names[id(var)])
            todo.extend(n for n, _ in node.next_functions)
        return frozenset(found)


def graph_nodes(root) -> set[int]:
    """The ids of every node reachable from ``root`` (a loss's grad_fn)."""
    seen, todo = set(), [root]
    while todo:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        todo.extend(n for n, _ in node.next_functions)
    return seen


class ModuleNames:
    """Forward hooks on every submodule keeping ``recorder.stack`` the path of the
    module running now (``encoder.layers.0.linear1``); removed on exit."""

    def __init__(self, model: torch.nn.Module, recorder: Recorder):
        self.model, self.recorder, self.handles = model, recorder, []

    def __enter__(self):
        stack = self.recorder.stack
        for path, module in self.model.named_modules():
            label = path or type(module).__name__

            def pre(mod, inputs, label=label):
                stack.append(label)

            def post(mod, inputs, output):
                if stack:
                    stack.pop()
            self.handles.append(module.register_forward_pre_hook(pre))
            self.handles.append(module.register_forward_hook(post, always_call=True))
        return self

    def __exit__(self, *exc):
        for h in self.handles:
            h.remove()
        return False
