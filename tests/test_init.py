"""``gradcheck init MODULE:CLASS``: a starter case file read from the op's source (the
module is never imported), a pytest test and the README's CI workflow; the case file,
its reference filled in, passes a right op under ``gradcheck run`` and under pytest,
and fails a wrong one."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

try:
    import tomllib
except ImportError:   # Python 3.10
    import tomli as tomllib

from gradcheck.cli.exit_codes import ExitCode
from gradcheck.cli.main import main
from gradcheck.cli.starter import PLACEHOLDER_REFERENCE, WORKFLOW

REPO = Path(__file__).resolve().parent.parent
pytest_plugins = ["pytester"]

CUBE = (Path(__file__).parent / "fixtures" / "cube_ops.py").read_text()
OPS = '''\
import torch

from pathlib import Path
Path(__file__).with_name("imported").write_text("ran")   # init must never run this


''' + CUBE + '''

class CubeTwoX(Cube):
    """Wrong: 2x² for 3x²; forward inherited from Cube."""

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 2 * x ** 2


class Norm(torch.autograd.Function):
    @staticmethod
    def forward(x, g, eps=1e-6, *, scale: float = 1.0):
        return x * g

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass


def clamp(x: torch.Tensor, lo: float, hi: float):
    return x.clamp(lo, hi)
'''


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project folder holding cube_ops.py, the current folder."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\nversion = "0"\n')
    (tmp_path / "cube_ops.py").write_text(OPS)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture(scope="module", autouse=True)
def _warm_imports(tmp_path_factory):
    """An op case run before any ``pytester`` run: pytester removes the modules an
    in-process run imported, and NumPy cannot be imported twice."""
    import gradcheck
    import gradcheck.formula.suggestions  # noqa: F401  (what init imports)

    folder = tmp_path_factory.mktemp("warm")
    (folder / "warm_ops.py").write_text(OPS)
    (folder / "warm.toml").write_text('[[case]]\nname = "w"\nop = "warm_ops:Cube"\n'
                                      'reference = "x**3"\ninputs.x = { shape = [2] }\n')
    assert gradcheck.run([folder], dtype="float64", points=1).cases[0].status == "passed"


def _filled(case: Path, reference: str, shape: str = "[5]") -> None:
    """The starter case with its placeholder reference and shapes filled in."""
    text = case.read_text(encoding="utf-8")
    assert text.count(PLACEHOLDER_REFERENCE) == 1
    text = text.replace(PLACEHOLDER_REFERENCE, f'reference = "{reference}"')
    case.write_text(text.replace("shape = [4]", f"shape = {shape}"), encoding="utf-8")


def test_the_workflow_written_is_the_ci_pages():
    readme = (REPO / "docs" / "ci.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```yaml\n(.*?)```", readme, re.S)
    assert WORKFLOW in blocks


def test_init_then_run_passes_the_op_once_its_reference_is_filled_in(pytester, capsys):
    # pytester's folder, the current one: the test that init writes runs there
    pytester.makeini("[pytest]\n")
    project = pytester.path
    (project / "cube_ops.py").write_text(OPS)
    assert main(["init", "cube_ops:Cube"]) == ExitCode.OK
    out = capsys.readouterr().out
    assert "gradcheck run cases/cube.toml" in out.splitlines()[-2]
    assert not (project / "imported").exists()        # read, never imported
    case = project / "cases" / "cube.toml"
    table = tomllib.loads(case.read_text(encoding="utf-8"))["case"][0]
    assert table["op"] == "cube_ops:Cube" and table["inputs"] == {"x": {"shape": [4]}}
    assert "reference" not in table                   # left to fill in
    assert (project / ".github" / "workflows" / "gradcheck.yml").read_text() == WORKFLOW

    _filled(case, "x**3")
    assert main(["run", "cases/cube.toml"]) == ExitCode.OK
    assert "2 passed, 0 failed" in capsys.readouterr().out

    # the test it wrote runs the same case file through the pytest plugin (in this
    # process: the imports are done, and the op runs in a process of its own anyway)
    pytester.runpytest("-p", "no:cacheprovider", "tests/test_cube_gradients.py",
                       "-W", "ignore::DeprecationWarning").assert_outcomes(passed=2)


def test_a_wrong_op_fails_its_filled_in_case(project, capsys):
    # by its file, and with the forward it inherits
    assert main(["init", "cube_ops.py:CubeTwoX"]) == ExitCode.OK
    case = project / "cases" / "cube-two-x.toml"
    assert tomllib.loads(case.read_text())["case"][0]["op"] == "cube_ops:CubeTwoX"
    _filled(case, "x**3")
    capsys.readouterr()
    assert main(["run", str(case), "--dtype", "float64"]) == ExitCode.MISMATCH
    # (the report wraps its lines at spaces)
    assert "(x.grad is 2/3 times the exact gradient)" in " ".join(capsys.readouterr().out.split())


def test_the_inputs_come_from_forwards_signature(project):
    assert main(["init", "cube_ops:Norm", "--dir", "sub"]) == ExitCode.OK
    text = (project / "sub" / "cases" / "norm.toml").read_text(encoding="utf-8")
    table = tomllib.loads(text)["case"][0]
    # setup_context: forward takes no ctx; the defaulted arguments are left as they are
    assert list(table["inputs"]) == ["x", "g"] and "args" not in table
    assert "# args = [1e-06]" in text
    assert '# call = "op(x, g, eps=1e-06, scale=1.0)"' in text

    assert main(["init", "cube_ops:clamp"]) == ExitCode.OK
    text = (project / "cases" / "clamp.toml").read_text(encoding="utf-8")
    # a plain function: every argument is the op's; annotated floats are no inputs
    assert re.findall(r"^inputs\.(\w+)", text, re.M) == ["x"]
    assert "\nargs = [TODO, TODO]" in text            # to fill in: no default


def test_existing_files_are_kept_unless_forced(project, capsys):
    assert main(["init", "cube_ops:Cube"]) == ExitCode.OK
    case = project / "cases" / "cube.toml"
    _filled(case, "x**3")
    edited = case.read_text()
    capsys.readouterr()
    assert main(["init", "cube_ops:Cube"]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert "cases/cube.toml already exists; --force replaces them" in err
    assert "gradcheck.yml" not in err                 # the same text: kept, no conflict
    assert case.read_text() == edited
    assert main(["init", "cube_ops:Cube", "--force"]) == ExitCode.OK
    assert PLACEHOLDER_REFERENCE in case.read_text()


def test_a_missing_op_says_what_there_is(project, capsys):
    assert main(["init", "cube_ops:Cueb"]) == ExitCode.USAGE
    assert "has no class or function Cueb; did you mean Cube?" in capsys.readouterr().err
    assert main(["init", "no_such_ops:Cube"]) == ExitCode.USAGE
    assert "no module no_such_ops" in capsys.readouterr().err
    assert main(["init", "cube_ops"]) == ExitCode.USAGE
    assert "module:Class" in capsys.readouterr().err
    assert not (project / "cases").exists() and not (project / "imported").exists()


def test_a_module_outside_the_project_is_refused(project, tmp_path_factory, capsys):
    elsewhere = tmp_path_factory.mktemp("elsewhere") / "far_ops.py"
    elsewhere.write_text(textwrap.dedent(OPS))
    assert main(["init", f"{elsewhere}:Cube"]) == ExitCode.USAGE
    assert "is outside the folder of the case file" in capsys.readouterr().err
