"""Exit codes and error kinds as a CI reads them: an op that raises is that op's failure
(exit 1, ``error_kind = "op raised"``), an op that cannot be imported a case error
(exit 2), a bug in gradcheck's own checking code an internal error (3), a case past its
time limit an error of its own kind, and a run that selects no case exits 5, as pytest
does."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from conftest import SQUARE_OP
from gradcheck.checking import opcheck
from gradcheck.cli.exit_codes import ExitCode, exit_code
from gradcheck.cli.main import main
from gradcheck.base.result import CaseResult, RunResult
from gradcheck.checking.case import cotangent
from gradcheck.session.runner import run

OPS = """
import time

import torch
""" + SQUARE_OP + """

class ForwardRaises(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        raise ValueError("kernel not compiled for this shape")

    @staticmethod
    def backward(ctx, g):
        return g


class BackwardRaises(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * x

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError("out of shared memory")


def loops(x):
    end = time.monotonic() + 60
    while time.monotonic() < end:
        pass
    return x * x
"""


def case(name: str, op: str, **keys) -> str:
    extra = "".join(f"{k} = {v}\n" for k, v in keys.items())
    return (f'[[case]]\nname = "{name}"\nop = "myops:{op}"\nreference = "x**2"\n'
            f"inputs.x = {{ shape = [3] }}\npoints = 1\n{extra}\n")


def write(folder: Path, *blocks: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "myops.py").write_text(OPS)
    path = folder / "cases.toml"
    path.write_text("".join(blocks))
    return path


def gc(capsys, *argv) -> tuple[int, dict | None, str]:
    """``gradcheck run ARGV --format json`` in-process: (exit code, report, stderr)."""
    code = main(["run", *map(str, argv), "--format", "json"])
    out, err = capsys.readouterr()
    return code, json.loads(out) if out.strip() else None, err


def by_name(report: dict) -> dict:
    return {c["name"]: c for c in report["cases"]}


@pytest.mark.parametrize("op, words", [
    ("ForwardRaises", "the op raised ValueError: kernel not compiled for this shape"),
    ("BackwardRaises", "the op raised RuntimeError: out of shared memory")])
def test_an_op_that_raises_is_its_failure_exit_1(capsys, tmp_path, op, words):
    path = write(tmp_path, case("raises", op), case("fine", "Square"))
    code, report, _ = gc(capsys, path)
    assert code == ExitCode.MISMATCH == 1
    cases = by_name(report)
    raises = cases["raises"]
    assert (raises["status"], raises["error_kind"]) == ("failed", "op raised")
    assert words in raises["message"]
    # a short traceback that reaches the op's own line
    assert "myops.py" in raises["message"] and "raise " in raises["message"]
    assert cases["fine"]["status"] == "passed" and cases["fine"]["error_kind"] is None


def test_an_op_that_raises_is_caught_by_expect_fail(capsys, tmp_path):
    path = write(tmp_path, case("raises", "BackwardRaises", expect='"fail"'))
    code, report, _ = gc(capsys, path)
    assert code == ExitCode.OK
    raises = by_name(report)["raises"]
    assert raises["status"] == "passed" and raises["error_kind"] == "op raised"
    assert raises["message"].startswith("caught as expected: the op raised RuntimeError")


def test_an_op_that_cannot_be_imported_is_a_case_error_exit_2(capsys, tmp_path):
    path = write(tmp_path, case("missing", "NoSuchOp"), case("fine", "Square"))
    code, report, _ = gc(capsys, path)
    assert code == ExitCode.USAGE == 2
    missing = by_name(report)["missing"]
    assert (missing["status"], missing["error_kind"]) == ("error", "case")
    assert "cannot import op 'myops:NoSuchOp': AttributeError: myops has no attribute " \
        "'NoSuchOp'" in \
        missing["message"]
    assert "gradcheck_op_" not in missing["message"]   # the module as the user named it


def test_an_op_module_that_raises_on_import_is_a_case_error(capsys, tmp_path):
    path = write(tmp_path, case("broken-module", "Square"))
    (tmp_path / "myops.py").write_text("raise ImportError('libcudart.so not found')\n")
    code, report, _ = gc(capsys, path)
    assert code == ExitCode.USAGE
    broken = by_name(report)["broken-module"]
    assert (broken["status"], broken["error_kind"]) == ("error", "case")
    assert "libcudart.so not found" in broken["message"]


def test_a_bug_in_the_checking_code_is_internal_exit_3(capsys, tmp_path, monkeypatch):
    # an exception raised in gradcheck's own code, not the op's: here cotangent()
    # handed a None case (an AttributeError inside gradcheck/session/runner.py)
    monkeypatch.setattr(opcheck.OpCheck, "run", lambda self: cotangent(None, "float64", 0))
    path = write(tmp_path, case("fine", "Square"))
    code, report, _ = gc(capsys, path)
    assert code == ExitCode.INTERNAL == 3
    fine = by_name(report)["fine"]
    assert (fine["status"], fine["error_kind"]) == ("error", "internal")
    assert "AttributeError" in fine["message"]


def test_a_timeout_is_its_own_error_kind(capsys, tmp_path):
    path = write(tmp_path, case("loops", "loops"))
    code, report, _ = gc(capsys, path, "--timeout", "1")
    assert code == ExitCode.MISMATCH   # a check that did not pass, as a hung test
    loops = by_name(report)["loops"]
    assert (loops["status"], loops["error_kind"]) == ("error", "timeout")
    assert "ran past its time limit of 1 s" in loops["message"]


def result(*kinds: tuple[str, str]) -> RunResult:
    return RunResult(tuple(CaseResult(f"c{i}", "f.toml", 1, "float64", status,
                                      error_kind=kind)
                           for i, (status, kind) in enumerate(kinds)))


@pytest.mark.parametrize("kinds, code", [
    ([("passed", "")], ExitCode.OK),
    ([("passed", "op raised")], ExitCode.OK),          # caught by expect = "fail"
    ([("passed", ""), ("failed", "op raised")], ExitCode.MISMATCH),
    ([("failed", "op crashed")], ExitCode.MISMATCH),   # a --jobs worker died in the op
    ([("error", "timeout"), ("passed", "")], ExitCode.MISMATCH),
    ([("error", "timeout"), ("error", "case")], ExitCode.USAGE),
    ([("failed", ""), ("error", "case"), ("error", "internal")], ExitCode.INTERNAL),
    ([], ExitCode.NO_CASES)])
def test_which_code_wins(kinds, code):
    assert exit_code(result(*kinds)) == code


def test_an_empty_folder_selects_no_case_exit_5(capsys, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    code, report, err = gc(capsys, empty)
    assert code == ExitCode.NO_CASES == 5
    assert f"no cases selected: no cases under {empty}" in err
    assert report["cases"] == []   # the report is still written, empty


def test_k_matching_nothing_exits_5_and_exit_zero_does_not_hide_it(capsys, tmp_path):
    path = write(tmp_path, case("fine", "Square"))
    keyword = f"nothing-{uuid.uuid4().hex[:6]}"
    for extra in ((), ("--exit-zero",)):
        code, _, err = gc(capsys, path, "-k", keyword, *extra)
        assert code == ExitCode.NO_CASES
        assert "no cases selected" in err and repr(keyword) in err


def test_a_case_file_error_is_not_no_cases(capsys, tmp_path):
    # a file that cannot be read is reported (exit 2), even when -k selects nothing
    (tmp_path / "bad.toml").write_text("[[case]\n")
    code, report, err = gc(capsys, tmp_path, "-k", "nothing")
    assert code == ExitCode.USAGE and "no cases selected" not in err
    assert [c["status"] for c in report["cases"]] == ["error"]


def test_run_api_keeps_an_op_raise_as_data(tmp_path):
    path = write(tmp_path, case("raises", "ForwardRaises"))
    (result,) = run([path], timeout=None).cases
    assert (result.status, result.error_kind) == ("failed", "op raised")
    assert result.to_dict()["error_kind"] == "op raised"


def test_the_help_states_the_codes(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "1 a gradient mismatch, an op that raised or a case past its time limit" in text
    assert "5 no case selected" in text


def test_the_docs_state_the_codes():
    readme = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
    text = " ".join(readme.read_text().split())
    assert "5 no case selected" in text
    assert '`error_kind = "op raised"`' in text and '`error_kind = "timeout"`' in text
