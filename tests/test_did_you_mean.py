"""A misspelled name anywhere a case file or its project names one (a case's key, an
input's, [defaults]', the file's top level, an op's module or class, a traced function,
a [tool.gradcheck] key) is answered with the name meant, at the line of the key that is
wrong, in the case file errors' format (``file:line: case 'name': ...``)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from gradcheck.base.spelling import closest, did_you_mean
from gradcheck.cases import read_file
from gradcheck.session.runner import run

CUBE = (Path(__file__).parent / "fixtures" / "cube_ops.py").read_text()


def project(tmp_path: Path, cases: str, name: str = "ops.toml") -> Path:
    """A project (its pyproject.toml) with ``cases/myops.py`` and the case file ``name``
    beside it."""
    (tmp_path / "pyproject.toml").write_text("")
    folder = tmp_path / "cases"
    folder.mkdir(exist_ok=True)
    (folder / "myops.py").write_text(CUBE)
    path = folder / name
    path.write_text(textwrap.dedent(cases).lstrip("\n"))
    return path


def one_error(path: Path):
    cases, errors = read_file(path)
    assert len(errors) == 1, [str(e) for e in errors]
    return errors[0]


def test_the_shared_helper_suggests_only_a_close_name():
    assert closest("referenc", ["reference", "forward"]) == "reference"
    assert closest("zzz", ["reference", "forward"]) is None
    assert did_you_mean("shpe", ["shape", "dtype"]) == "; did you mean 'shape'?"
    assert did_you_mean("qqqq", ["shape", "dtype"]) == ""


@pytest.mark.parametrize("text, line, expected", [
    ('[[case]]\nname = "a"\nexpr = "sum(x)"\ninputs.x = [3]\nreferenc = "x"\n', 5,
     "case 'a': unknown key referenc in case; did you mean 'reference'?"),
    ('[[case]]\nname = "a"\nexpr = "sum(x)"\ninputs.x = { shpe = [3] }\n', 4,
     "case 'a': unknown key shpe in input 'x'; did you mean 'shape'?"),
    ('[defaults]\npoints = 2\nseeed = 3\n\n[[case]]\nname = "a"\nexpr = "sum(x)"\n'
     'inputs.x = [3]\n', 3, "unknown key seeed in [defaults]; did you mean 'seed'?"),
    ('[[cases]]\nname = "a"\n', 1,
     "unknown key cases in the file's top level; did you mean 'case'?"),
])
def test_a_misspelled_key_is_answered_at_its_line(tmp_path, text, line, expected):
    path = project(tmp_path, text, "keys.toml")
    err = one_error(path)
    assert err.line == line
    assert str(err).startswith(f"{path}:{line}: {expected}"), str(err)


def test_a_misspelled_yaml_default_is_answered_at_its_line(tmp_path):
    path = project(tmp_path, """
        defaults:
          points: 2
          dtyp: float32
        case:
          - name: a
            expr: sum(x)
            inputs: {x: [3]}
    """, "keys.yaml")
    err = one_error(path)
    assert err.line == 3
    assert "unknown key dtyp in [defaults]; did you mean 'dtype'?" in str(err)


OP_CASES = """
    [[case]]
    name = "module"
    description = "the op key is the line after this one"
    op = "myopz:Cube"
    reference = "x ** 3"
    inputs.x = { shape = [3] }

    [[case]]
    name = "class"
    op = "myops:Cueb"
    reference = "x ** 3"
    inputs.x = { shape = [3] }

    [[case]]
    name = "installed"
    op = "json:Cube"
    reference = "x ** 3"
    inputs.x = { shape = [3] }

    [[case]]
    name = "function"
    op = "myops:Cube"
    reference_function = "myops:cubd"
    inputs.x = { shape = [3] }
"""


def test_a_misspelled_op_is_answered_at_the_op_key(tmp_path):
    path = project(tmp_path, OP_CASES)
    (tmp_path / "cases" / "jsonops.py").write_text("")   # close to json, which exists
    results, errors = run([path], timeout=None), read_file(path)[1]
    by_name = {r.name: r for r in results.cases}
    # a module that is nowhere, close to a file next to the case file: a typo
    module = by_name["module"]
    assert module.status == "error" and module.line == 4
    assert module.message.startswith(
        f"{path}:4: case 'module': cannot import op 'myopz:Cube': no module 'myopz' next "
        f"to {path}"), module.message
    assert module.message.endswith("; did you mean 'myops'?")
    assert "--allow-op-module" not in module.message
    # a class the op's process did not find in the module: the module's classes
    cls = by_name["class"]
    assert cls.status == "error" and cls.line == 10
    assert cls.message.startswith(f"{path}:10: case 'class': cannot import op "
                                  "'myops:Cueb'"), cls.message
    assert cls.message.endswith("has no attribute 'Cueb'; did you mean 'Cube'?")
    # a module that exists but outside the project: the advice to allow it stays
    installed = by_name["installed"]
    assert installed.line == 16 and "--allow-op-module json" in installed.message
    assert "did you mean" not in installed.message
    # a traced reference function: the module's functions, at its key
    (function,) = errors
    assert function.case == "function" and function.line == 23
    assert str(function).endswith("has no attribute 'cubd'; did you mean 'cubed'?")


def test_a_misspelled_setting_is_answered_at_its_line(tmp_path):
    from gradcheck.cli.settings import check
    from gradcheck.project.settings import SettingsError, settings

    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "p"\n\n[tool.gradcheck]\nseed = 1\npoinst = 3\n')
    with pytest.raises(SettingsError) as info:
        check(settings(tmp_path))
    assert info.value.line == 6
    assert str(info.value).startswith(f"{tmp_path / 'pyproject.toml'}:6: ")
    assert "no key 'poinst'; did you mean 'points'?" in str(info.value)


@pytest.mark.parametrize("argv, says", [
    (["run", "--seeed", "1", "cases"], "unrecognized arguments: --seeed; did you mean "
                                       "'--seed'?"),
    (["run", "--jbos=2", "cases"], "did you mean '--jobs'?"),
    (["rnu", "cases"], "invalid choice: 'rnu' (choose from 'run', "),
    (["run", "--format", "jsn", "cases"], "did you mean 'json'?"),
])
def test_a_misspelled_command_line_option_is_answered(capsys, argv, says):
    from gradcheck.cli.main import main

    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2 and says in err, err
    assert argv[0] != "rnu" or err.rstrip().endswith("; did you mean 'run'?")


@pytest.mark.parametrize("written,meant", [
    ("conjj(z)", "conj(x)"), ("conjugate(z)", "conj(x)"), ("angel(z)", "angle(x)"),
    ("imagg(z)", "imag(x)"), ("ral(z)", "real(x)"), ("view_as_reel(z)", "view_as_real(x)"),
    ("view_as_complx(V)", "view_as_complex(x)"), ("fftt(z)", "fft(x, n, axis, norm)")])
def test_a_misspelled_complex_function_is_answered_with_the_one_meant(written, meant):
    # the functions of complex values are the complex table's, not the real table's
    from conftest import make_case
    from gradcheck.base.errors import CaseFileError

    with pytest.raises(CaseFileError, match=f"did you mean {re.escape(meant)}"):
        make_case(written, {"z": {"shape": [3], "dtype": "complex"}, "V": [3, 2]})
