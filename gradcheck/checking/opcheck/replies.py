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
    return Sent("tensor", str(d.get("type", "Tensor")), tuple(shape), d["dtype"],
                d["device"], None if values is None else array(values, what))


def malformed(what: str) -> OpRaised:
    return OpRaised(f"the op's process sent a malformed reply ({what})", crashed=True)


def array(a, what: str) -> np.ndarray:
    if not isinstance(a, np.ndarray):
        raise malformed(what)
    return a


def real(a, what: str) -> np.ndarray:
    """A float64 array of what the op returned (a complex one is the op's failure: the
    case's quantities are real)."""
    a = array(a, what)
    if a.dtype.kind == "c":
        raise OpRaised(f"the op returned a complex tensor for {what}, which is real")
    return a.astype(np.float64, copy=False)


def listed(reply: dict, key: str) -> list:
    value = reply.get(key)
    if not isinstance(value, list):
        raise malformed(key)
    return value


def path(done, **parts: list[str]) -> dict:
    """One op.contract path's reply: its error, or each of ``parts``' gradients."""
    if not isinstance(done, dict):
        raise malformed("contract")
    if "error" in done:
        return {"error": str(done["error"])}
    return {k: named(done.get(k), names) for k, names in parts.items()}


def named(grads, names: list[str]) -> dict:
    """``{name: array or None}`` for exactly ``names``."""
    if not isinstance(grads, dict) or set(grads) != set(names):
        raise malformed("gradients")
    return {n: None if grads[n] is None else real(grads[n], f"{n}'s gradient")
            for n in names}


def failure(done: dict) -> dict:
    """What a path of the op raised: ``{"error": {"text", "refused"}}`` checked."""
    error = done.get("error")
    if not isinstance(error, dict):
        raise malformed("error")
    return {"error": {"text": str(error.get("text", "")),
                      "refused": bool(error.get("refused"))}}


def batched(a, size: int) -> np.ndarray:
    """A real array of a batch of ``size`` along its first axis (vmap's ``out_dims =
    0``)."""
    a = real(a, "a batched quantity")
    if a.ndim == 0 or a.shape[0] != size:
        raise malformed("a batched quantity")
    return a
