"""skip_checks: an op check switched off by the case, [defaults], gradcheck.run's
options, --skip-check and [tool.gradcheck] skip-checks; op.forward and op.backward
always run, and a name that is no check is the case's error."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

import gradcheck
from gradcheck.base.errors import CaseFileError
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
    assert any("switched off (skip_checks): op.jacobian, op.layout" in n
               for n in result.cases[0].notes)


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


def test_the_command_line_and_the_project_table(tmp_path, capsys, monkeypatch):
    path = _file(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(path), "--dtype", "float64", "-v", "--skip-check",
                 "op.jacobian"]) == 0
    out = capsys.readouterr().out
    assert "op.backward" in out and "op.jacobian" not in out.split("switched off")[0]
    (tmp_path / "pyproject.toml").write_text(
        '[tool.gradcheck]\nskip-checks = ["op.layout"]\n')
    assert main(["run", str(path), "--dtype", "float64"]) == 0
    out = capsys.readouterr().out
    assert "op.layout" not in out and "op.backward" in out
    (tmp_path / "pyproject.toml").write_text('[tool.gradcheck]\nskip-checks = ["op.x"]\n')
    assert main(["run", str(path), "--dtype", "float64"]) != 0
    assert "skip-checks must be a list of op check names" in capsys.readouterr().err
