"""What ``gradcheck.doctor`` reports: findings as data (a renderer prints them)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

# the kinds a finding may have, in the order a report lists them
KINDS = ("no-graph", "target-requires-grad", "param-frozen", "param-no-grad",
         "non-finite", "loss-broadcast", "grad-zero", "grad-accumulates")

FIXES = {
    "no-graph": "keep every step from the parameters to the loss in torch: no .detach(), "
                ".data, .item(), NumPy round trip or torch.no_grad() on that path",
    "target-requires-grad": "build the target without requires_grad (or pass "
                            "target.detach()): a label is data, not something to learn",
    "param-frozen": "set requires_grad=True on it, or leave it out of the optimizer "
                    "(or declare it in frozen=[...] when frozen on purpose)",
    "param-no-grad": "use it in the forward, or remove the cut named above; "
                     "if it is unused on purpose, declare it in frozen=[...]",
    "non-finite": "guard the op named above: clamp its input to its domain "
                  "(log(x.clamp_min(eps)), sqrt(x + eps)), lower the learning rate or "
                  "scale the inputs",
    "loss-broadcast": "give both operands the same shape: pred.squeeze(-1) or "
                      "target.view_as(pred)",
    "grad-zero": "check what stops the gradient: a dead ReLU (all pre-activations "
                 "negative), a mask that is zero everywhere, a saturated sigmoid or tanh",
    "grad-accumulates": "call optimizer.zero_grad() (or model.zero_grad()) at the start "
                        "of each training step",
}


@dataclass(frozen=True)
class Finding:
    """One problem: its ``kind`` (one of :data:`KINDS`), the parameter or tensor it
    concerns (``name``, ``shape``; shape None when it concerns no single tensor), the
    evidence (``message``) and the ``fix``."""

    kind: str
    name: str
    shape: tuple[int, ...] | None
    message: str
    fix: str = ""

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown finding kind {self.kind!r}")
        if not self.fix:
            object.__setattr__(self, "fix", FIXES[self.kind])

    def to_dict(self) -> dict:
        out = asdict(self)
        out["shape"] = None if self.shape is None else list(self.shape)
        return out


@dataclass
class DoctorReport:
    """Every finding of one ``doctor`` run; ``healthy`` when there is none."""

    findings: list[Finding] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        return not self.findings

    def kinds(self) -> list[str]:
        return [f.kind for f in self.findings]

    def to_dict(self) -> dict:
        return {"findings": [f.to_dict() for f in self.findings]}

    def __str__(self) -> str:
        from .render import text

        return text(self)
