"""The one mapping table from ATen (and prims) ops to rows, :data:`ATEN`, and what its
emitters share: :func:`maps` registers an emitter, :class:`Out` is the result being
mapped, :func:`text` and :func:`operand` write an operand. The emitters live in
:mod:`.aten` and its family modules (:mod:`.aten_nn`), which fill this one table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .values import Traced, TraceError, number, paren


@dataclass(frozen=True)
class Out:
    """The result of the op being mapped: its shape and kind ("float", "int", "bool")."""

    shape: tuple[int, ...]
    kind: str


Emit = Callable[..., str]

#: op packet ("aten.mm", "prims.sum") -> emitter; filled by :func:`maps` from :mod:`.aten`
#: and its family modules, in one place: :data:`ATEN` is what ``gradcheck functions --aten``
#: lists.
ATEN: dict[str, Emit] = {}
#: op packet -> an example torch.nn.functional (or torch) call that traces to it
SOURCES: dict[str, str] = {}


def maps(*packets: str, source: str = ""):
    """Register the decorated emitter for each op packet."""
    def register(emit: Emit) -> Emit:
        for packet in packets:
            if packet in ATEN:
                raise ValueError(f"{packet} is mapped twice")
            ATEN[packet] = emit
            SOURCES[packet] = source
        return emit
    return register


def text(value) -> str:
    """An operand as formula text: a tensor's text, a number's."""
    if isinstance(value, Traced):
        return value.text
    if isinstance(value, (int, float, bool)):
        return number(value)
    raise TraceError(f"an operand {value!r} has no formula")


def operand(value) -> str:
    return paren(text(value))
