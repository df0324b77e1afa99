"""``gradcheck.doctor``: run a model's loss (and training step) once and report what is
wired wrong — a parameter cut from the graph or frozen by mistake, a gradient that is
zero, non-finite or accumulating, a loss that broadcasts [N, 1] against [N], a loss
without a graph, a target that requires grad. See docs/design.md, "The doctor"."""

from __future__ import annotations

from .findings import KINDS, DoctorReport, Finding

__all__ = ["doctor", "assert_healthy", "DoctorReport", "Finding", "KINDS"]


def doctor(model, loss_fn, *batch, optimizer=None, train_step=None,
           frozen=()) -> DoctorReport:
    """Diagnose one training setup.

    ``loss_fn(model, *batch)`` returns the scalar loss; it is run once forward and
    backward while every torch call is recorded. ``train_step(model, *batch)``, when
    given, is the user's own step, run twice on the same batch from the same weights,
    optimizer state and random state (then all put back; the optimizer's state only
    when it is passed as ``optimizer``). ``frozen``: names of
    parameters (or of modules above them) frozen on purpose. The model's weights and
    ``.grad`` are as they were when this returns.
    """
    # (imported here: `gradcheck doctor`'s own process renders reports without torch,
    # which only the factory's process needs)
    from .checks import diagnose

    if isinstance(frozen, str):
        frozen = (frozen,)
    return DoctorReport(diagnose(model, loss_fn, batch, optimizer, train_step,
                                 tuple(frozen)))


def assert_healthy(model, loss_fn, *batch, **options) -> None:
    """:func:`doctor` in a test: raises ``AssertionError`` listing the findings."""
    report = doctor(model, loss_fn, *batch, **options)
    if report.findings:
        raise AssertionError(str(report))
