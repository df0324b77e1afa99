"""op.contract: a backward's contract with autograd beyond the contiguous grad_output,
every input requiring grad and separate tensors the other checks use. Real ops run
through gradcheck: the bundled right and wrong versions (cases/ops/contract.toml) in
float64 and float32, and ops written here (tmp_path) for what the bundled ones do not
show; the plan of subsets and pairs; ``skip_checks``."""

from __future__ import annotations

import itertools
import textwrap
from pathlib import Path

import pytest

from gradcheck.cases import load_cases
from gradcheck.checking.case import run_case
from gradcheck.checking.opcheck import CHECKS
from gradcheck.checking.opcheck.contract import plan, shared_pair, subsets
from gradcheck.session.runner import run

FILE = Path(__file__).resolve().parent.parent / "cases" / "ops" / "contract.toml"
CASES = {c.name: c for c in load_cases(FILE)}
DTYPES = ("float64", "float32")
#: the bundled cases run in bfloat16 too (the op runs in it on a CPU)
BUNDLED = DTYPES + ("bfloat16",)

#: wrong op -> (its right version, the check that catches it, phrases its message holds)
WRONG = {
    "flat-silu-view": ("flat-silu", "contract", [
        "with grad_output transposed (a transposed view), the op raised RuntimeError: "
        "view size is not compatible"]),
    "flat-silu-raw-grad": ("flat-silu", "contract", [
        "with grad_output strided (every other element of a longer buffer), its "
        "gradients are not those for a contiguous grad_output",
        "with grad_output transposed (a transposed view), its gradients are not",
        "with grad_output expanded (ones broadcast from one element, stride 0), the op "
        "raised RuntimeError"]),
    "scale-packed-grads": ("scale-needs-input-grad", "contract", [
        "with only w requiring grad (x not), its gradients are not those with every "
        "input requiring grad: w.grad (only w requiring grad) is None"]),
    "gram-same-counted-twice": ("gram", "contract", [
        "with a passed as both a and b (one tensor in both slots), its gradient is not "
        "the sum of a's and b's with two separate tensors of the same values",
        "worst a.grad (a as both a and b)"]),
    # wrong only for a non-contiguous input: op.layout catches it already
    # (its strided and transposed x are read wrong; its expanded one past its memory,
    # which the message says first)
    "row-scale-raw-input": ("row-scale", "layout", ["the op raised for expanded inputs"]),
    # right for strided and transposed inputs, wrong for a broadcast (stride-0) one
    "row-scale-last-stride": ("row-scale", "layout", [
        "the op raised for expanded inputs (x along axis 0, s along axis 0: one slice "
        "broadcast, stride 0) where it takes contiguous ones of the same values"]),
}


@pytest.fixture(scope="module")
def bundled():
    cache: dict = {}
    return {(n, d): run_case(CASES[n], d, cache=cache, timeout=None)
            for n in CASES for d in BUNDLED}


def test_contract_is_a_named_check_and_every_bundled_twin_is_listed():
    assert "contract" in CHECKS
    assert set(WRONG) == {n for n, c in CASES.items() if c.expect == "fail"}
    assert {r for r, _, _ in WRONG.values()} == {
        n for n, c in CASES.items() if c.expect == "pass"}


@pytest.mark.parametrize("dtype", BUNDLED)
@pytest.mark.parametrize("name", list(WRONG))
def test_wrong_op_is_caught_naming_the_path_and_its_right_version_passes(
        bundled, name, dtype):
    right, check, phrases = WRONG[name]
    good = bundled[right, dtype]
    assert good.status == "passed", good.message
    assert good.witness("op.contract").status == "passed"
    assert good.witness("op.contract").checked > 0
    result = bundled[name, dtype]
    assert result.status == "passed" and result.message.startswith("caught as expected")
    failed = result.witness(f"op.{check}")
    assert failed.status == "failed"
    for phrase in phrases:
        assert phrase in failed.message, failed.message
    # caught by that check alone: every other check passes the twin
    assert [w.witness for w in result.witnesses if w.status == "failed"] == [f"op.{check}"]


def test_subsets_and_the_shared_pair():
    assert subsets(["x"]) == []
    assert subsets(["x", "w"]) == [["x"], ["w"]]
    assert len(subsets(list("abcd"))) == 14              # 2**4 - 2: all but none and all
    five = subsets(list("abcde"))                       # each alone, all but each
    assert len(five) == 10 and ["a"] in five and list("bcde") in five
    assert shared_pair(CASES["gram"], ["a", "b"]) == ["a", "b"]
    # another shape, or another domain: one tensor's values would not fit both
    assert plan(CASES["scale-needs-input-grad"]) == {"layouts": ["strided", "transposed",
                                                                 "expanded"],
                                                     "subsets": [["x"], ["w"]],
                                                     "pair": None}


def test_skip_checks_switches_it_off():
    case = CASES["flat-silu-view"]
    skipped = load_cases(FILE)[[c.name for c in load_cases(FILE)].index(case.name)]
    object.__setattr__(skipped, "skip_checks", ("op.contract",))
    object.__setattr__(skipped, "expect", "pass")
    result = run_case(skipped, "float64", timeout=None)
    assert result.status == "passed", result.message
    assert "op.contract" not in [w.witness for w in result.witnesses]


_counter = itertools.count()


def run_ops(tmp_path: Path, source: str, cases: str) -> dict:
    module = f"contract_ops_{next(_counter)}_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text("import torch\n\n" + textwrap.dedent(source))
    path = tmp_path / "cases.toml"
    path.write_text(textwrap.dedent(cases).replace("{mod}", module))
    return {(c.name, c.dtype): c for c in run([path], timeout=None).cases}


OPS = """
class Mul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        return g * y, g * x


class MulAssertsBoth(Mul):
    @staticmethod
    def backward(ctx, g):
        assert all(ctx.needs_input_grad), "every input must require grad"
        x, y = ctx.saved_tensors
        return g * y, g * x


class MulJunkForUnneeded(Mul):
    # a gradient of the wrong shape for an input that needs none: autograd drops it
    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        return (g * y if ctx.needs_input_grad[0] else torch.zeros(7),
                g * x if ctx.needs_input_grad[1] else torch.zeros(7))
"""


def test_raising_on_a_subset_fails_and_junk_for_an_input_that_needs_none_passes(tmp_path):
    results = run_ops(tmp_path, OPS, "".join(f"""
        [[case]]
        name = "{name}"
        op = "{{mod}}:{op}"
        dtype = ["float64", "float32"]
        reference = "x * y"
        inputs.x = {{ shape = [2, 3] }}
        inputs.y = {{ shape = [2, 3], domain = [0.5, 1.5] }}
    """ for name, op in [("mul", "Mul"), ("asserts", "MulAssertsBoth"),
                         ("junk", "MulJunkForUnneeded")]))
    for dtype in DTYPES:
        assert results["mul", dtype].status == "passed"
        assert results["junk", dtype].status == "passed"    # what autograd keeps is right
        asserts = results["asserts", dtype]
        assert asserts.status == "failed"
        contract = asserts.witness("op.contract")
        assert contract.status == "failed"
        assert ("with only x requiring grad (y not), the op raised AssertionError: every "
                "input must require grad") in contract.message
        assert "with only y requiring grad (x not), the op raised" in contract.message
        assert [w.witness for w in asserts.witnesses if w.status == "failed"] == [
            "op.contract"]


def test_expanded_inputs_at_values_the_op_refuses_contiguous_too_are_a_note(tmp_path):
    """op.layout's expanded inputs repeat a slice's values: an op that refuses repeated
    values (here: ties) raises contiguous too, which says nothing of the layout."""
    results = run_ops(tmp_path, """
        def distinct_square(x):
            if torch.unique(x.detach()).numel() != x.numel():
                raise ValueError("ties are not supported")
            return x * x
        """, """
        [[case]]
        name = "distinct-square"
        op = "{mod}:distinct_square"
        reference = "x * x"
        dtype = ["float64"]
        inputs.x = { shape = [3, 4] }
        """)
    result = results["distinct-square", "float64"]
    assert result.status == "passed", result.message
    layout = result.witness("op.layout")
    assert layout.status == "passed" and layout.checked > 0
    assert any("expanded inputs (x along axis 0) not checked: the op raises at their "
               "values contiguous too: ValueError: ties are not supported" in n
               for n in layout.notes), layout.notes
