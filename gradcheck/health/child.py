"""The process ``gradcheck doctor`` runs a factory in (:mod:`.apart` starts it:
``python -P -m gradcheck.health.child FD SPEC [PATTERN...]``). Its stdout and stderr are
the parent's capture pipe; the one thing it sends on purpose is a JSON document on file
descriptor FD: ``{"report": DoctorReport.to_dict()}`` or ``{"error": message}``.

The factory runs in this process, beside the doctor's checks, so it can forge its own
report (as it could by returning another model); what it cannot reach is the parent: the
parent reads data only (JSON, checked field by field) and prints it scrubbed."""

from __future__ import annotations

import json
import os
import sys


def main(argv: list[str]) -> int:
    fd, spec, allowed = int(argv[0]), argv[1], tuple(argv[2:])
    # nothing the factory starts inherits the result's descriptor across an exec
    os.set_inheritable(fd, False)
    try:
        message = {"report": _run(spec, allowed)}
    except Exception as exc:   # FactoryError, or the user's model raising: theirs to fix
        from ..base.errors import CaseFileError, describe_exception

        message = {"error": str(exc) if isinstance(exc, CaseFileError)
                   else f"{spec}: the setup raised {describe_exception(exc)}"}
    sys.stdout.flush()
    sys.stderr.flush()
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(message, out)
    return 0


def _run(spec: str, allowed: tuple[str, ...]) -> dict:
    from . import doctor
    from .factory import setup

    made = setup(spec, allowed)
    report = doctor(made["model"], made["loss_fn"], *made["batch"],
                    optimizer=made.get("optimizer"), frozen=made.get("frozen", ()),
                    train_step=made.get("train_step"))
    return report.to_dict()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
