"""An op case's checks, each as it went: ran (its witness's status) or skipped, and why.

A result reports each check of :data:`~gradcheck.base.result.OP_CHECKS` one of three
ways: a witness that ran; a witness skipped saying why (a path the op does not support:
forward mode, vmap); or an entry of ``CaseResult.unchecked`` (not asked of this op, or
switched off by ``skip_checks``). :func:`op_paths` puts the three together in
OP_CHECKS order, so that every renderer says the same of them; the words of a skip are
the result's own. Plain text, as :mod:`.details`: each renderer escapes for its format.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..base.result import OP_CHECKS, SKIPPED, WitnessResult

#: the witness names of an op case's checks, in the order reports show them
NAMES = tuple(f"op.{c}" for c in OP_CHECKS)
_RANK = {name: k for k, name in enumerate(NAMES)}
#: characters of a skip's reason that a one-line summary keeps (the whole is in -v)
SHORT = 60


@dataclass(frozen=True)
class OpPath:
    """One check of an op case."""

    name: str                             # "op.jvp"
    status: str                           # its witness's, or "skipped" (unchecked)
    reason: str = ""                      # why it was skipped ("" where it ran)
    witness: WitnessResult | None = None  # None: it did not run at all (unchecked)

    @property
    def skipped(self) -> bool:
        return self.status == SKIPPED


def rank(name: str) -> int:
    """Where the check ``name`` goes among OP_CHECKS (a name it does not hold, from a
    newer gradcheck's JSON, after them)."""
    return _RANK.get(name, len(_RANK))


def op_paths(case) -> list[OpPath]:
    """Every check of ``case`` in OP_CHECKS order; ``[]`` for a formula case, or an op
    case that reported no check (its op raised before any)."""
    if case.mode != "op":
        return []
    found = {w.witness: OpPath(w.witness, w.status,
                               w.message if w.status == SKIPPED else "", w)
             for w in case.witnesses}
    for name, why in case.unchecked:
        found.setdefault(name, OpPath(name, SKIPPED, why))
    return sorted(found.values(), key=lambda p: rank(p.name))   # (stable)


def skip_text(p: OpPath) -> str:
    """``op.registration: skipped: not a torch.library op``: a skipped check and the
    whole of why."""
    return f"{p.name}: skipped: {p.reason}" if p.reason else f"{p.name}: skipped"


def short(reason: str) -> str:
    """The head of a skip's reason, its first clause (``forward mode not supported``
    of ``forward mode not supported: NotImplementedError: ...``), at most
    :data:`SHORT` characters."""
    head = reason.split(": ", 1)[0].strip()
    return head if len(head) <= SHORT else head[:SHORT - 1] + "…"


def skipped_lines(case) -> list[str]:
    """One :func:`skip_text` per skipped check of ``case``, in OP_CHECKS order."""
    return [skip_text(p) for p in op_paths(case) if p.skipped]


def skipped_summary(case) -> str:
    """``skipped checks: op.jvp (forward mode not supported), op.registration (not a
    torch.library op)``: every skipped check of ``case`` on one line, each with the head
    of why (:func:`short`); ``""`` where none was skipped."""
    skipped = [p for p in op_paths(case) if p.skipped]
    if not skipped:
        return ""
    return "skipped checks: " + ", ".join(
        f"{p.name} ({short(p.reason)})" if p.reason else p.name for p in skipped)
