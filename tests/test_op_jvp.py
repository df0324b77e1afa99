"""op.jvp: the op's forward mode (forward-mode AD dual numbers, in its own process)
against the exact J u, for a random tangent at every point and one-hot tangents at the
first; the bundled right ops pass and the wrong twins (cases/ops/forward_mode.toml) are
caught by op.jvp alone, in float64 and float32; an op without forward mode is a note."""

from __future__ import annotations

import dataclasses
import itertools
import shutil
import textwrap
from pathlib import Path

import pytest

from gradcheck.cases import load_cases
from gradcheck.checking.case import run_case
from gradcheck.checking.opcheck import CHECKS
from gradcheck.checking.opcheck.jvp import ONE_HOTS, SAMPLED
from gradcheck.session.runner import run
from conftest import skipped_saying_why  # noqa: E402

OPS = Path(__file__).resolve().parent.parent / "cases" / "ops"
CASES = {c.name: c for c in load_cases(OPS / "forward_mode.toml")}
DTYPES = ("float64", "float32")
#: the bundled cases run in bfloat16 too (the op runs in it on a CPU)
BUNDLED = DTYPES + ("bfloat16",)
RIGHT = [n for n, c in CASES.items() if c.expect == "pass"]
#: wrong op -> what op.jvp's message says
WRONG = {"sin-jvp-twice": "under forward-mode AD",
         "mul-jvp-forgets-y": "under forward-mode AD",
         "sin-jvp-raises": "tangent buffer not allocated",
         # order = 2: op.double (reverse over reverse) passes it
         "sin-by-cos-jvp-sign": "worst x.grad (forward-over-reverse)"}


@pytest.fixture(scope="module")
def bundled():
    cache: dict = {}
    return {(n, d): run_case(CASES[n], d, cache=cache, timeout=None)
            for n in CASES for d in BUNDLED}


def test_jvp_is_a_named_check():
    assert "jvp" in CHECKS
    assert set(WRONG) == {n for n, c in CASES.items() if c.expect == "fail"}


@pytest.mark.parametrize("dtype", BUNDLED)
@pytest.mark.parametrize("name", RIGHT)
def test_right_forward_mode_passes(bundled, name, dtype):
    result = bundled[name, dtype]
    assert result.status == "passed", result.message
    jvp = result.witness("op.jvp")
    assert jvp.status == "passed" and jvp.checked > 0 and not jvp.notes
    # (op.vmap is skipped, saying why, for a Function without vmap support)
    assert all(w.status == "passed" for w in result.witnesses if not skipped_saying_why(w))


@pytest.mark.parametrize("dtype", BUNDLED)
@pytest.mark.parametrize("name", list(WRONG))
def test_wrong_forward_mode_is_caught_by_op_jvp_alone(bundled, name, dtype):
    result = bundled[name, dtype]
    assert result.status == "passed" and result.message.startswith("caught as expected")
    assert [w.witness for w in result.witnesses if w.status == "failed"] == ["op.jvp"]
    assert WRONG[name] in result.witness("op.jvp").message
    plain = run_case(dataclasses.replace(CASES[name], expect="pass"), dtype, timeout=None)
    assert plain.status == "failed"


def test_the_message_names_the_tangent(bundled):
    message = bundled["mul-jvp-forgets-y", "float64"].witness("op.jvp").message
    assert ("with a random tangent on x, y: out0" in message
            or "with a one-hot tangent on y[" in message), message
    # a one-hot tangent on x alone is right: only y's are forgotten
    assert "one-hot tangent on x[" not in message


_counter = itertools.count()


def run_ops(tmp_path: Path, source: str, cases: str):
    module = f"jvp_ops_{next(_counter)}_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text("import torch\n\n" + textwrap.dedent(source))
    path = tmp_path / "cases.toml"
    path.write_text(textwrap.dedent(cases).replace("{mod}", module))
    return {(c.name, c.dtype): c for c in run([path], timeout=None).cases}


NO_JVP = """
class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 2

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


@torch.library.custom_op("gradcheck_jvp_test::cube", mutates_args=())
def cube(x: torch.Tensor) -> torch.Tensor:
    return x ** 3


def _backward(ctx, g):
    return 3 * ctx.x ** 2 * g


def _setup(ctx, inputs, output):
    ctx.x = inputs[0]


cube.register_autograd(_backward, setup_context=_setup)
"""


def test_an_op_without_forward_mode_is_a_note_not_a_failure(tmp_path):
    results = run_ops(tmp_path, NO_JVP, """
        [[case]]
        name = "square-no-jvp"
        op = "{mod}:Square"
        reference = "x ** 2"
        inputs.x = { shape = [5] }
        dtype = ["float64", "float32"]

        [[case]]
        name = "custom-op-no-forward-rule"
        op = "{mod}:cube"
        reference = "x ** 3"
        inputs.x = { shape = [5] }
        dtype = ["float64", "float32"]
    """)
    for dtype in DTYPES:
        square = results["square-no-jvp", dtype]
        assert square.status == "passed", square.message
        jvp = square.witness("op.jvp")
        assert jvp.status == "skipped" and jvp.checked == 0   # saying why
        assert jvp.message == ("forward mode not supported: NotImplementedError: You must "
                               "implement the jvp function for custom autograd.Function to "
                               "use it with forward mode AD.")
        # a torch.library op with a backward and no forward-mode rule (its autograd
        # kernel is a Function without jvp)
        cube = results["custom-op-no-forward-rule", dtype]
        assert cube.status == "passed", cube.message
        assert cube.witness("op.jvp").status == "skipped"
        assert cube.witness("op.jvp").message.startswith("forward mode not supported: ")


def test_a_larger_output_is_sampled_at_the_first_point(tmp_path):
    shutil.copy(OPS / "forward_mode.py", tmp_path / "fm_ops.py")
    (tmp_path / "cases.toml").write_text(textwrap.dedent("""
        [defaults]
        dtype = ["float64", "float32"]

        [[case]]
        name = "sin-large"
        op = "fm_ops:Sin"
        inputs.x = { shape = [10, 10] }
        reference = "sin(x)"

        [[case]]
        name = "sin-large-twice"
        op = "fm_ops:SinJvpTwice"
        inputs.x = { shape = [10, 10] }
        reference = "sin(x)"
    """))
    results = {(c.name, c.dtype): c for c in run([tmp_path / "cases.toml"],
                                                 timeout=None).cases}
    for dtype in DTYPES:
        right = results["sin-large", dtype]
        assert right.status == "passed", right.message
        assert right.witness("op.jacobian") is None     # over JACOBIAN_LIMIT elements
        # SAMPLED output elements, for the random tangent and each one-hot one
        assert right.witness("op.jvp").checked == SAMPLED * (1 + ONE_HOTS)
        wrong = results["sin-large-twice", dtype].witness("op.jvp")
        assert wrong.status == "failed"
        assert "under forward-mode AD" in wrong.message and "out0[" in wrong.message


def test_skip_checks_switches_op_jvp_off():
    case = CASES["sin-jvp-twice"]
    if "skip_checks" not in {f.name for f in dataclasses.fields(case)}:
        pytest.skip("the case key skip_checks is not there yet")
    case = dataclasses.replace(case, expect="pass", skip_checks=("op.jvp",))
    result = run_case(case, "float64", timeout=None)
    assert result.status == "passed" and result.witness("op.jvp") is None


@pytest.mark.parametrize("dtype", BUNDLED)
def test_forward_over_reverse_is_checked_at_order_2(bundled, dtype):
    """The Hessian-vector product forward mode takes through the backward, beside
    op.double's reverse over reverse: the first point's 8 elements, on top of J u."""
    right = bundled["sin-by-cos-second-order", dtype]
    first = run_case(dataclasses.replace(CASES["sin-by-cos-second-order"], order=1),
                     dtype, timeout=None)
    assert right.witness("op.double").status == "passed"
    assert right.witness("op.jvp").checked == first.witness("op.jvp").checked + 8
