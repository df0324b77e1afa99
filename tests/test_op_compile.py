"""op.compile: the op's call under torch.compile (aot_eager unless compile_backend says)
at the first point, its outputs and vᵀJ against the exact values and the op's own eager
call, one tensor in two argument slots, graph breaks as notes. Real ops run through
gradcheck: the bundled cases/ops/paths.toml (a right GELU, its twin whose backward
takes another branch under torch.compile, x * y) in float64 and float32, and ops written
here (tmp_path) for what the bundled ones do not show."""

from __future__ import annotations

import dataclasses
import itertools
import shutil
import textwrap
from pathlib import Path

import pytest

from gradcheck.base.errors import CaseFileError
from gradcheck.cases import load_cases
from gradcheck.checking.case import run_case
from gradcheck.checking.opcheck import CHECKS, compiled
from gradcheck.session.runner import run

ROOT = Path(__file__).resolve().parent.parent
PATHS = ROOT / "cases" / "ops" / "paths.toml"
CASES = {c.name: c for c in load_cases(PATHS)}
COMPILED = ("gelu-erf", "gelu-tanh-backward-under-compile-wrong", "mul-one-tensor-twice")
DTYPES = ("float64", "float32")


@pytest.fixture(scope="module")
def bundled():
    cache: dict = {}
    return {(n, d): run_case(CASES[n], d, cache=cache, timeout=None)
            for n in COMPILED for d in DTYPES}


def test_compile_is_a_check_one_may_switch_off():
    from gradcheck.cases.vocabulary import SKIPPABLE

    assert "compile" in CHECKS and "compile" in SKIPPABLE


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_backward_that_branches_under_compile_is_caught_naming_the_path(bundled, dtype):
    result = bundled["gelu-tanh-backward-under-compile-wrong", dtype]
    assert result.status == "passed" and result.message.startswith("caught as expected")
    failed = result.witness("op.compile")
    assert failed.status == "failed"
    assert failed.message.startswith("under torch.compile (backend aot_eager): ")
    assert "x.grad (compiled" in failed.message
    # caught by op.compile alone: every eager check passes it (or is skipped)
    assert [w.witness for w in result.witnesses if w.status == "failed"] == ["op.compile"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_right_gelu_passes_with_op_compile_checked(bundled, dtype):
    result = bundled["gelu-erf", dtype]
    assert result.status == "passed", result.message
    checked = result.witness("op.compile")
    # 16 outputs and 16 gradients, against the exact values and against the eager call
    assert checked.status == "passed" and checked.checked == (16 + 16) * 2
    assert not checked.notes


@pytest.mark.parametrize("dtype", DTYPES)
def test_one_tensor_in_both_slots_under_compile(bundled, dtype):
    result = bundled["mul-one-tensor-twice", dtype]
    assert result.status == "passed", result.message
    checked = result.witness("op.compile")
    # the call: an output and two gradients of 12, twice; the shared x's gradient
    # against the eager call with one tensor and against the sum of the two slots'
    assert checked.status == "passed" and checked.checked == 3 * 12 * 2 + 12 * 2


def test_skip_checks_switches_it_off():
    case = dataclasses.replace(CASES["gelu-tanh-backward-under-compile-wrong"],
                               expect="pass")
    assert run_case(case, "float32", timeout=None).status == "failed"
    object.__setattr__(case, "skip_checks", ("op.compile",))
    result = run_case(case, "float32", timeout=None)
    assert result.status == "passed", result.message
    assert "op.compile" not in [w.witness for w in result.witnesses]


def test_inductor_without_a_compiler_is_skipped_saying_why(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    case = dataclasses.replace(CASES["gelu-erf"], compile_backend="inductor")
    result = run_case(case, "float64", timeout=None)
    assert result.status == "passed", result.message
    skipped = result.witness("op.compile")
    assert skipped.status == "skipped" and skipped.checked == 0
    assert skipped.message == ('op.compile not run: compile_backend = "inductor" needs '
                               'a C++ compiler on CPU, and neither c++ nor g++ is on PATH')


def test_an_engine_op_is_skipped_saying_why():
    (case,) = [c for c in load_cases(ROOT / "cases" / "ops" / "ops.toml")
               if c.name == "engine-softplus"]
    result = run_case(case, "float64", timeout=None)
    assert result.status == "passed", result.message
    skipped = result.witness("op.compile")
    assert skipped.status == "skipped" and skipped.message == compiled.ENGINE


def test_the_judge_warms_torch_compile_only_for_a_case_that_runs_it(monkeypatch):
    monkeypatch.setattr(compiled, "_warm", False)
    case = dataclasses.replace(CASES["gelu-erf"], skip_checks=("op.compile",))
    assert run_case(case, "float64", timeout=None).status == "passed"
    assert compiled._warm is False
    assert run_case(CASES["gelu-erf"], "float64", timeout=None).status == "passed"
    assert compiled._warm is True


# --------------------------------------------------------------------------- case keys


def _file(tmp_path: Path, extra: str, defaults: str = "", op: bool = True) -> Path:
    path = tmp_path / "cases.toml"
    path.write_text(textwrap.dedent(f'''
        {defaults}
        [[case]]
        name = "gelu"
        {'op = "paths:Gelu"' if op else ""}
        {"reference" if op else "expr"} = "0.5 * x * (1 + erf(x / sqrt(2)))"
        inputs.x = [4]
        {extra}
    '''))
    return path


def test_compile_backend_is_read_from_the_case_and_defaults(tmp_path):
    assert CASES["gelu-erf"].compile_backend == "aot_eager"
    (case,) = load_cases(_file(tmp_path, 'compile_backend = "eager"'))
    assert case.compile_backend == "eager"
    (case,) = load_cases(_file(tmp_path, "", '[defaults]\ncompile_backend = "inductor"'))
    assert case.compile_backend == "inductor"
    # under [defaults], the op cases' key: a formula case takes none
    (case,) = load_cases(_file(tmp_path, "", '[defaults]\ncompile_backend = "eager"',
                               op=False))
    assert case.op is None


@pytest.mark.parametrize("extra,defaults,op", [
    ('compile_backend = "cudagraphs"', "", True),
    ("compile_backend = 3", "", True),
    ("", '[defaults]\ncompile_backend = "nonsense"', True),
    ('compile_backend = "eager"', "", False),
])
def test_a_bad_compile_backend_is_the_cases_error(tmp_path, extra, defaults, op):
    path = _file(tmp_path, extra, defaults, op)
    with pytest.raises(CaseFileError) as raised:
        load_cases(path)
    assert raised.value.case == "gelu" and raised.value.file == str(path)
    assert raised.value.line is not None
    assert str(raised.value).endswith(
        "compile_backend only apply to a case with op" if not op else
        f"compile_backend must be one of aot_eager, eager, inductor, got "
        f"{(extra or defaults).split('= ')[1]}".replace('"', "'"))


# --------------------------------------------------------------------------- ops written here

_counter = itertools.count()


def run_ops(tmp_path: Path, source: str, cases: str) -> dict:
    module = f"compile_ops_{next(_counter)}_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text("import torch\n\n" + textwrap.dedent(source))
    path = tmp_path / "cases.toml"
    path.write_text('[defaults]\ndtype = ["float64", "float32"]\npoints = 1\n'
                    + textwrap.dedent(cases).replace("{mod}", module))
    return {(c.name, c.dtype): c for c in run([path], timeout=None).cases}


OPS = """
def breaks(x):
    '''Right, and a graph break: torch.compile runs it in two graphs.'''
    y = torch.sin(x)
    torch._dynamo.graph_break()
    return y * 2


def raises_compiled(x):
    '''Wrong: its compiled path (torch.compiler.is_compiling()) multiplies by a vector
    of the wrong length, so it raises under torch.compile and never eagerly.'''
    if torch.compiler.is_compiling():
        return torch.sin(x) @ torch.ones(7, dtype=x.dtype)
    return torch.sin(x)


def scaled(x, w, scale=2.0):
    return scale * x * w
"""


def test_graph_breaks_raises_and_backends(tmp_path):
    results = run_ops(tmp_path, OPS, """
        [[case]]
        name = "breaks"
        op = "{mod}:breaks"
        reference = "2 * sin(x)"
        inputs.x = [5]

        [[case]]
        name = "raises-compiled"
        op = "{mod}:raises_compiled"
        reference = "sin(x)"
        inputs.x = [5]

        [[case]]
        name = "scaled-eager-backend"
        op = "{mod}:scaled"
        call = "op(x, w, scale=3.0)"
        reference = "3 * x * w"
        inputs.x = [2, 3]
        inputs.w = [2, 3]
        compile_backend = "eager"
    """)
    for dtype in DTYPES:
        breaks = results["breaks", dtype]
        assert breaks.status == "passed", breaks.message
        checked = breaks.witness("op.compile")
        assert checked.status == "passed" and checked.checked == 5 * 2 * 2
        (note,) = checked.notes
        assert note.startswith("torch.compile: graph break (fullgraph=True raised, the "
                               "call compiled without it): ")
        raises = results["raises-compiled", dtype]
        assert raises.status == "failed"
        failed = raises.witness("op.compile")
        assert failed.message.startswith(
            "under torch.compile (backend aot_eager), the op raised ")
        assert failed.message.startswith(
            "under torch.compile (backend aot_eager), the op raised TorchRuntimeError: ")
        assert [w.witness for w in raises.witnesses if w.status == "failed"] == [
            "op.compile"]
        # a keyword fixed by the call, and one tensor as both x and w
        scaled = results["scaled-eager-backend", dtype]
        assert scaled.status == "passed", scaled.message
        assert scaled.witness("op.compile").checked == 3 * 6 * 2 + 6 * 2


def test_bfloat16(tmp_path):
    case = dataclasses.replace(CASES["gelu-erf"], dtypes=("bfloat16",))
    result = run_case(case, "bfloat16", timeout=None)
    assert result.status == "passed", result.message
    assert result.witness("op.compile").status == "passed"
