"""An op changes no verdict but its own (tests/hostile/forge/): wrong ops that try to
forge their own pass (patching gradcheck, NumPy or torch.nn.functional, loosening every
tolerance they can reach, lying through a tensor subclass, raising gradcheck's own
errors, writing fake results into inherited pipes) are reported failed; an op that
poisons its process (grad mode, default dtype, patched modules, the environment) changes
no later case; an op that prints workflow commands every way a process can reaches the
CI log only through gradcheck's report, scrubbed, and never sees the CI's control files.

Each runs as a user runs it: real ``gradcheck run`` processes, in serial (the default:
one worker), with ``--in-process`` and with ``--jobs 2``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gradcheck.cli.exit_codes import ExitCode
from gradcheck.report.annotations import github_annotations
from gradcheck.base.result import RunResult

FORGE = Path(__file__).parent / "hostile" / "forge"
MODES = {"worker": [], "in-process": ["--in-process"], "jobs": ["--jobs", "2"]}
FORGED = ["patch-tally", "loosen-stack", "numpy-abs", "raises-dtype-error", "writes-pipes",
          "detach-lies", "backward-method-lies", "gelu-tanh-as-erf"]


def run_gradcheck(tmp_path: Path, case_file: str, *args: str, **env: str):
    """``gradcheck run`` on a corpus file from ``tmp_path`` (where its report goes), as
    a user runs it: (exit code, stdout + stderr, the report)."""
    out = tmp_path / "report.json"
    environ = {k: v for k, v in os.environ.items()
               if k != "GRADCHECK_IN_PROCESS" and not k.startswith("GITHUB_")}
    done = subprocess.run(
        [sys.executable, "-m", "gradcheck", "run", str(FORGE / case_file), *args,
         "--report", f"json:{out}"],
        cwd=tmp_path, env={**environ, **env}, capture_output=True, text=True, timeout=300)
    report = json.loads(out.read_text()) if out.exists() else None
    return done.returncode, done.stdout + done.stderr, report


def statuses(report) -> dict[str, str]:
    return {c["name"]: c["status"] for c in report["cases"]}


@pytest.mark.parametrize("mode", list(MODES))
def test_no_forged_pass(tmp_path, mode):
    mark = tmp_path / "pickle-ran"
    code, log, report = run_gradcheck(tmp_path, "forged.toml", *MODES[mode],
                                      FORGE_MARK=str(mark))
    assert code == ExitCode.MISMATCH, log
    got = statuses(report)
    # every case in its place (a result written into a pipe would have shifted them)
    assert list(got) == ["right-before", *FORGED, "right-after"]
    assert got["right-before"] == got["right-after"] == "passed", log
    assert {name: got[name] for name in FORGED} == dict.fromkeys(FORGED, "failed"), log
    assert not mark.exists()   # the pickle written into every descriptor never ran
    cases = {c["name"]: c for c in report["cases"]}
    # gradcheck's own exception, raised by the op, is the op's failure, not a skip
    assert cases["raises-dtype-error"]["error_kind"] == "op raised"
    assert "OpDtypeError" in cases["raises-dtype-error"]["message"]
    # read through the storage: the subclass's detach() does not hide the off-by-one
    assert cases["detach-lies"]["witnesses"]["op.forward"]["status"] == "failed"
    # what training calls, .backward(), is held to the exact gradient too
    assert cases["backward-method-lies"]["witnesses"]["op.backward"]["status"] == "failed"
    # the judge's F.gelu is the exact one, whatever the op's process made of its own
    assert cases["gelu-tanh-as-erf"]["witnesses"]["op.forward"]["status"] == "failed"


@pytest.mark.parametrize("mode", list(MODES))
def test_no_state_bleeds_into_later_cases(tmp_path, mode):
    code, log, report = run_gradcheck(tmp_path, "bleed.toml", *MODES[mode])
    assert code == ExitCode.MISMATCH, log
    # the poisoner fails its own case (its later calls run with grad disabled: its
    # strided call has no gradient); no later case is touched
    assert statuses(report) == {"poisons": "failed", "right-op-after": "passed",
                                "wrong-op-after": "failed", "formula-after": "passed",
                                "gelu-formula-after": "passed"}, log


def workflow_commands(log: str) -> list[str]:
    """Every line of ``log`` the GitHub Actions runner reads as a workflow command: after
    leading whitespace it starts with ``::``, or it holds ``##[`` anywhere."""
    return [line for line in log.splitlines()
            if line.lstrip().startswith("::") or "##[" in line]


def test_the_op_speaks_in_the_ci_log_only_through_gradcheck(tmp_path):
    files = {name: tmp_path / name.lower() for name in
             ("GITHUB_STEP_SUMMARY", "GITHUB_ENV", "GITHUB_OUTPUT", "GITHUB_PATH")}
    for f in files.values():
        f.write_text("")
    code, log, report = run_gradcheck(tmp_path, "speaks.toml", "-v", GITHUB_ACTIONS="true",
                                      **{k: str(v) for k, v in files.items()})
    assert code == ExitCode.MISMATCH, log
    assert statuses(report) == {"speaks": "passed", "environment": "passed",
                                "wrong-after": "failed"}
    # the runner finds exactly gradcheck's own annotations, none of the op's
    own = github_annotations(RunResult.from_dict(report))
    assert own and workflow_commands(log) == own
    # the op's output is kept, every way it was printed, and shown scrubbed
    speaks = next(c for c in report["cases"] if c["name"] == "speaks")
    for text in ("forged by the op", "from a child", "from C printf", "FORGETOKEN"):
        assert text in speaks["output"], speaks["output"]
    assert "op output" in log and ":\\:stop-commands::FORGETOKEN" in log
    # the CI's control files: the job summary holds gradcheck's summary, nothing else
    assert "LD_PRELOAD" not in "".join(f.read_text() for f in files.values())
    assert files["GITHUB_ENV"].read_text() == files["GITHUB_OUTPUT"].read_text() == ""


def test_the_library_runs_an_op_object_apart_too():
    """check_op with a class (no case file): the op's patches stay in its process."""
    sys.path.insert(0, str(FORGE))
    try:
        import forge_ops

        import gradcheck.checking.compare as compare
        from gradcheck.testing import check_op

        before = compare.Tally.result
        result = check_op(forge_ops.WrongPatchTally, "x ** 2", inputs={"x": [4]},
                          dtype="float64")
        assert result.status == "failed"
        assert compare.Tally.result is before
        assert check_op(forge_ops.Square, "x ** 2", inputs={"x": [4]},
                        dtype="float64").status == "passed"
    finally:
        sys.path.remove(str(FORGE))


def test_an_op_wrong_only_for_non_contiguous_inputs_is_caught(tmp_path):
    code, log, report = run_gradcheck(tmp_path, "layout.toml")
    assert code == ExitCode.OK, log   # the wrong ones expect to fail, the right one passes
    layouts = {(c["name"], c["dtype"]): c["witnesses"]["op.layout"]["status"]
               for c in report["cases"]}
    assert layouts == {(name, dtype): "failed" if name != "square-right" else "passed"
                       for name in ("square-strided", "matmul-transposed", "square-right")
                       for dtype in ("float64", "float32")}
    # every other check passes (or is skipped, saying why: a path the op does not
    # support): only the layouts tell
    wrong = next(c for c in report["cases"] if c["name"] == "matmul-transposed")
    assert all(w["status"] == "passed" or (w["status"] == "skipped" and w["message"])
               for n, w in wrong["witnesses"].items() if n != "op.layout"), \
        {n: w["status"] for n, w in wrong["witnesses"].items()}
    # its transposed input read wrong (the worst element), its expanded one past its
    # memory's end (the op raised: the message says so first)
    assert wrong["witnesses"]["op.layout"]["worst_index"].startswith("x.grad (transposed)")
    assert "the op raised for expanded inputs" in wrong["message"]


def test_a_spawned_op_process_holds_as_a_forked_one(tmp_path):
    """The op's process a CUDA case gets (a new interpreter: CUDA allows no fork of a
    process that initialised it), forced here on the CPU: the op's output captured, no
    workflow command in the log, no control variable (one case: each new interpreter
    imports torch)."""
    code, log, report = run_gradcheck(tmp_path, "speaks.toml", "-k", "speaks",
                                      GRADCHECK_OP_SPAWN="1", GITHUB_ACTIONS="true",
                                      GITHUB_ENV=str(tmp_path / "e"))
    assert code == ExitCode.OK, log
    assert statuses(report) == {"speaks": "passed"}
    assert workflow_commands(log) == []
    speaks = report["cases"][0]
    assert "from C printf" in speaks["output"] and "from a child" in speaks["output"]
    assert not (tmp_path / "e").exists()


def test_where_no_op_process_can_start_the_same_calls_run_with_the_judge(monkeypatch):
    """Off Linux the op is served in the judge's process through the same calls (no
    isolation, docs/security.md): the verdicts are the same, and a raising op is still
    the op's failure."""
    import gradcheck.checking.opcheck.process as opprocess

    monkeypatch.setattr(opprocess, "FORKS", False)
    sys.path.insert(0, str(FORGE))
    try:
        import forge_ops

        from gradcheck.testing import check_op

        def check(op):
            return check_op(op, "x ** 2", inputs={"x": [4]}, dtype="float64", points=1,
                            extreme_points=0)

        assert check(forge_ops.Square).status == "passed"
        assert check(forge_ops.WrongSquare).status == "failed"
        raised = check(forge_ops.WrongRaisesDtypeError)
        assert (raised.status, raised.error_kind) == ("failed", "op raised")
    finally:
        sys.path.remove(str(FORGE))
