"""op.shapes: what a Function's own ``backward`` returns, judged by PyTorch's contract for
it (PyNode::apply in torch/csrc/autograd/python_function.cpp, then validate_outputs in
torch/csrc/autograd/engine.cpp; tests/test_op_shapes.py holds each rule against real
autograd).

What autograd rejects fails: more gradients than forward took arguments (unless the
extra ones are None) or fewer, a gradient for a non-tensor argument, a shape its input's
does not broadcast to, a complex gradient for a real input, a tensor on another device
(unless 0-d). What autograd accepts but changes is a note, or a failure under
``strict_shapes``: trailing Nones (dropped), a gradient for an input that needs none
(discarded unchecked), None for one that needs one (zero), a shape the input's
broadcasts to (summed back to it), another dtype (cast). Of these, trailing Nones (the
defaulted non-tensor arguments' gradients) and the sum back over broadcast axes are
PyTorch's documented contract, which a backward relies on by design: contract notes,
which the reports leave to ``-v``; the others may well be slips, and stay notes."""

from __future__ import annotations

from dataclasses import dataclass

from ..compare import Finding
from ..diagnose import diagnose
from ...bounds.tolerance import pattern_tolerance


@dataclass(frozen=True)
class _Contract:
    """How one op's backward is judged: its name in messages, and whether what autograd
    accepts but changes fails (``strict_shapes``) or is a note."""

    name: str
    strict: bool
    dtype: str

    def accepted(self, message: str, autograd: str, contract: bool = False) -> Finding:
        """A change autograd makes: a failure under strict_shapes, else a note, or with
        ``contract`` a contract note (what PyTorch documents a backward may do: trailing
        Nones, a gradient in the broadcast shape; reports show it with -v only)."""
        if self.strict:   # the project wants backward's own return exact
            return Finding(problem=message)
        if contract:
            return Finding(contract=f"{message}: {autograd}")
        return Finding(note=f"{message}: {autograd}")


def shapes(raw: list | None, op: dict, case, leaves: dict, exact: dict,
           dtype: str) -> list[Finding]:
    """The findings of op.shapes at one point and cotangent: ``raw``, what the op's
    own backward returned (each a :class:`~gradcheck.checking.opcheck.process.Sent` or None; None
    for a plain callable, which has no backward of its own); ``op``: the op's
    ``info`` (its name and how many gradients autograd expects); ``leaves``: the
    inputs as the op's process made them (a Sent each)."""
    if raw is None:
        return []
    contract = _Contract(f"{op['name']}.backward", case.strict_shapes, dtype)
    from .loader import arguments

    positional, keywords = arguments(case)
    given = positional + [a for _, a in keywords]    # one gradient each, in this order
    raw, found = _count(contract, raw, int(op["count"]))
    if raw is None:
        return [Finding(checked=1), *found]
    plain = [(k, a.value, g) for k, (a, g) in enumerate(zip(given, raw), 1)
             if a.input is None]
    found += _non_tensor_arguments(contract, plain)
    for a, g in zip(given, raw):
        if a.input is not None:
            spec = case.input[a.input]
            found += _input(contract, spec, g, leaves[spec.name], exact)
    return [Finding(checked=1), *found]


def _count(c: _Contract, raw: tuple, count: int):
    """(the gradients autograd goes on with, or None when it rejects their number;
    the findings about their number). ``count``: forward's arguments after ctx."""
    found = []
    if len(raw) > count and all(g is None for g in raw[count:]):
        found.append(c.accepted(
            f"{c.name} returned {len(raw)} gradients; forward was given {count} "
            "arguments", "autograd drops the trailing None" + "s" * (len(raw) - count > 1),
            contract=True))
        raw = raw[:count]
    if len(raw) != count:
        found.append(Finding(problem=f"{c.name} returned {len(raw)} gradients; forward "
                                     f"was given {count} arguments (autograd rejects "
                                     "this)"))
        return None, found
    return raw, found


def _non_tensor_arguments(c: _Contract, plain: list) -> list[Finding]:
    """``plain``: (argument number from 1, value, the gradient returned for it)."""
    return [Finding(problem=f"{c.name} returned a gradient for argument {k} ({arg!r}), "
                            "which is not a tensor (autograd rejects this)")
            for k, arg, g in plain if g is not None]


def _input(c: _Contract, spec, g, x, exact: dict) -> list[Finding]:
    """The gradient backward returned for one tensor input ``x``."""
    if g is None:
        return ([c.accepted(f"{c.name} returned None for {spec.name}, which needs a "
                            "gradient", "autograd takes it as zero")]
                if spec.requires_grad else [])
    found = []
    if not spec.requires_grad:
        found.append(c.accepted(f"{c.name} returned a gradient for {spec.name}, which "
                                "needs none (ctx.needs_input_grad is False there)",
                                "autograd discards it unchecked"))
        if not c.strict:
            return found
    if g.kind != "tensor":
        return found + [Finding(problem=f"{c.name} returned {g.type} for "
                                        f"{spec.name}, neither a tensor nor None")]
    return (found + _shape(c, spec, g, x, exact) + _dtype(c, spec, g, x)
            + _device(c, spec, g, x))


def _shape(c: _Contract, spec, g, x, exact: dict) -> list[Finding]:
    got, want = tuple(g.shape), tuple(x.shape)
    if got == want:
        return []
    message = (f"{c.name} returned a gradient of shape {list(got)} for {spec.name} of "
               f"shape {list(want)}")
    if _expandable(want, got):
        found = [c.accepted(message, f"autograd sums it back to {list(want)} over the "
                                     "broadcast axes", contract=True)]
    else:
        found = [Finding(problem=f"{message}, which autograd rejects (the input's shape "
                                 "does not broadcast to it)")]
    if c.strict or not _expandable(want, got):   # a failure: say what the gradient is
        rtol, atol = pattern_tolerance(c.dtype)
        found += [Finding(diagnosis=d) for d in diagnose(
            {spec.name: g.values}, {spec.name: exact.get(spec.name)},
            rtol=rtol, atol=atol, complex=(spec.name,) if spec.complex else ())]
    return found


def _dtype(c: _Contract, spec, g, x) -> list[Finding]:
    if g.dtype == x.dtype:
        return []
    message = f"{c.name} returned a {g.dtype} gradient for {spec.name} of dtype {x.dtype}"
    if _complex(g.dtype) and not _complex(x.dtype):
        return [Finding(problem=f"{message}, which autograd rejects (complex for a real "
                                "input)")]
    return [c.accepted(message, f"autograd casts it to {x.dtype}")]


def _device(c: _Contract, spec, g, x) -> list[Finding]:
    # (an engine Tensor has no device)
    if x.device is None or g.device == x.device:
        return []
    message = f"{c.name} returned a gradient on {g.device} for {spec.name} on {x.device}"
    if g.ndim == 0:
        return [c.accepted(message, f"autograd moves a 0-d gradient to {x.device}")]
    return [Finding(problem=f"{message}, which autograd rejects")]


def _expandable(shape: tuple, grad: tuple) -> bool:
    """Whether a tensor of ``shape`` broadcasts to ``grad``'s shape: then autograd sums a
    gradient of that shape back to ``shape`` (at::is_expandable_to, the test in
    validate_outputs)."""
    return len(shape) <= len(grad) and all(
        n in (1, m) for n, m in zip(reversed(shape), reversed(grad)))


def _complex(dtype: str) -> bool:
    """A complex dtype, torch's or NumPy's (the engine's), by name."""
    return "complex" in dtype

