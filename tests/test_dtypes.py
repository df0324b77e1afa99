"""float16 and bfloat16 (issue 10, part 2): the dtype facts of gradcheck/base/dtypes.py, and
their plumbing: case files and the CLI accept the four dtypes, sampled points and
cotangents are representable in the dtype, the torch witness and ops get tensors of the
dtype, the engine and numeric witnesses are skipped with the reason, and every report
shows skipped witnesses.

These tests check plumbing, not pass/fail verdicts in the low dtypes: the tolerance model
for float16 and bfloat16 is not in yet (compare.py falls back to float64's rows there)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import torch
from hypothesis import given, settings

import gradcheck
from gradcheck.base import dtypes
from gradcheck import engine
from gradcheck.witnesses.registry import skip_reason
from gradcheck.witnesses import torch as torch_witness
from gradcheck.checking.opcheck.loader import OpKind, Runner, to_numpy
from gradcheck.cases import case_from_dict, read_file
from gradcheck.cli.main import main
from gradcheck.report import render
from gradcheck.report.annotations import github_annotations
from gradcheck.base.result import (FAILED, PASSED, SKIPPED, CaseResult, RunResult, WitnessResult,
                                   Worst)
from gradcheck.rules import BILINEAR, COMPARISON, COMPOSITE, POOLING, REDUCTION, RULES, STRUCTURE
from gradcheck.checking.case import cotangent
from gradcheck.checking.verdicts import grad_fn_parity
from gradcheck.sampling.points import sample
from gradcheck.strategies import points

ROOT = Path(__file__).resolve().parents[1]
LOW = ("float16", "bfloat16")
ENGINE_REASON = "the engine witness runs in float64 and float32 only"
NUMERIC_REASON = "the numeric witness runs in float64 and float32 only"
#: significand bits p of each dtype, the implicit bit counted (IEEE 754, bfloat16 spec)
PRECISION = {"float64": 53, "float32": 24, "float16": 11, "bfloat16": 8}
TORCH = {"float64": torch.float64, "float32": torch.float32, "float16": torch.float16,
         "bfloat16": torch.bfloat16}


def representable(x: np.ndarray, dtype: str) -> bool:
    """Every value of ``x`` survives a round trip through ``dtype`` unchanged (checked by
    torch's own cast, not gradcheck's rounding; that cast rounds float64 through float32,
    which can be off by one unit for values it must round, but never moves a value the
    dtype holds)."""
    x = np.asarray(x, dtype=np.float64)
    back = torch.from_numpy(x.copy()).to(TORCH[dtype]).to(torch.float64).numpy()
    return bool(np.array_equal(back, x))


# ------------------------------------------------------------------------ the facts

def test_names_are_the_four_dtypes_in_order():
    assert dtypes.NAMES == ("float64", "float32", "float16", "bfloat16")


@pytest.mark.parametrize("name", list(PRECISION))
def test_facts_agree_with_numpy_ml_dtypes_and_torch(name):
    finfo = ml_dtypes.finfo(dtypes.numpy_dtype(name))   # handles NumPy's own types too
    tinfo = torch.finfo(TORCH[name])
    assert dtypes.unit_roundoff(name) == 2.0 ** -PRECISION[name]
    assert dtypes.eps(name) == 2 * dtypes.unit_roundoff(name) == float(finfo.eps) \
        == tinfo.eps
    assert dtypes.max_finite(name) == float(finfo.max) == tinfo.max
    assert dtypes.smallest_normal(name) == float(finfo.smallest_normal) == tinfo.tiny
    assert dtypes.torch_dtype(name) is TORCH[name]
    assert dtypes.numpy_dtype(name).itemsize == tinfo.bits // 8


def test_unknown_dtype_is_a_value_error_naming_the_four():
    for bad in ("float8", "int32", None, ["float32"]):
        with pytest.raises(ValueError, match="float64, float32, float16, bfloat16"):
            dtypes.info(bad)


def _nearest(x: float, p: int) -> float:
    """``x`` (normal in the target format) rounded to p significand bits, ties to even:
    x = m·2^e with 1/2 <= |m| < 1, so m·2^p is exact and Python's round() is exactly
    round-half-even on it."""
    m, e = math.frexp(x)
    return math.ldexp(round(math.ldexp(m, p)), e - p)


@pytest.mark.parametrize("name", list(PRECISION))
def test_round_to_rounds_to_nearest_even_and_is_idempotent(name):
    x = np.random.default_rng(0).standard_normal(2000) * 10.0 ** np.arange(-4, 4).repeat(250)
    x = x[np.abs(x) >= dtypes.smallest_normal(name)]
    # ties, and the value that double rounding through float32 gets wrong (torch's own
    # float64 -> float16 cast gives -43.0 for it; the nearest float16 is -42.96875)
    x = np.concatenate([x, [1 + 2.0 ** -PRECISION[name], 1 + 3 * 2.0 ** -PRECISION[name],
                            -42.98437372777596]])
    r = dtypes.round_to(x, name)
    assert r.dtype == np.float64
    np.testing.assert_array_equal(r, [_nearest(v, PRECISION[name]) for v in x])
    np.testing.assert_array_equal(dtypes.round_to(r, name), r)
    assert representable(r, name)
    if name != "float64":
        assert not np.array_equal(r, x)   # it did round


def test_round_to_known_values_and_overflow():
    assert dtypes.round_to(1 / 3, "bfloat16") == 0.333984375      # 8 significant bits
    assert dtypes.round_to(1 / 3, "float16") == 0.333251953125    # 11 significant bits
    assert dtypes.round_to(70000.0, "float16") == np.inf           # past 65504
    assert dtypes.round_to(70000.0, "bfloat16") == 70144.0         # float32's range


@pytest.mark.parametrize("name", list(PRECISION))
def test_to_float64_widens_any_tensor(name):
    t = torch.tensor([1 / 3, -2.5, 1e-3], dtype=TORCH[name], requires_grad=True) * 2
    out = dtypes.to_float64(t)
    assert isinstance(out, np.ndarray) and out.dtype == np.float64
    np.testing.assert_array_equal(out, t.detach().to(torch.float64).numpy())
    assert representable(out, name)
    bf = np.array([1.5, 3.0], dtype=ml_dtypes.bfloat16)   # an array of the dtype too
    np.testing.assert_array_equal(dtypes.to_float64(bf), [1.5, 3.0])


def test_importing_dtypes_imports_neither_torch_nor_ml_dtypes():
    script = textwrap.dedent("""
        import json, sys
        from gradcheck.base import dtypes
        facts = [dtypes.unit_roundoff(n) for n in dtypes.NAMES]
        print(json.dumps(sorted(m for m in sys.modules
                                if m.split(".")[0] in ("torch", "ml_dtypes"))))
        """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout) == []


# ---------------------------------------------------------------- case files, CLI

def _write(tmp_path, text: str) -> Path:
    path = tmp_path / "low.toml"
    path.write_text(textwrap.dedent(text))
    return path


def test_case_files_accept_the_four_dtypes(tmp_path):
    path = _write(tmp_path, """
        [[case]]
        name = "one"
        expr = "sum(x ** 2)"
        inputs.x = { shape = [3] }
        dtype = "bfloat16"

        [[case]]
        name = "all"
        expr = "sum(x ** 2)"
        inputs.x = { shape = [3] }
        dtype = ["float64", "float32", "float16", "bfloat16"]
        """)
    cases, errors = read_file(path)
    assert errors == []
    assert [c.dtypes for c in cases] == [("bfloat16",),
                                        ("float64", "float32", "float16", "bfloat16")]


def test_case_files_reject_other_dtypes_naming_the_four(tmp_path):
    path = _write(tmp_path, """
        [[case]]
        name = "bad"
        expr = "sum(x)"
        inputs.x = { shape = [3] }
        dtype = "float8"
        """)
    cases, errors = read_file(path)
    assert cases == [] and len(errors) == 1
    assert "float64, float32, float16, bfloat16" in str(errors[0])


def test_cli_runs_float16_and_the_json_shows_skipped_witnesses(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)   # a run writes only inside its project
    path = _write(tmp_path, """
        [[case]]
        name = "square"
        expr = "sum(x ** 2)"
        inputs.x = { shape = [4] }
        """)
    out = tmp_path / "report.json"
    main(["run", str(path), "--dtype", "float16", "--format", "json", "--output", str(out)])
    report = json.loads(out.read_text())
    (case,) = report["cases"]
    assert case["dtype"] == "float16"
    w = case["witnesses"]
    assert w["engine"]["status"] == "skipped" and w["engine"]["message"] == ENGINE_REASON
    assert w["numeric"]["status"] == "skipped" and w["numeric"]["message"] == NUMERIC_REASON
    assert w["torch"]["status"] in (PASSED, FAILED) and w["torch"]["checked"] > 0


def test_cli_rejects_an_unknown_dtype(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["run", "cases/", "--dtype", "float8"])
    assert exc.value.code == 2
    assert "bfloat16" in capsys.readouterr().err   # the choices are listed


# -------------------------------------------------------------- points and vectors

CASE = case_from_dict({"name": "c", "expr": "sum(tanh(x) * y, axis=0)",
                       "inputs": {"x": {"shape": [5, 4]},
                                  "y": {"shape": [4], "domain": "positive"}},
                       "gradient": "random"})


@pytest.mark.parametrize("dtype", LOW)
def test_sampled_points_and_cotangents_are_representable(dtype):
    rounded_somewhere = False
    for i in range(3):
        point = sample(CASE, dtype, i).values
        v = cotangent(CASE, dtype, i)
        for value in (*point.values(), v):
            assert value.dtype == np.float64 and representable(value, dtype)
        assert np.all(point["y"] > 0)           # still inside the domain
        rounded_somewhere |= not representable(sample(CASE, "float64", i).values["x"],
                                               dtype)
    assert rounded_somewhere   # the float64 draws are not, so the rounding is real


@pytest.mark.parametrize("dtype", LOW)
def test_strategy_points_are_representable(dtype):
    @settings(max_examples=20, deadline=None, database=None)
    @given(points(CASE, dtype))
    def check(point):
        assert set(point) == {"x", "y"}
        assert all(representable(p, dtype) for p in point.values())

    check()


# ------------------------------------------------------------------ torch witness

@pytest.mark.parametrize("dtype", LOW)
def test_torch_witness_leaves_have_the_dtype(dtype, monkeypatch):
    seen = {}
    real = torch_witness.drive

    def spy(case, leaves, apply, tensor, v, to_numpy, **options):
        seen.update({n: t.dtype for n, t in leaves.items()})
        seen["v"] = tensor(v).dtype
        return real(case, leaves, apply, tensor, v, to_numpy, **options)

    monkeypatch.setattr(torch_witness, "drive", spy)
    point = sample(CASE, dtype, 0).values
    got = torch_witness.run(CASE, point, cotangent(CASE, dtype, 0), dtype)
    assert seen == {"x": TORCH[dtype], "y": TORCH[dtype], "v": TORCH[dtype]}
    # what came back was computed in the dtype (and widened exactly to float64)
    for value in (got.value, *got.grads.values()):
        assert value.dtype == np.float64 and representable(value, dtype)


def _example_on_torch(rule, leaf):
    """(the row's example formula on torch leaves, its first float leaf): indices as
    int64."""
    from gradcheck.witnesses.drive import rebuild
    from gradcheck.formula.parser import parse
    from gradcheck.formula.docs import EXAMPLE_DTYPES, EXAMPLE_INPUTS
    from gradcheck.formula.tree import Node, walk

    names = {n: Node("input", shape=s, name=n, dtype=EXAMPLE_DTYPES.get(n))
             for n, s in EXAMPLE_INPUTS.items()}
    root = parse(rule.example, names)
    used = {n.name for n in walk(root) if n.op == "input"}
    leaves = {n: torch.zeros(s, dtype=torch.int64) if n in EXAMPLE_DTYPES else leaf(*s)
              for n, s in EXAMPLE_INPUTS.items() if n in used}
    floats = [t for n, t in leaves.items() if n not in EXAMPLE_DTYPES]
    return rebuild(root, leaves, lambda node, args: node.call("torch", args)), floats[0]


def _probe(name: str, dt: torch.dtype):
    """Run one rule's torch column forward and backward on CPU in ``dt``."""
    rule = RULES[name]

    def leaf(*shape):
        return (torch.rand(*shape, dtype=torch.float64) * 0.5 + 0.2).to(dt).requires_grad_()

    if name.startswith("logical_"):   # & | ~ combine conditions: boolean tensors
        return rule.torch(*[leaf(3) < 0.4 for _ in range(rule.arity)]), None
    if rule.family == COMPARISON:
        return rule.torch(leaf(3), leaf(3)), None
    if name == "where":
        x = leaf(3)
        return rule.torch(x < 0.4, x, 2 * x), x
    if name == "masked_fill":
        x = leaf(3)
        return rule.torch(x, x < 0.4, -1.5), x
    if rule.stops_gradient:      # detach: its value, and no gradient through it
        x = leaf(3)
        return rule.torch(x) + x, x
    if name == "one_hot":        # integer labels, times a float tensor
        x = leaf(3, 4)
        labels = torch.tensor([0, 3, 1])
        return rule.call("torch", [labels], rule.bind([(3,)], {"n": 4})).to(x.dtype) * x, x
    if name == "einsum":
        x = leaf(2, 3, 4)
        return rule.call("torch", [x, leaf(2, 4, 5)], rule.bind(
            [(2, 3, 4), (2, 4, 5)], {"subscripts": "bij,bjk->bik"})), x
    if name in ("fft", "ifft", "irfft"):   # a complex operand: the view_as_real layout
        x = leaf(3, 4, 2)
        return rule.call("torch", [x], rule.bind([(3, 4, 2)], {"axis": 1})), x
    if rule.family in (REDUCTION, COMPOSITE):   # along axis 1, the other parameters at
        x = leaf(3, 4)                          # their defaults
        return rule.call("torch", [x], rule.bind([(3, 4)], {"axis": 1})), x
    if rule.family in (BILINEAR, POOLING) and rule.params:   # a convolution, a pooling: NCHW
        d = int(name[4]) if name.startswith("conv") else 2     # conv1d: 1, conv2d: 2
        x = leaf(2, 3, *[5] * d)
        operands = [x, leaf(4, 3, *[3] * d)] if name.startswith("conv") else [x]
        given = {} if name.startswith("conv") else {"kernel_size": 2}
        return rule.call("torch", operands, rule.bind([tuple(a.shape) for a in operands],
                                                      given)), x
    if rule.family == STRUCTURE:   # the row's example, over its documented inputs
        return _example_on_torch(rule, leaf)
    if rule.family == BILINEAR:
        x = leaf(2, 3, 4)
        if name == "dot":
            y = leaf(4)
            return rule.torch(y, y), y
        return rule.torch(x, leaf(2, 4, 5)), x     # matmul, batched
    args = [leaf(3) for _ in range(rule.arity)]
    # a number parameter (clamp's min=, max=) given, the others at their defaults
    params = rule.bind([tuple(a.shape) for a in args],
                       {p.name: 0.5 for p in rule.params if p.kind == "number"})
    return rule.call("torch", args, params), args[0]


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("name", sorted(RULES))
def test_every_rule_runs_in_torch_on_cpu(name, dtype):
    # the torch witness's claim: no primitive of the language lacks a CPU kernel in
    # float16 or bfloat16, forward or backward
    y, x = _probe(name, TORCH[dtype])
    assert y.dtype in (TORCH[dtype], torch.bool)
    if x is not None:
        y.sum().backward()
        assert x.grad is not None and x.grad.dtype == TORCH[dtype]


# ---------------------------------------------------------------------- skipping

def test_skip_reason_names_the_dtypes_a_witness_runs_in():
    for dtype in ("float64", "float32"):
        assert skip_reason("engine", dtype) is None and skip_reason("numeric", dtype) is None
    for dtype in LOW:
        assert skip_reason("engine", dtype) == ENGINE_REASON
        assert skip_reason("numeric", dtype) == NUMERIC_REASON
        assert skip_reason("torch", dtype) is None


@pytest.mark.parametrize("dtype", LOW)
def test_engine_and_numeric_are_skipped_with_the_reason(dtype):
    result = gradcheck.check("sum(tanh(x) * x)", {"x": (6,)}, dtype=dtype)
    assert result.dtype == dtype
    engine, torch_, numeric = (result.witness(n) for n in ("engine", "torch", "numeric"))
    assert (engine.status, engine.message, engine.checked) == (SKIPPED, ENGINE_REASON, 0)
    assert (numeric.status, numeric.message, numeric.checked) == (SKIPPED, NUMERIC_REASON, 0)
    assert engine.grad_fn is None                 # no graph: the parity check leaves it
    assert torch_.status in (PASSED, FAILED) and torch_.checked > 0
    assert torch_.grad_fn[0] == "SumBackward0"


def test_the_same_witnesses_run_in_float32():
    result = gradcheck.check("sum(tanh(x) * x)", {"x": (6,)}, dtype="float32")
    assert all(w.status == PASSED and w.checked > 0 for w in result.witnesses)


@pytest.mark.parametrize("dtype", LOW)
def test_a_skipped_witness_never_fails_a_case(dtype):
    # torch given a loose tolerance of its own, so that its verdict is the case's
    result = gradcheck.check("sum(x ** 2)", {"x": (4,)}, dtype=dtype, atol=0.5, rtol=0.5,
                             witnesses=["engine", "torch", "numeric"])
    assert result.witness("torch").status == PASSED
    assert result.status == PASSED and result.message == ""


@pytest.mark.parametrize("expect", ["pass", "fail"])
def test_a_run_in_which_every_witness_is_skipped_is_skipped(expect):
    result = gradcheck.check("sum(x ** 2)", {"x": (4,)}, dtype="bfloat16",
                             witnesses=["engine", "numeric"], expect=expect)
    assert result.status == SKIPPED
    assert ENGINE_REASON in result.message and NUMERIC_REASON in result.message


def test_grad_fn_parity_ignores_a_skipped_engine():
    skipped = WitnessResult("engine", SKIPPED, message=ENGINE_REASON,
                            grad_fn=("Other",))
    torch_ = WitnessResult("torch", PASSED, checked=4, grad_fn=("SumBackward0",))
    assert grad_fn_parity([skipped, torch_]) == [skipped, torch_]
    passed = WitnessResult("engine", PASSED, checked=4, grad_fn=("Other",))
    assert grad_fn_parity([passed, torch_])[0].status == FAILED   # the check is live


# ------------------------------------------------------------------------ ops

class Cube(torch.autograd.Function):
    """x ** 3, printing the dtypes its forward and backward receive (it runs in a
    process of its own: what it prints comes back as the result's output)."""

    @staticmethod
    def forward(ctx, x):
        print("forward", x.dtype)
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        print("backward", g.dtype)
        (x,) = ctx.saved_tensors
        return 3 * x ** 2 * g


@pytest.mark.parametrize("dtype", LOW)
def test_runner_hands_the_op_tensors_of_the_dtype(dtype, capsys):
    case = case_from_dict({"name": "cube", "op": "m:Cube", "reference": "x ** 3",
                           "inputs": {"x": {"shape": [5]}}})
    runner = Runner(case, OpKind(Cube, engine=False, function=True), dtype, "cpu")
    point = sample(case, dtype, 0).values
    capsys.readouterr()
    leaves = runner.leaves(point)
    assert leaves["x"].dtype == TORCH[dtype]
    np.testing.assert_array_equal(to_numpy(leaves["x"]), point["x"])   # exactly the point
    outs = runner.forward(leaves)
    v = dtypes.round_to(np.linspace(-1, 1, 5), dtype)
    grads = runner.vjp(leaves, outs, [v])
    assert capsys.readouterr().out.splitlines() == [f"forward {TORCH[dtype]}",
                                                    f"backward {TORCH[dtype]}"]
    assert runner.tensor(v).dtype == TORCH[dtype]
    g = to_numpy(grads["x"])
    assert g.dtype == np.float64 and representable(g, dtype)


def test_check_op_runs_the_op_in_float16():
    result = gradcheck.check_op(Cube, "x ** 3", {"x": (5,)}, dtype="float16")
    assert result.dtype == "float16" and result.witnesses
    assert set(result.output.splitlines()) == {"forward torch.float16",
                                               "backward torch.float16"}


class EngineSquare(engine.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


def test_an_engine_op_in_a_low_dtype_says_why_it_cannot_run():
    case = case_from_dict({"name": "sq", "op": "m:EngineSquare", "reference": "x ** 2",
                           "inputs": {"x": {"shape": [4]}}})
    kind = OpKind(EngineSquare, engine=True, function=True)
    for dtype in ("float64", "float32"):
        leaves = Runner(case, kind, dtype, "cpu").leaves({"x": np.ones(4)})
        assert leaves["x"].data.dtype == np.dtype(dtype)
    result = gradcheck.check_op(EngineSquare, "x ** 2", {"x": (4,)}, dtype="bfloat16")
    assert result.status == "skipped"   # as the engine witness is in that dtype
    assert ENGINE_REASON in result.message and "torch.autograd.Function" in result.message


# ---------------------------------------------------------------------- reports

def _results() -> RunResult:
    skipped_engine = WitnessResult("engine", SKIPPED, message=ENGINE_REASON)
    skipped_numeric = WitnessResult("numeric", SKIPPED, message=NUMERIC_REASON)
    worst = Worst("x.grad", (1,), obtained=0.5, expected=-0.5, tolerance=1e-3, point=0)
    passed = CaseResult("good", "cases/low.toml", 3, "bfloat16", PASSED,
                        witnesses=(skipped_engine,
                                   WitnessResult("torch", PASSED, 1e-3, 2e-3, checked=4,
                                                 worst=Worst("x.grad", (0,), 1.001, 1.0,
                                                             4e-3, 0)),
                                   skipped_numeric))
    failed = CaseResult("bad", "cases/low.toml", 9, "float16", FAILED,
                        message="torch: 1 / 4 elements differ",
                        witnesses=(skipped_engine,
                                   WitnessResult("torch", FAILED, 1.0, 2.0, worst, 4, 1,
                                                 message="1 / 4 elements differ"),
                                   skipped_numeric))
    return RunResult((passed, failed), 0.5)


def test_text_report_marks_skipped_witnesses_and_gives_the_reason():
    text = render(_results(), "text")
    lines = render(_results(), "text", verbose=True).splitlines()   # every witness: -v
    good = lines[1 + next(i for i, line in enumerate(lines) if "good" in line)]
    assert "engine skip" in good and "numeric skip" in good and "torch 1.0e-03/4.0e-03" in good
    assert f"engine: skipped: {ENGINE_REASON}" in text          # under the failed case
    assert f"engine: skipped: {ENGINE_REASON}" not in render(
        RunResult(_results().cases[:1]), "text")                 # a pass shows no details
    assert f"numeric: skipped: {NUMERIC_REASON}" in render(
        RunResult(_results().cases[:1]), "text", verbose=True)


def test_json_report_shows_skipped_witnesses():
    doc = json.loads(render(_results(), "json"))
    good = doc["cases"][0]["witnesses"]
    assert good["engine"]["status"] == "skipped" and good["engine"]["message"] == ENGINE_REASON
    assert doc["summary"]["skipped"] == 0    # the cases themselves ran


def test_junit_report_keeps_skipped_witnesses_out_of_the_skipped_count():
    root = ET.fromstring(render(_results(), "junit"))
    suite = root.find("testsuite")
    assert suite.get("skipped") == "0" and suite.get("failures") == "1"
    good, bad = suite.findall("testcase")
    assert good.find("skipped") is None and good.find("failure") is None
    assert ENGINE_REASON in good.find("system-out").text
    failure = bad.find("failure").text
    assert f"engine: skipped: {ENGINE_REASON}" in failure
    assert "witness torch: failed" in failure and "witness engine" not in failure


def test_markdown_report_lists_only_failing_witnesses_as_problems():
    md = render(_results(), "markdown")
    problems = md.split("<details>")[0]
    assert "| torch |" in problems and "| engine |" not in problems
    rows = [line for line in md.splitlines() if "<code>good</code>" in line]
    assert rows and "| skipped |" in rows[-1]
    assert md.count(ENGINE_REASON) == 1          # once per reason, not once per run


def test_annotations_leave_skipped_witnesses_out():
    (line,) = github_annotations(_results())
    assert "bad" in line and "engine" not in line and "torch" in line


def test_to_numpy_takes_anything_a_witness_or_an_op_returns():
    from gradcheck.checking.opcheck import loader as op

    assert op.to_numpy is dtypes.to_numpy               # one helper, not a copy
    assert dtypes.to_numpy(None) is None
    bf = torch.tensor([1.5, -3.0], dtype=torch.bfloat16)
    out = dtypes.to_numpy(bf)
    assert out.dtype == np.float64 and out.tolist() == [1.5, -3.0]
    e = engine.Tensor(np.array([0.25, 2.0], dtype=np.float32))
    out = dtypes.to_numpy(e)
    assert out.dtype == np.float64 and out.tolist() == [0.25, 2.0]
    a = np.array([1, 2], dtype=np.float32)
    out = dtypes.to_numpy(a)
    assert out.dtype == np.float64 and out.tolist() == [1.0, 2.0] and out is not a
    assert dtypes.to_numpy(3).shape == () and dtypes.to_numpy(3) == 3.0
