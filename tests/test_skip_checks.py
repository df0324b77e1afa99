"""skip_checks: an op check switched off by the case, [defaults], gradcheck.run's
options, --skip-check and [tool.gradcheck] skip-checks; op.forward and op.backward
always run, and a name that is no check is the case's error."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

import gradcheck
from gradcheck.base.errors import CaseFileError
from gradcheck.base.result import OP_CHECKS
from gradcheck.cases import load_cases
from gradcheck.cli.main import main

OPS = '''
import torch

def swish(x):
    return x * torch.sigmoid(x)
'''


def _file(tmp_path: Path, extra: str = "", defaults: str = "") -> Path:
    (tmp_path / "ops.py").write_text(OPS)
    path = tmp_path / "cases.toml"
    path.write_text(textwrap.dedent(f'''
        {defaults}
        [[case]]
        name = "swish"
        op = "ops:swish"
        reference = "x * sigmoid(x)"
        inputs.x = [6]
        points = 1
        {extra}
    '''))
    return path


def _checks(result) -> set[str]:
    (case,) = result.cases
    assert case.status == "passed", case.message
    return {w.witness for w in case.witnesses}


def test_a_case_switches_checks_off(tmp_path):
    everything = _checks(gradcheck.run([_file(tmp_path)], dtype="float64"))
    assert {"op.forward", "op.backward", "op.jacobian", "op.layout"} <= everything
    path = _file(tmp_path, 'skip_checks = ["op.jacobian", "op.layout"]')
    (case,) = load_cases(path)
    assert case.skip_checks == ("op.jacobian", "op.layout")
    result = gradcheck.run([path], dtype="float64")
    assert _checks(result) == everything - {"op.jacobian", "op.layout"}
    # each says why it did not run, as every report shows it
    unchecked = dict(result.cases[0].unchecked)
    assert unchecked["op.jacobian"] == unchecked["op.layout"] == "switched off by skip_checks"
    # and those not asked of this op (a plain function, order 1), in OP_CHECKS order
    assert unchecked["op.double"] == "order = 1: no second derivatives asked"
    assert unchecked["op.registration"] == "not a torch.library op"
    assert unchecked["op.shapes"].startswith("not a torch.autograd.Function")
    order = [f"op.{c}" for c in OP_CHECKS]
    assert list(unchecked) == sorted(unchecked, key=order.index)
    assert not set(unchecked) & {w.witness for w in result.cases[0].witnesses}


def test_why_a_check_did_not_run():
    from types import SimpleNamespace

    from gradcheck.checking.opcheck.unchecked import NOTHING, SWITCHED_OFF, why

    case = SimpleNamespace(skip_checks=("op.vmap",), order=1)
    assert why("vmap", case, {"engine": True}) == SWITCHED_OFF   # the case's word first
    assert why("vmap", SimpleNamespace(skip_checks=()), {"engine": True}).startswith(
        "a gradcheck.engine op")
    assert why("registration", case, {"library": False}) == "not a torch.library op"
    assert why("double", case, {}).startswith("order = 1")
    # a check without a rule of its own (one added later too) still says something
    assert why("inplace", case, {}) == why("newcheck", case, {}) == NOTHING


def test_defaults_and_the_run_add_to_the_case(tmp_path):
    path = _file(tmp_path, 'skip_checks = ["op.layout"]',
                 defaults='[defaults]\nskip_checks = ["op.zero"]')
    (case,) = load_cases(path)
    assert case.skip_checks == ("op.layout",)     # the case's own list wins over [defaults]
    only_defaults = _file(tmp_path, defaults='[defaults]\nskip_checks = ["op.zero"]')
    assert load_cases(only_defaults)[0].skip_checks == ("op.zero",)
    checks = _checks(gradcheck.run([only_defaults], dtype="float64",
                                   skip_checks=["op.jacobian"]))
    assert "op.zero" not in checks and "op.jacobian" not in checks
    assert "op.backward" in checks


@pytest.mark.parametrize("value", ['["op.forward"]', '["op.nonsense"]', '"jacobian"', "3"])
def test_what_cannot_be_switched_off_is_the_cases_error(tmp_path, value):
    path = _file(tmp_path, f"skip_checks = {value}")
    with pytest.raises(CaseFileError, match="skip_checks must be a list drawn from op.jacobian"):
        load_cases(path)


def _ran(out: str) -> str:
    """The checks that ran, as -v lists them: the lines before the first skipped one."""
    lines = out.splitlines()
    return "\n".join(lines[:next(i for i, line in enumerate(lines) if "skipped:" in line)])


def test_the_command_line_and_the_project_table(tmp_path, capsys, monkeypatch):
    path = _file(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(path), "--dtype", "float64", "-v", "--skip-check",
                 "op.jacobian"]) == 0
    out = capsys.readouterr().out
    # -v: every check that ran, under the case's line, before the skipped ones
    ran = _ran(out)
    assert "op.backward" in ran and "op.jacobian" not in ran
    assert "op.jacobian: skipped: switched off by skip_checks" in out   # -v: why
    (tmp_path / "pyproject.toml").write_text(
        '[tool.gradcheck]\nskip-checks = ["op.layout"]\n')
    assert main(["run", str(path), "--dtype", "float64", "-v"]) == 0
    out = capsys.readouterr().out
    assert "op.layout" not in _ran(out) and "op.backward" in _ran(out)
    (tmp_path / "pyproject.toml").write_text('[tool.gradcheck]\nskip-checks = ["op.x"]\n')
    assert main(["run", str(path), "--dtype", "float64"]) != 0
    assert "skip-checks must be a list of op check names" in capsys.readouterr().err
