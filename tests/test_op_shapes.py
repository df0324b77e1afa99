"""op.shapes follows PyTorch's contract for what a custom Function's backward returns.

Each rule is held against real autograd: the same Function is run through
``Function.apply`` and ``backward``, and op.shapes must note exactly what autograd
accepts (it sums an expandable gradient back, drops trailing Nones, discards a gradient
for an input that needs none, casts a dtype, takes None as zero) and fail exactly what
autograd rejects; ``strict_shapes`` fails the notes too. Then the bundled examples, the
report, the case-file key, ``--strict-shapes`` and ``check_op``.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from gradcheck.cases import case_from_dict, load_cases
from gradcheck.cli.main import main
from gradcheck.base.errors import CaseFileError
from gradcheck.checking.opcheck import OpCheck, _exact
from gradcheck.checking.opcheck.shapes import shapes
from gradcheck.checking.opcheck.process import OpProcess
from gradcheck.checking.case import run_case
from gradcheck.session.runner import run
from gradcheck.sampling.points import sample
from gradcheck.testing import check_op
from conftest import skipped_saying_why  # noqa: E402

OPS = Path(__file__).resolve().parent.parent / "cases" / "ops" / "ops.toml"


def function(forward, backward, name):
    return type(name, (torch.autograd.Function,),
                {"forward": staticmethod(forward), "backward": staticmethod(backward)})


def add(ctx, x, b):
    return x + b


def double(ctx, x):
    return 2 * x


def scaled(ctx, x, g, eps=1e-6):     # a non-tensor argument with a default
    return x * g + eps


X, B = {"shape": [4, 5]}, {"shape": [5]}
FROZEN_B = {"shape": [5], "requires_grad": False}

#: name -> (forward, backward, reference, inputs, args, what op.shapes says: "note",
#: "contract" (a note on PyTorch's documented contract: trailing Nones, a sum back over
#: broadcast axes, which reports leave to -v), "fail" or "clean"). Whether autograd accepts is not written here: the test asks it.
CONTRACT = {
    "bias grad with the batch axis": (
        add, lambda ctx, g: (g, g), "x + b", {"x": X, "b": B}, [], "contract"),
    "bias grad with a kept axis of one": (
        add, lambda ctx, g: (g, g.sum(0, keepdim=True)), "x + b", {"x": X, "b": B}, [],
        "contract"),
    "bias grad with an extra leading axis": (
        add, lambda ctx, g: (g, g[None]), "x + b", {"x": X, "b": B}, [], "contract"),
    "batched linear, W grad per batch element": (
        lambda ctx, x, W: x @ W,
        lambda ctx, g: (g @ torch.ones(5, 3, dtype=g.dtype),
                        torch.ones(2, 3, 5, dtype=g.dtype)),
        "x @ W", {"x": {"shape": [2, 4, 3]}, "W": {"shape": [3, 5]}}, [], "contract"),
    "bias grad that does not broadcast from b": (
        add, lambda ctx, g: (g, g[:, :1]), "x + b", {"x": X, "b": B}, [], "fail"),
    "bias grad too short": (
        add, lambda ctx, g: (g, g[0, :2]), "x + b", {"x": X, "b": B}, [], "fail"),
    "bias grad a scalar": (
        add, lambda ctx, g: (g, g.sum()), "x + b", {"x": X, "b": B}, [], "fail"),
    "trailing None for a defaulted argument": (
        scaled, lambda ctx, g: (g, g, None), "x * g + 0.000001",
        {"x": {"shape": [3]}, "g": {"shape": [3]}}, [], "contract"),
    "two trailing Nones": (
        double, lambda ctx, g: (2 * g, None, None), "2 * x", {"x": {"shape": [3]}}, [],
        "contract"),
    "an extra gradient that is not None": (
        double, lambda ctx, g: (2 * g, g), "2 * x", {"x": {"shape": [3]}}, [], "fail"),
    "too few gradients": (
        add, lambda ctx, g: g, "x + b", {"x": X, "b": B}, [], "fail"),
    "None for a passed non-tensor argument": (
        scaled, lambda ctx, g: (g, g, None), "x * g + 0.00001",
        {"x": {"shape": [3]}, "g": {"shape": [3]}}, [1e-5], "clean"),
    "a gradient for a non-tensor argument": (
        scaled, lambda ctx, g: (g, g, g), "x * g + 0.00001",
        {"x": {"shape": [3]}, "g": {"shape": [3]}}, [1e-5], "fail"),
    "a gradient for an input that needs none": (
        add, lambda ctx, g: (g, g.sum(0)), "x + b", {"x": X, "b": FROZEN_B}, [], "note"),
    "a misshapen gradient for an input that needs none": (
        add, lambda ctx, g: (g, g[:, :2]), "x + b", {"x": X, "b": FROZEN_B}, [], "note"),
    "None for an input that needs a gradient": (
        add, lambda ctx, g: (g, None), "x + b", {"x": X, "b": B}, [], "note"),
    "a float32 gradient for a float64 input": (
        double, lambda ctx, g: (2 * g).float(), "2 * x", {"x": {"shape": [3]}}, [],
        "note"),
    "an integer gradient": (
        double, lambda ctx, g: (2 * g).round().long(), "2 * x", {"x": {"shape": [3]}},
        [], "note"),
    "a complex gradient for a real input": (
        double, lambda ctx, g: (2 * g).to(torch.complex128), "2 * x",
        {"x": {"shape": [3]}}, [], "fail"),
    "a gradient on another device": (
        double, lambda ctx, g: torch.empty(3, dtype=g.dtype, device="meta"), "2 * x",
        {"x": {"shape": [3]}}, [], "fail"),
}


def case_of(name, strict=False):
    forward, backward, reference, inputs, args, _ = CONTRACT[name]
    op = function(forward, backward, "Op")
    case = case_from_dict({"name": name, "op": "gradcheck:check_op", "reference": reference,
                           "inputs": inputs, "args": args, "strict_shapes": strict},
                          file="<test>")
    return dataclasses.replace(case, op=op), op


def autograd_accepts(case, op) -> bool:
    """Real autograd on the same Function: apply, then backward."""
    xs = [torch.randn(s.shape, dtype=torch.float64, requires_grad=s.requires_grad)
          for s in case.inputs]
    y = op.apply(*xs, *case.args)
    try:
        y.backward(torch.ones_like(y))
    except RuntimeError:
        return False
    return True


def shapes_verdict(case):
    """What op.shapes alone says at one point: (verdict, problems, notes), the contract
    notes after the others among the notes."""
    with OpProcess(case, "float64") as op:
        check = OpCheck(case, "float64", {}, op)
        point = sample(case, "float64", 0).values
        _, leaves = op.forward(point)
        vs = check.vs(0, 0)
        check.record("shapes", shapes(op.raw_backward(vs), op.info, case, leaves,
                                      _exact(check.refs, point, vs).grads, "float64"))
    tally, notes = check.tallies["shapes"], check.notes["shapes"]
    verdict = ("fail" if tally.mismatched else "note" if notes else
               "contract" if tally.contract_notes else "clean")
    return verdict, tally.problems, [*notes, *tally.contract_notes]


@pytest.mark.parametrize("name", list(CONTRACT))
def test_shapes_notes_what_autograd_accepts_and_fails_what_it_rejects(name):
    case, op = case_of(name)
    verdict, problems, notes = shapes_verdict(case)
    assert verdict == CONTRACT[name][-1], (problems, notes)
    assert autograd_accepts(case, op) == (verdict != "fail"), (problems, notes)
    if verdict == "fail":
        assert all("autograd rejects" in p or "neither a tensor" in p for p in problems)


@pytest.mark.parametrize("name", [n for n, c in CONTRACT.items() if c[-1] == "note"])
def test_strict_shapes_fails_what_autograd_accepts_but_changes(name):
    case, op = case_of(name, strict=True)
    verdict, problems, notes = shapes_verdict(case)
    assert verdict == "fail" and not notes
    # the same text as the note, without what autograd does about it
    loose, _ = case_of(name)
    assert {n.split(": autograd")[0] for n in shapes_verdict(loose)[2]} <= set(problems)


def test_strict_shapes_keeps_a_clean_return_clean():
    case, _ = case_of("None for a passed non-tensor argument", strict=True)
    assert shapes_verdict(case)[0] == "clean"


def test_notes_name_what_autograd_does():
    notes = {n: shapes_verdict(case_of(n)[0])[2] for n, c in CONTRACT.items()
             if c[-1] in ("note", "contract")}
    assert notes["bias grad with the batch axis"] == [
        "Op.backward returned a gradient of shape [4, 5] for b of shape [5]: autograd "
        "sums it back to [5] over the broadcast axes"]
    assert notes["two trailing Nones"] == [
        "Op.backward returned 3 gradients; forward was given 1 arguments: autograd drops "
        "the trailing Nones"]
    assert notes["a gradient for an input that needs none"] == [
        "Op.backward returned a gradient for b, which needs none (ctx.needs_input_grad is "
        "False there): autograd discards it unchecked"]
    assert notes["a float32 gradient for a float64 input"] == [
        "Op.backward returned a torch.float32 gradient for x of dtype torch.float64: "
        "autograd casts it to torch.float64"]


# --------------------------------------------------------------------------- bundled ops

BUNDLED_NOTES = {
    "linear-bias-not-summed": "gradient of shape [4, 5] for b of shape [5]: autograd sums",
    "bias-tanh": "gradient of shape [4, 5] for b of shape [5]: autograd sums",
    "batched-linear": "gradient of shape [2, 3, 5] for W of shape [3, 5]: autograd sums",
    "rms-norm-default-eps": "returned 3 gradients; forward was given 2 arguments: "
                            "autograd drops the trailing None",
    "weighted-square-both-grads": "a gradient for w, which needs none",
}


@pytest.fixture(scope="module")
def bundled():
    cases = {c.name: c for c in load_cases(OPS)}
    cache: dict = {}
    names = [*BUNDLED_NOTES, "linear-bias-not-summed-strict"]
    return cases, {(n, d): run_case(cases[n], d, cache=cache, timeout=None)
                   for n in names for d in cases[n].dtypes}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", list(BUNDLED_NOTES))
def test_bundled_ops_right_by_autograd_pass_with_their_note(bundled, name, dtype):
    cases, results = bundled
    assert cases[name].expect == "pass" and not cases[name].strict_shapes
    result = results[name, dtype]
    assert result.status == "passed", result.message
    # (a path the op does not support, forward mode or vmap, skipped saying why)
    assert all(w.status == "passed" or skipped_saying_why(w) for w in result.witnesses)
    shapes = result.witness("op.shapes")
    # PyTorch's contract (a sum back over broadcast axes, trailing Nones): a contract
    # note, which the reports leave to -v; a gradient for an input that needs none: a note
    contract = name != "weighted-square-both-grads"
    said = shapes.contract_notes if contract else shapes.notes
    assert len(said) == 1 and BUNDLED_NOTES[name] in said[0]
    assert not (shapes.notes if contract else shapes.contract_notes)
    # the runner gathers witness notes, each kind apart
    assert result.notes == shapes.notes and result.contract_notes == shapes.contract_notes
    key = "contract_notes" if contract else "notes"
    assert result.to_dict()[key] == list(said)
    assert result.to_dict()["witnesses"]["op.shapes"][key] == list(said)
    assert type(result).from_dict(result.to_dict()).to_dict() == result.to_dict()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_the_strict_twin_fails_the_same_op(bundled, dtype):
    cases, results = bundled
    case = cases["linear-bias-not-summed-strict"]
    assert case.strict_shapes and case.expect == "fail"
    result = results["linear-bias-not-summed-strict", dtype]
    assert result.status == "passed" and result.message.startswith("caught as expected")
    shapes = result.witness("op.shapes")
    assert shapes.status == "failed" and not shapes.notes
    assert shapes.message == ("LinearBiasNotSummed.backward returned a gradient of shape "
                              "[4, 5] for b of shape [5]")
    assert "broadcasting not summed back (sum over axis 0)" in shapes.diagnosis
    assert result.witness("op.backward").status == "passed"   # autograd summed it back
    plain = run_case(dataclasses.replace(case, expect="pass"), dtype, timeout=None)
    assert plain.status == "failed"


def test_each_bundled_op_is_accepted_by_autograd():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bundled_myops", OPS.parent / "myops.py")
    myops = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(myops)
    cases = {c.name: c for c in load_cases(OPS)}
    for name in BUNDLED_NOTES:
        assert autograd_accepts(cases[name], getattr(myops, cases[name].op.split(":")[1]))


# --------------------------------------------------------------------------- the switches

def test_strict_shapes_key_must_be_a_boolean_of_an_op_case():
    base = {"name": "c", "op": "m:F", "reference": "x", "inputs": {"x": {"shape": [2]}}}
    with pytest.raises(CaseFileError, match="strict_shapes must be true or false"):
        case_from_dict({**base, "strict_shapes": "yes"}, file="<t>")
    with pytest.raises(CaseFileError, match="strict_shapes only apply to a case with op"):
        case_from_dict({"name": "c", "expr": "sum(x)", "inputs": {"x": {"shape": [2]}},
                        "strict_shapes": True}, file="<t>")
    assert not case_from_dict(base, file="<t>").strict_shapes


def test_run_with_strict_shapes_fails_the_noted_op():
    loose = run([OPS], keyword="linear-bias-not-summed", dtype="float64", timeout=None)
    strict = run([OPS], keyword="linear-bias-not-summed", dtype="float64", timeout=None,
                 strict_shapes=True)
    assert {c.name: c.status for c in loose.cases} == {
        "linear-bias-not-summed": "passed", "linear-bias-not-summed-strict": "passed"}
    assert {c.name: c.status for c in strict.cases} == {
        "linear-bias-not-summed": "failed", "linear-bias-not-summed-strict": "passed"}


def test_cli_strict_shapes_flag_and_the_text_report_note(capsys):
    args = ["run", str(OPS), "-k", "bias-tanh", "--dtype", "float64"]
    said = ("BiasTanh.backward returned a gradient of shape [4, 5] for b of shape [5]: "
            "autograd sums it back to [5] over the broadcast axes")
    assert main([*args, "-v"]) == 0
    out = " ".join(capsys.readouterr().out.split())   # (lines broken at the width)
    assert f"contract note: {said}" in out
    assert main(args) == 0                  # PyTorch's contract: news to no one
    assert "BiasTanh.backward returned" not in capsys.readouterr().out
    assert main([*args, "--strict-shapes", "--format", "json"]) == 1
    report = json.loads(capsys.readouterr().out)
    (case,) = report["cases"]
    assert case["status"] == "failed" and case["witnesses"]["op.shapes"]["status"] == \
        "failed"


def test_check_op_takes_strict_shapes():
    op = function(add, lambda ctx, g: (g, g), "BiasAdd")
    inputs = {"x": [4, 5], "b": [5]}
    loose = check_op(op, "x + b", inputs)
    assert loose.status == "passed" and loose.contract_notes
    strict = check_op(op, "x + b", inputs, strict_shapes=True)
    assert strict.status == "failed"
    assert strict.witness("op.shapes").message == (
        "BiasAdd.backward returned a gradient of shape [4, 5] for b of shape [5]")
    np.testing.assert_equal(loose.witness("op.backward").status, "passed")
