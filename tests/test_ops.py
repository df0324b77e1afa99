"""Custom ops: the bundled examples (cases/ops) pass, each deliberately wrong op is caught
with its own diagnosis, and the ways an op can break the run (import failure, an
exception, the wrong number of gradients, an absent device, nondeterminism, a wrong
double backward) give the right status."""

from __future__ import annotations

import dataclasses
import itertools
import re
import textwrap
from pathlib import Path

import pytest
import torch

from gradcheck.cases import load_cases
from gradcheck.checking.opcheck import OpCheck
from gradcheck.checking.opcheck.process import OpProcess
from gradcheck.checking.case import run_case
from gradcheck.session.runner import run
from conftest import skipped_saying_why  # noqa: E402

OPS = Path(__file__).resolve().parent.parent / "cases" / "ops" / "ops.toml"
CASES = {c.name: c for c in load_cases(OPS)}
CORRECT = [n for n, c in CASES.items() if c.expect == "pass"]
DTYPES = ("float64", "float32")

#: wrong op -> (the check that fails, a phrase only its diagnosis holds)
WRONG = {
    "swish-sign-flipped": ("backward", "has its sign flipped"),
    "half-square-factor-2": ("backward", "is 2 times the exact gradient"),
    "row-sum-squares-mean": ("backward", "is 1/5 of the exact gradient (5 = the size of "
                                         "axis 1 of x): mean instead of sum?"),
    "mul-swapped": ("backward", "x.grad and y.grad are swapped"),
    "linear-transposed-W": ("backward", "W.grad is the transpose of the exact gradient"),
    "linear-bias-not-summed-strict": ("shapes", "broadcasting not summed back (sum over "
                                                "axis 0)"),
    "tanh-ignores-grad-output": ("backward", "x.grad ignores grad_output"),
    "leaky-relu-wrong-branch": ("backward", "elements right): a wrong branch of a "
                                            "piecewise?"),
    "cube-loop-off-by-one": ("backward", "only x.grad[15] is wrong, at every point: an "
                                         "off-by-one?"),
    "erf-rounded-constant": ("backward", "x.grad is 0.14% off everywhere (obtained/exact "
                                         "≈ 1.00144): an approximation or a wrong constant?"),
    "tanh-overflow": ("backward", "where the exact gradient is finite"),
    "log-cosh-guard": ("backward", "x.grad is wrong where |x| > 20 and right elsewhere"),
    "square-accumulating-buffer": ("backward", "x.grad is right on the first backward and "
                                               "wrong on repeats"),
    "sincos-one-cotangent": ("backward", "x.grad: the Jacobian is right (every one-hot v) "
                                         "but vᵀJ is wrong when several outputs have "
                                         "non-zero cotangents: cross terms?"),
}
#: what identifies each kind of diagnosis (regular expressions), to tell one from another
KINDS = (r"sign flipped", r"\d times the exact gradient", r"\d of the exact gradient",
         r"are swapped", r"was returned for", r"transpose of", r"broadcasting not summed",
         r"ignores grad_output", r"is right at", r"is zero but", r"wrong branch",
         r"off-by-one", r"% off everywhere", r"gradient is finite", r"and right elsewhere",
         r"wrong on repeats", r"cross terms")


def _vmap_unsupported(w) -> bool:
    """A path the op does not support skipped, saying why: op.vmap for an old-style
    Function, op.jvp for a Function without jvp or an engine op."""
    return skipped_saying_why(w)


def kinds(text: str) -> set[str]:
    return {k for k in KINDS if re.search(k, text)}


@pytest.fixture(scope="module")
def bundled():
    """Every bundled op case in both dtypes, run once: {(name, dtype): CaseResult}."""
    cache: dict = {}
    return {(n, d): run_case(CASES[n], d, cache=cache, timeout=None)
            for n in CASES for d in CASES[n].dtypes}


def test_every_bundled_case_runs_in_both_dtypes():
    assert set(WRONG) | {"swish-no-double-backward"} == {
        n for n, c in CASES.items() if c.expect == "fail"}
    assert all(c.dtypes == DTYPES for c in CASES.values())
    kinds = {c.op for c in CASES.values()}
    assert {"myops:EngineSoftplus", "myops:log_softmax", "myops:SinCos"} <= kinds


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", CORRECT)
def test_correct_op_passes_without_diagnosis(bundled, name, dtype):
    result = bundled[name, dtype]
    assert result.status == "passed", result.message
    # (op.vmap skipped, saying why, for a Function without vmap support)
    assert result.witnesses and all(w.status == "passed" or _vmap_unsupported(w)
                                    for w in result.witnesses)
    assert not any(w.diagnosis for w in result.witnesses)
    # Asked anyway, the diagnosis finds nothing wrong (no false alarm).
    with OpProcess(CASES[name], dtype) as op:
        check = OpCheck(CASES[name], dtype, {}, op)
        check.run()
    assert check.samples and check.diagnosis() == ""


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(WRONG))
def test_wrong_op_is_caught_with_its_own_diagnosis(bundled, name, dtype):
    check, phrase = WRONG[name]
    result = bundled[name, dtype]
    assert result.status == "passed" and result.message.startswith("caught as expected")
    failed = result.witness(f"op.{check}")
    assert failed.status == "failed"
    assert phrase in failed.diagnosis
    own = kinds(phrase)
    assert len(own) == 1
    for w in result.witnesses:  # no other kind of diagnosis, on any check
        assert kinds(w.diagnosis) <= own, w.diagnosis
    assert f"({failed.diagnosis})" in result.message
    # Without expect = "fail", the same op fails the case.
    plain = run_case(dataclasses.replace(CASES[name], expect="pass"), dtype, timeout=None)
    assert plain.status == "failed"


def test_broadcast_bias_is_summed_by_autograd_and_caught_by_strict_shapes(bundled):
    # Right by PyTorch's contract: a note (tests/test_op_shapes.py); strict: a failure.
    # (PyTorch's contract: a contract note, which the reports show with -v)
    assert bundled["linear-bias-not-summed", "float64"].witness("op.shapes").contract_notes
    result = bundled["linear-bias-not-summed-strict", "float64"]
    assert result.witness("op.backward").status == "passed"  # autograd summed it back
    shapes = result.witness("op.shapes")
    assert shapes.message == ("LinearBiasNotSummed.backward returned a gradient of shape "
                              "[4, 5] for b of shape [5]")


def test_wrong_branch_names_the_fraction_of_right_elements(bundled):
    diagnosis = bundled["leaky-relu-wrong-branch", "float64"].witness("op.backward").diagnosis
    assert re.search(r"^x.grad is wrong where x <= 0 and right where x > 0 \(\d+ of \d+ "
                     r"elements right\): a wrong branch of a piecewise\?$", diagnosis), diagnosis


@pytest.mark.parametrize("dtype", DTYPES)
def test_overflow_names_the_inputs_beyond_which_it_happens(bundled, dtype):
    diagnosis = bundled["tanh-overflow", dtype].witness("op.backward").diagnosis
    assert re.search(r"^x.grad is NaN at \d+ elements where the exact gradient is finite "
                     r"\(at \d+ of \d+ points, where x > \d+\): overflow\?$", diagnosis), diagnosis


def test_diagnoses_number_points_as_points(bundled):
    # 2 cotangents at each point: no diagnosis names a sample index as a point
    for (name, _), result in bundled.items():
        points = CASES[name].points + getattr(CASES[name], "extreme_points", 0)
        for w in result.witnesses:
            for n in re.findall(r"at point (\d+)", w.diagnosis or ""):
                assert int(n) < points, (name, w.diagnosis)
            for _, total in re.findall(r"(\d+) of (\d+) points", w.diagnosis or ""):
                assert int(total) <= points, (name, w.diagnosis)


@pytest.mark.parametrize("dtype", DTYPES)
def test_double_backward(bundled, dtype):
    good = bundled["swish-double-backward", dtype]
    assert good.status == "passed" and good.witness("op.double").status == "passed"
    assert good.witness("op.double").checked > 0
    bad = bundled["swish-no-double-backward", dtype]
    # (its backward calls Swish.backward with its own ctx, which Dynamo cannot trace:
    # under torch.compile it raises, and op.compile fails it too, naming the path)
    assert [w.witness for w in bad.witnesses if w.status == "failed"] == ["op.double",
                                                                          "op.compile"]
    assert bad.witness("op.compile").message.startswith(
        "under torch.compile (backend aot_eager), the op raised ")


def test_bundled_folder_run_is_clean():
    result = run([OPS.parent], timeout=None)
    assert result.summary["failed"] == result.summary["errored"] == 0
    assert result.summary["xpassed"] == 0           # every wrong op caught
    bundled = [c for f in sorted(OPS.parent.glob("*.toml")) for c in load_cases(f)]
    # approximations.toml's three approximations are approximate in float64 (exit 0)
    assert result.summary["approximate"] == 3
    assert result.summary["xfailed"] == sum(len(c.dtypes) for c in bundled
                                            if c.expect == "fail")
    assert (result.summary["passed"] + result.summary["approximate"]
            + result.summary["xfailed"] == sum(len(c.dtypes) for c in bundled))


# --------------------------------------------------------------------------- ops that break

_counter = itertools.count()


def run_ops(tmp_path: Path, source: str, cases: str, **options):
    """Write ``source`` as a fresh module and ``cases`` (``{mod}`` for its name) as a
    case file next to it; run the file (``options``: gradcheck.run's)."""
    module = f"user_ops_{next(_counter)}_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text("import torch\n\n" + textwrap.dedent(source))
    path = tmp_path / "cases.toml"
    path.write_text(textwrap.dedent(cases).replace("{mod}", module))
    return {c.name: c for c in run([path], timeout=None, **options).cases}


GOOD = """
class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 2

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g
"""


def test_an_op_that_cannot_be_imported_is_a_case_error_and_the_run_goes_on(tmp_path):
    results = run_ops(tmp_path, GOOD, """
        [[case]]
        name = "missing-module"
        op = "no_such_module_here:Op"
        reference = "x ** 2"
        inputs.x = { shape = [3] }

        [[case]]
        name = "missing-attribute"
        op = "{mod}:NoSuchOp"
        reference = "x ** 2"
        inputs.x = { shape = [3] }

        [[case]]
        name = "fine"
        op = "{mod}:Square"
        reference = "x ** 2"
        inputs.x = { shape = [3] }
    """, allow_op_modules=["no_such_*"])
    # no file of the project: imported only because a pattern allows it, and missing
    missing = results["missing-module"]
    assert missing.status == "error" and missing.error_kind == "case"
    assert "cannot import op 'no_such_module_here:Op'" in missing.message
    assert "ModuleNotFoundError" in missing.message
    attribute = results["missing-attribute"]
    assert attribute.status == "error" and ":NoSuchOp'" in attribute.message
    assert "AttributeError" in attribute.message
    assert results["fine"].status == "passed"


def test_an_op_that_raises_is_its_failure(tmp_path):
    results = run_ops(tmp_path, """
        class Broken(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                raise ValueError("kernel not compiled for this shape")

            @staticmethod
            def backward(ctx, g):
                return g


        class BrokenBackward(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 1

            @staticmethod
            def backward(ctx, g):
                raise RuntimeError("out of shared memory")
    """, """
        [[case]]
        name = "forward-raises"
        op = "{mod}:Broken"
        reference = "x"
        inputs.x = { shape = [3] }

        [[case]]
        name = "backward-raises"
        op = "{mod}:BrokenBackward"
        reference = "x"
        inputs.x = { shape = [3] }
        expect = "fail"
    """)
    forward = results["forward-raises"]
    assert forward.status == "failed" and forward.error_kind == "op raised"
    assert "the op raised ValueError: kernel not compiled for this shape" in forward.message
    backward = results["backward-raises"]  # a raise is the op's failure: caught
    assert backward.status == "passed" and backward.error_kind == "op raised"
    assert backward.message.startswith("caught as expected: the op raised RuntimeError")
    assert "out of shared memory" in backward.message


def test_wrong_number_of_gradients_names_the_function(tmp_path):
    results = run_ops(tmp_path, """
        class TooMany(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return 2 * x

            @staticmethod
            def backward(ctx, g):
                return 2 * g, g


        class TooFew(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, y):
                return x * y

            @staticmethod
            def backward(ctx, g):
                return g


        class ExtraNone(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return 2 * x

            @staticmethod
            def backward(ctx, g):
                return 2 * g, None


        import gradcheck.engine as engine


        class EngineTooMany(engine.Function):
            @staticmethod
            def forward(ctx, x):
                return 2 * x

            @staticmethod
            def backward(ctx, g):
                return 2 * g, g
    """, """
        [[case]]
        name = "too-many"
        op = "{mod}:TooMany"
        reference = "2 * x"
        inputs.x = { shape = [3] }

        [[case]]
        name = "too-few"
        op = "{mod}:TooFew"
        reference = "x * y"
        inputs.x = { shape = [3] }
        inputs.y = { shape = [3] }

        [[case]]
        name = "extra-none"
        op = "{mod}:ExtraNone"
        reference = "2 * x"
        inputs.x = { shape = [3] }

        [[case]]
        name = "engine-too-many"
        op = "{mod}:EngineTooMany"
        reference = "2 * x"
        inputs.x = { shape = [3] }
    """)
    for name, function in [("too-many", "TooManyBackward"), ("too-few", "TooFewBackward"),
                           ("engine-too-many", "EngineTooManyBackward")]:
        r = results[name]
        assert r.status == "failed" and r.error_kind == "op raised", name
        assert f"function {function} returned an incorrect number of gradients" in r.message
    # PyTorch accepts a trailing None (it drops it): op.shapes notes it, no failure.
    extra = results["extra-none"]
    assert extra.status == "passed"
    assert extra.witness("op.shapes").contract_notes == (
        "ExtraNone.backward returned 2 gradients; forward was given 1 arguments: "
        "autograd drops the trailing None",)


def test_gradient_for_an_input_that_needs_none(tmp_path):
    results = run_ops(tmp_path, """
        class AlwaysBoth(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, w):
                ctx.save_for_backward(x, w)
                return w * x

            @staticmethod
            def backward(ctx, g):
                x, w = ctx.saved_tensors
                return w * g, x * g
    """, """
        [[case]]
        name = "both"
        op = "{mod}:AlwaysBoth"
        reference = "w * x"
        inputs.x = { shape = [3] }
        inputs.w = { shape = [3], requires_grad = false }
    """)
    # PyTorch discards it: op.shapes notes it, and fails it only under strict_shapes.
    both = results["both"]
    assert both.status == "passed"
    assert "AlwaysBoth.backward returned a gradient for w, which needs none" in \
        both.witness("op.shapes").notes[0]
    strict = run_case(dataclasses.replace(load_cases(tmp_path / "cases.toml")[0],
                                          strict_shapes=True), "float64", timeout=None)
    assert strict.status == "failed"
    assert "AlwaysBoth.backward returned a gradient for w, which needs none" in \
        strict.witness("op.shapes").message
    assert strict.witness("op.backward").status == "passed"


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")
def test_cuda_case_without_a_gpu_is_skipped(tmp_path):
    results = run_ops(tmp_path, GOOD, """
        [[case]]
        name = "on-gpu"
        op = "{mod}:Square"
        reference = "x ** 2"
        inputs.x = { shape = [3] }
        device = "cuda"
        dtype = ["float64", "float32"]

        [[case]]
        name = "wrong-on-gpu"
        op = "{mod}:Square"
        reference = "x ** 3"
        inputs.x = { shape = [3] }
        device = "cuda"
        expect = "fail"
    """)
    for r in results.values():
        assert r.status == "skipped", r
        assert "cuda" in r.message.lower() and "no" in r.message.lower()
    summary = run([tmp_path / "cases.toml"], timeout=None).summary
    assert summary["skipped"] == 3 and summary["failed"] == summary["errored"] == 0


NOISY = """
class NoisySquare(torch.autograd.Function):
    \"\"\"A backward with a nondeterministic reduction order, modelled as noise of a few
    units of rounding (what a changed summation order makes).\"\"\"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 2

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g * (1 + 4e-16 * torch.randn_like(x))
"""


def test_nondeterministic_backward_and_nondet_tol(tmp_path):
    results = run_ops(tmp_path, NOISY, """
        [[case]]
        name = "strict"
        op = "{mod}:NoisySquare"
        reference = "x ** 2"
        inputs.x = { shape = [8] }

        [[case]]
        name = "tolerant"
        op = "{mod}:NoisySquare"
        reference = "x ** 2"
        inputs.x = { shape = [8] }
        nondet_tol = 1e-9
    """)
    strict = results["strict"]
    assert strict.status == "failed"
    assert [w.witness for w in strict.witnesses if w.status == "failed"] == ["op.determinism"]
    tolerant = results["tolerant"]
    assert tolerant.status == "passed", tolerant.message
    assert tolerant.witness("op.determinism").checked > 0


# --------------------------------------------------------------------------- outcomes

def test_tally_records_comparisons_and_findings():
    """The op checks hand their tallies outcomes; a Tally counts them as before."""
    import numpy as np

    from gradcheck.checking.compare import Comparison, Finding, Tally

    t = Tally("op.inplace", "float64")
    t.record([Finding(checked=3), Finding(checked=2, problem="forward modified input x")])
    t.record([Comparison({"out0": np.array([1.0, 2.0])}, {"out0": np.array([1.0, 3.0])},
                         0, hint="state kept?")])
    r = t.result()
    assert (r.status, r.checked, r.mismatched) == ("failed", 7, 2)
    assert r.message == "forward modified input x"      # the hint: only when nothing else
    alone = Tally("op.inplace", "float64")
    alone.record([Comparison({"out0": np.array([1.0])}, {"out0": np.array([2.0])}, 0,
                             hint="state kept?")])
    assert alone.result().message == "state kept?"
    noted = Tally("op.shapes", "float64")
    noted.record([Finding(checked=1, note="a note"), Finding(note="a note")])
    r = noted.result()
    assert r.status == "passed" and r.notes == ("a note",) and r.diagnosis == ""
    failed = Tally("op.shapes", "float64")
    failed.record([Finding(checked=1, problem="rejected", diagnosis="is the transpose")])
    assert failed.result().diagnosis == "is the transpose"


def test_op_checks_are_functions_returning_outcomes():
    import numpy as np

    from gradcheck.checking.compare import Comparison
    from gradcheck.checking.opcheck import checks

    spec = dataclasses.make_dataclass("Spec", [("shape", tuple)])((2,))
    (c,) = checks.zero({"x": np.array([0.0, np.nan]), "w": None},
                       {"x": np.ones(2), "w": None}, {"x": spec, "w": spec}, 4)
    assert isinstance(c, Comparison) and c.point == 4
    assert c.expected["w.grad"] is None          # no gradient due: None must stay None
    np.testing.assert_array_equal(c.expected["x.grad"], np.zeros(2))
    (d,) = checks.determinism({"x": np.ones(2)}, {"x": np.zeros(2)}, 1)
    np.testing.assert_array_equal(d.expected["x.grad"], np.ones(2))   # the first call
    np.testing.assert_array_equal(d.obtained["x.grad"], np.zeros(2))


@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16"])
@pytest.mark.parametrize("name", ["linear", "sincos", "log-softmax", "weighted-square"])
def test_jacobian_tolerances_in_one_pass_are_the_per_v_ones(name, dtype):
    """op.jacobian's tolerances for all one-hot cotangents at once (OpTolerance.many)
    are, element for element, those of each cotangent on its own."""
    import numpy as np

    from gradcheck.checking.opcheck.exact import exact, grad_quantities, one_hots, references
    from gradcheck.checking.opcheck.tolerances import OpTolerance
    from gradcheck.sampling.points import case_points

    case = CASES[name]
    refs = references(case, {})
    point = next(iter(case_points(case, dtype))).values
    rows = [vs for _, _, vs in one_hots(case.outputs)]
    exacts = [grad_quantities(exact(refs, point, vs).grads) for vs in rows]
    tolerance = OpTolerance(case, dtype)
    tolerance.start_point()
    together = tolerance.many(point, rows, exacts)
    assert len(together) == len(rows)
    for vs, want, got in zip(rows, exacts, together):
        alone = OpTolerance(case, dtype)(point, vs, want)   # fresh: nothing kept
        assert set(got) == set(alone)
        for q, t in alone.items():
            np.testing.assert_allclose(got[q], t, rtol=1e-13, atol=0, err_msg=q)


@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16"])
@pytest.mark.parametrize("name", ["linear", "sincos", "log-softmax", "weighted-square"])
def test_tolerances_kept_for_no_more_cotangents_are_each_rows_own(name, dtype):
    """OpTolerance.many(keep=False), for an op whose Jacobian is not checked, takes the
    rows one at a time: bit for bit each row's own tolerances, and nothing of the point
    is kept after (neither the model's forward pass nor the peer's graph)."""
    import numpy as np

    from gradcheck.checking.opcheck.exact import exact, grad_quantities, references
    from gradcheck.checking.opcheck.tolerances import OpTolerance
    from gradcheck.sampling.points import case_points

    case = CASES[name]
    refs = references(case, {})
    point = next(iter(case_points(case, dtype))).values
    rng = np.random.default_rng(0)
    rows = [[rng.standard_normal(n.shape) for n in case.outputs] for _ in range(2)]
    exacts = [grad_quantities(exact(refs, point, vs).grads) for vs in rows]
    tolerance = OpTolerance(case, dtype)
    tolerance.start_point()
    apart = tolerance.many(point, rows, exacts, keep=False)
    assert tolerance.at_point == {}
    for vs, want, got in zip(rows, exacts, apart):
        alone = OpTolerance(case, dtype)(point, vs, want)
        assert set(got) == set(alone)
        for q, t in alone.items():
            np.testing.assert_array_equal(got[q], t, err_msg=q)


@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16"])
@pytest.mark.parametrize("name", ["linear", "sincos", "log-softmax", "weighted-square"])
def test_the_peer_of_all_rows_in_one_pass_is_each_rows_own(name, dtype):
    """The peer (torch's autograd of the reference formula) of all one-hot cotangents,
    in one batched backward pass, is bit for bit what a backward pass per row gives."""
    import numpy as np

    from gradcheck.checking.opcheck.exact import one_hots
    from gradcheck.checking.opcheck.tolerances import OpTolerance
    from gradcheck.sampling.points import case_points

    case = CASES[name]
    point = next(iter(case_points(case, dtype))).values
    rows = [vs for _, _, vs in one_hots(case.outputs)]
    tolerance = OpTolerance(case, dtype)
    tolerance.start_point()
    stacked = [np.stack([vs[k] for vs in rows]) for k in range(len(case.outputs))]
    together = tolerance.peer(point, stacked, rows=len(rows))
    assert together is not None   # batched: no fallback to a pass per row
    for j, vs in enumerate(rows):
        alone = tolerance.peer(point, vs)
        assert set(together) == set(alone)
        for q, want in alone.items():
            np.testing.assert_array_equal(together[q][j], want, err_msg=q)


def test_tolerances_without_a_batched_peer_are_taken_row_by_row(monkeypatch):
    """Where torch cannot batch the peer's backward (an operation without a vmap rule),
    OpTolerance.many takes it a row at a time, to the same tolerances."""
    import numpy as np
    import torch

    from gradcheck.checking.opcheck.exact import exact, grad_quantities, one_hots, references
    from gradcheck.checking.opcheck.tolerances import OpTolerance
    from gradcheck.sampling.points import case_points

    case = CASES["log-softmax"]
    refs = references(case, {})
    point = next(iter(case_points(case, "float32"))).values
    rows = [vs for _, _, vs in one_hots(case.outputs)]
    exacts = [grad_quantities(exact(refs, point, vs).grads) for vs in rows]
    before = OpTolerance(case, "float32")
    before.start_point()
    want = before.many(point, rows, exacts)
    grad = torch.autograd.grad

    def unbatchable(*args, **kwargs):
        if kwargs.get("is_grads_batched"):
            raise RuntimeError("Batching rule not implemented")
        return grad(*args, **kwargs)

    monkeypatch.setattr(torch.autograd, "grad", unbatchable)
    after = OpTolerance(case, "float32")
    after.start_point()
    assert after.peer(point, [np.stack([vs[0] for vs in rows])], rows=len(rows)) is None
    got = after.many(point, rows, exacts)
    for g, w in zip(got, want):
        assert set(g) == set(w)
        for q in w:
            np.testing.assert_array_equal(g[q], w[q], err_msg=q)
