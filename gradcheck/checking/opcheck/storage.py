"""What an op handed back, read as plain arrays in the op's own process
(:mod:`gradcheck.checking.opcheck.server`): through a tensor's storage, not through methods a subclass
of ``torch.Tensor`` can override (its ``detach``, its ``__torch_function__``), so that a
subclass cannot show the judge other values than the ones training would use."""

from __future__ import annotations

import sys

import numpy as np


def _base(t):
    """``t`` as a plain ``torch.Tensor`` sharing its storage, reached without calling
    anything a subclass defines (its ``detach``, ``__torch_function__``)."""
    import torch

    with torch._C.DisableTorchFunctionSubclass():
        return torch.Tensor.as_subclass(torch.Tensor.detach(t), torch.Tensor)


def plain(t):
    """What the op handed back, as a float64 (complex128 where complex) array read from
    its storage; None stays None; a number or an engine Tensor, its values."""
    if t is None:
        return None
    if _is_torch(t):
        import torch

        base = _base(t)
        wide = torch.complex128 if base.is_complex() else torch.float64
        # a lazily conjugated (or negated) view, as t.conj() and autograd's complex
        # backwards hand back: its storage holds the values before the conjugate
        base = torch.resolve_neg(torch.resolve_conj(base))
        return base.cpu().to(wide).numpy().copy()
    from ...base.dtypes import to_numpy

    return np.asarray(to_numpy(t))


def describe(t) -> dict | None:
    """A gradient (or input) as op.shapes needs it: its type, shape, dtype, device and
    values (None where they cannot be read: a tensor on the meta device); None stays
    None."""
    if t is None:
        return None
    if not hasattr(t, "shape"):
        return {"kind": "other", "type": type(t).__name__}
    if _is_torch(t):
        base = _base(t)
        dtype, device = str(base.dtype), str(base.device)
    else:
        dtype = str(np.dtype(getattr(t, "dtype", np.float64)))
        device = str(t.device) if hasattr(t, "device") else None
    try:
        values = plain(t)
    except Exception:   # (no data to read: the shape and dtype still say enough)
        values = None
    return {"kind": "tensor", "type": type(t).__name__, "shape": list(map(int, t.shape)),
            "dtype": dtype, "device": device, "values": values}


def _is_torch(t) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(t, torch.Tensor)
