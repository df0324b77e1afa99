"""What the op's process sends back, checked before the judge reads it: the op's
failure (:class:`OpRaised`), a tensor's description (:class:`Sent`), and the form of
each reply's parts (arrays, real arrays, lists, named gradients, batches). Anything
else is a malformed reply: the op's process failing, never the judge."""

from __future__ import annotations

import numpy as np


class OpRaised(Exception):
    """The op raised (or its process ended) while answering a call: the op's failure.
    ``crashed``: its process died rather than raising; ``memory``: it ran out of memory
    (the case's error, as anywhere: a limit, not a wrong gradient)."""

    def __init__(self, message: str, crashed: bool = False, memory: bool = False):
        super().__init__(message)
        self.crashed, self.memory, self.output = crashed, memory, ""


class Sent:
    """A tensor (or another object) as the op's process described it: op.shapes reads
    its type, shape, dtype and device, and its values."""

    def __init__(self, kind: str, type_name: str, shape=(), dtype: str = "",
                 device: str | None = None, values: np.ndarray | None = None):
        self.kind, self.type = kind, type_name
        self.shape, self.dtype, self.device, self.values = shape, dtype, device, values

    @property
    def ndim(self) -> int:
        return len(self.shape)


def sent(d, what: str) -> Sent | None:
    """A :class:`Sent` from its description (None stays None)."""
    if d is None:
        return None
    if not isinstance(d, dict):
        raise malformed(what)
    if d.get("kind") == "other":
        return Sent("other", str(d.get("type", "?")))
    shape, values = d.get("shape"), d.get("values")
    if (not isinstance(shape, list) or not all(isinstance(n, int) for n in shape)
            or not isinstance(d.get("dtype"), str)
            or not isinstance(d.get("device"), (str, type(None)))):
        raise malformed(what)
    if values is not None:   # (a complex tensor's values in the layout, as the judge's)
        values = array(values, what)
        values = layout(values) if values.dtype.kind == "c" else values
    return Sent("tensor", str(d.get("type", "Tensor")), tuple(shape), d["dtype"],
                d["device"], values)


def malformed(what: str) -> OpRaised:
    return OpRaised(f"the op's process sent a malformed reply ({what})", crashed=True)


def array(a, what: str) -> np.ndarray:
    if not isinstance(a, np.ndarray):
        raise malformed(what)
    return a


def real(a, what: str, complex: bool = False) -> np.ndarray:
    """A float64 array of what the op returned. ``complex``: the quantity is complex (of
    a complex input or output), and the op's complex tensor comes to the judge in the
    layout, ``torch.view_as_real``'s (a last axis of (re, im) pairs); a complex tensor
    where the quantity is real, or a real one where it is complex, is the op's
    failure."""
    a = array(a, what)
    if (a.dtype.kind == "c") != complex:
        kinds = ("complex", "real") if a.dtype.kind == "c" else ("real", "complex")
        raise OpRaised(f"the op returned a {kinds[0]} tensor for {what}, which is "
                       f"{kinds[1]}")
    if complex:
        return layout(a)
    return a.astype(np.float64, copy=False)


def layout(a: np.ndarray) -> np.ndarray:
    """A complex array as ``torch.view_as_real`` holds it: float64, a last axis of its
    (re, im) pairs."""
    return np.stack([a.real, a.imag], axis=-1).astype(np.float64, copy=False)


def listed(reply: dict, key: str) -> list:
    value = reply.get(key)
    if not isinstance(value, list):
        raise malformed(key)
    return value


def path(done, complex: frozenset = frozenset(), **parts: list[str]) -> dict:
    """One op.contract path's reply: its error, or each of ``parts``' gradients (those of
    the inputs in ``complex``, in the layout)."""
    if not isinstance(done, dict):
        raise malformed("contract")
    if "error" in done:
        return {"error": str(done["error"])}
    return {k: named(done.get(k), names, complex) for k, names in parts.items()}


def named(grads, names: list[str], complex: frozenset = frozenset()) -> dict:
    """``{name: array or None}`` for exactly ``names`` (those in ``complex``: a complex
    input's, in the layout)."""
    if not isinstance(grads, dict) or set(grads) != set(names):
        raise malformed("gradients")
    return {n: None if grads[n] is None else real(grads[n], f"{n}'s gradient",
                                                  n in complex)
            for n in names}


def failure(done: dict) -> dict:
    """What a path of the op raised: ``{"error": {"text", "refused"}}`` checked."""
    error = done.get("error")
    if not isinstance(error, dict):
        raise malformed("error")
    return {"error": {"text": str(error.get("text", "")),
                      "refused": bool(error.get("refused"))}}


def batched(a, size: int, complex: bool = False) -> np.ndarray:
    """A real array of a batch of ``size`` along its first axis (vmap's ``out_dims =
    0``; a complex quantity's in the layout)."""
    a = real(a, "a batched quantity", complex)
    if a.ndim == 0 or a.shape[0] != size:
        raise malformed("a batched quantity")
    return a


class Complexity:
    """Which of a case's quantities the op hands back complex: a complex input's
    (its value, gradient, direction) and a complex output's (the reference's root
    ``Node.complex``: its value, cotangent, tangent). The judge holds each in the
    layout, ``torch.view_as_real``'s, where the case's formulas compute it."""

    def __init__(self, case):
        self.case = case
        self.inputs = case.complex_inputs
        self.outputs = tuple(bool(n.complex) for n in case.outputs)

    def output(self, k: int) -> bool:
        return k < len(self.outputs) and self.outputs[k]

    def quantity(self, q: str) -> bool:
        """op.double's quantity ``q`` (``x.grad``, ``d/d grad_output{k}``)."""
        prefix = "d/d grad_output"
        if q.startswith(prefix) and q[len(prefix):].isdigit():
            return self.output(int(q[len(prefix):]))
        return q.removesuffix(".grad") in self.inputs

    def check_output(self, y: np.ndarray, k: int, info: dict) -> None:
        """Output ``k`` of the op's forward: complex where the reference is, real where
        it is real; else an error that names the case (the op's failure)."""
        complex = self.output(k)
        if (y.dtype.kind == "c") == complex:
            return
        got, want = ("complex", "real") if y.dtype.kind == "c" else ("real", "complex")
        case = self.case
        raise OpRaised(
            f"case {case.name!r}: op {info.get('name') or case.op} returned a {got} "
            f"tensor ({y.dtype}) for output {k}, where the reference ({case.expr}) is "
            f"{want}: " + ("the op's complex output is checked against a complex "
                           "formula (torch.view_as_real of one against the other)"
                           if complex else "a real formula's output is real"))
