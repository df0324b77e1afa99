"""gradcheck explain: the graphs are PyTorch's own, the values are real, every .grad is
what PyTorch leaves (None with its reason for a non-retained intermediate)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from gradcheck.cli.main import main
from gradcheck.base.errors import CaseFileError
from gradcheck.explanation import explain, parse_inputs, parse_let
from gradcheck.report.explain import render_json, render_text

SHAPES = {"x": [2, 3], "W": [3, 2]}


def _torch_leaves(e):
    return {n: torch.tensor(a, dtype=torch.float64, requires_grad=True)
            for n, a in e.point.items()}


def _names(fn, seen=None) -> list[str]:
    """torch's graph walked here on its own: depth first, each node once."""
    seen = set() if seen is None else seen
    if fn is None or fn in seen:
        return []
    seen.add(fn)
    out = [type(fn).__name__]
    for child, _ in fn.next_functions:
        out += _names(child, seen)
    return out


def test_scalar_formula_graphs_formulas_and_grads():
    e = explain("sum(tanh(x @ W))", SHAPES)
    t = _torch_leaves(e)
    y = torch.tanh(t["x"] @ t["W"]).sum()
    assert [n.name for n in e.torch_graph] == _names(y.grad_fn) == [
        "SumBackward0", "TanhBackward0", "MmBackward0", "AccumulateGrad", "AccumulateGrad"]
    assert [n.name for n in e.engine_graph] == [n.name for n in e.torch_graph]
    mm = e.torch_graph[2]
    assert [e.torch_graph[i].of for i in mm.next] == ["x", "W"]
    assert mm.of == "x @ W" and mm.shape == (2, 2) and "a @ b" in mm.computes
    assert mm.vjp == "a.grad = ḡ @ bᵀ; b.grad = aᵀ @ ḡ"
    assert e.torch_graph[1].vjp == "x.grad = ḡ ⊙ (1 - tanh(x)**2)"
    assert e.torch_graph[3].computes == "adds the incoming gradient into x.grad"
    assert "Wᵀ" in e.formulas["x.grad"] and "xᵀ" in e.formulas["W.grad"]
    assert any("tanh(x @ W)**2" in s for s in e.shared)
    y.backward()
    grads = {g.name: g for g in e.grads}
    for name in ("x", "W"):
        np.testing.assert_allclose(grads[name].value, t[name].grad.numpy(), rtol=1e-12)
        assert grads[name].error < 1e-12
    assert np.isclose(float(e.value), y.item())
    assert grads["y"].value is None and "not a leaf" in grads["y"].why
    assert e.errors == {} and e.jacobian == {}


def test_non_retained_intermediate_is_none_with_torchs_reason():
    e = explain("sum(h * u)", {"x": [3]}, let={"h": "sin(x)", "u": "exp(x)"},
                retain=["h"])
    grads = {g.name: g for g in e.grads}
    t = torch.tensor(e.point["x"], dtype=torch.float64, requires_grad=True)
    # h.grad is ∂sum(h u)/∂h = u = exp(x), retained
    np.testing.assert_allclose(grads["h"].value, torch.exp(t).detach().numpy(), rtol=1e-12)
    assert grads["h"].retained and grads["h"].why == ""
    u = grads["u"]
    assert u.value is None and not u.retained
    assert "not retained (add --retain u)" in u.why
    assert "is not a leaf Tensor is being accessed" in u.why   # PyTorch's own warning
    text = render_text(e)
    assert "u.grad = None" in text and "--retain u" in text


def test_unused_let_is_never_computed():
    e = explain("sum(x)", {"x": [2]}, let={"h": "x * 2"})
    h = next(g for g in e.grads if g.name == "h")
    assert h.value is None and "never computed" in h.why


def test_vector_output_backward_v_and_jacobian():
    e = explain("tanh(x @ W)", SHAPES, gradient="random", seed=3)
    assert e.gradient == "random" and e.v.shape == (2, 2)
    assert e.errors["no_v"] == "grad can be implicitly created only for scalar outputs"
    assert "Mismatch in shape" in e.errors["wrong_shape"]
    assert any("vᵀJ" in s for s in e.backward)
    t = _torch_leaves(e)
    jac = torch.autograd.functional.jacobian(lambda x, W: torch.tanh(x @ W),
                                             (t["x"], t["W"]))
    grads = {g.name: g for g in e.grads}
    for name, j in zip(("x", "W"), jac):
        np.testing.assert_allclose(e.jacobian[name], j.reshape(4, 6).numpy(), atol=1e-12)
        # the .grad of backward(v) is vᵀJ
        np.testing.assert_allclose(e.v.ravel() @ e.jacobian[name],
                                   grads[name].value.ravel(), atol=1e-12)


def test_vector_default_v_is_ones_and_large_jacobian_is_not_shown():
    e = explain("x * 2", {"x": [65]})
    assert e.gradient == "ones" and np.all(e.v == 1)
    assert e.jacobian == {} and "at most 64" in e.jacobian_note
    np.testing.assert_allclose(e.grads[0].value, np.full(65, 2.0))


def test_json_shape():
    e = explain("tanh(h)", SHAPES, let={"h": "x @ W"})
    doc = json.loads(render_json(e))
    assert set(doc) == {"expr", "lets", "inputs", "output_shape", "gradient", "seed",
                        "point", "value", "v", "formulas", "backward", "graph", "grads",
                        "jacobian"}
    assert doc["lets"] == {"h": "x @ W"} and doc["inputs"]["W"] == [3, 2]
    node = doc["graph"]["torch"][0]
    assert set(node) == {"index", "name", "computes", "next_functions", "of", "shape",
                         "vjp"}
    assert node["name"] == "TanhBackward0" and node["next_functions"] == [1]
    assert [n["name"] for n in doc["graph"]["engine"]] == [
        n["name"] for n in doc["graph"]["torch"]]
    h = next(g for g in doc["grads"] if g["name"] == "h")
    assert h["value"] is None and "retain_grad" in h["why_none"]
    x = next(g for g in doc["grads"] if g["name"] == "x")
    assert np.array(x["value"]).shape == (2, 3) and x["why_none"] is None
    assert np.array(doc["jacobian"]["matrices"]["W"]).shape == (4, 6)


def test_parse_inputs_and_let():
    assert parse_inputs("x=[3], W=[3,2],s=[]") == {"x": [3], "W": [3, 2], "s": []}
    assert parse_let(["h=x == 1"]) == {"h": "x == 1"}
    for bad in ("x=3", "x=[3],,", ""):
        with pytest.raises(CaseFileError):
            parse_inputs(bad)
    with pytest.raises(CaseFileError):
        parse_let(["2h=x"])


def test_cli_text_and_usage_error(capsys):
    assert main(["explain", "sum(sin(x))", "--inputs", "x=[2]"]) == 0
    out = capsys.readouterr().out
    assert "SinBackward0" in out and "x.grad = ḡ ⊙ (cos(x))" in out
    assert main(["explain", "sum(x", "--inputs", "x=[2]"]) == 2
    assert main(["explain", "sum(x)", "--inputs", "x=2"]) == 2
    assert "NAME=[D1,D2,...]" in capsys.readouterr().err
    assert main(["explain", "x * 2", "--inputs", "x=[2]", "--gradient", "[1, 3]"]) == 0
    assert "x.grad = [2., 6.]" in capsys.readouterr().out
    assert main(["explain", "x * 2", "--inputs", "x=[2]", "--gradient", "[1, 2, 3]"]) == 2
    assert "gradient has shape [3] but expr has shape [2]" in capsys.readouterr().err


def test_cli_json_in_a_subprocess():
    done = subprocess.run(
        [sys.executable, "-m", "gradcheck", "explain", "tanh(h)", "--inputs",
         "x=[2,3],W=[3,2]", "--let", "h=x @ W", "--retain", "h", "--gradient", "ones",
         "--format", "json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert [n["name"] for n in doc["graph"]["torch"]] == [
        "TanhBackward0", "MmBackward0", "AccumulateGrad", "AccumulateGrad"]
    h = next(g for g in doc["grads"] if g["name"] == "h")
    assert h["retained"] and np.array(h["value"]).shape == (2, 2)


def test_the_documented_examples_are_the_real_output(capsys):
    import re
    import shlex
    from pathlib import Path

    readme = (Path(__file__).parent.parent / "docs" / "explain.md").read_text()
    blocks = re.findall(r"```console\n\$ (gradcheck explain .*?)\n(.*?)```", readme, re.S)
    assert len(blocks) >= 2
    # (the last bits of torch's float64 rounding are the BLAS's: not compared)
    rounding = re.compile(r"max \|torch - exact\| = [0-9.e+-]+")
    for command, shown in blocks:
        assert main(shlex.split(command)[1:]) == 0
        got = capsys.readouterr().out
        assert rounding.sub("", got) == rounding.sub("", shown), command


def test_a_row_torch_records_as_several_nodes_and_the_package_function():
    import gradcheck

    gradcheck.explain("sum(x)", {"x": [2]})   # the module's import must not shadow it
    e = gradcheck.explain("sum(a @ W)", {"a": [2, 2, 3], "W": [3, 2]})
    t = _torch_leaves(e)
    y = (t["a"] @ t["W"]).sum()
    assert [n.name for n in e.torch_graph] == _names(y.grad_fn)
    assert [n.name for n in e.engine_graph] == [n.name for n in e.torch_graph]
    mm = next(n for n in e.torch_graph if n.name == "MmBackward0")
    assert mm.of == "(part of a @ W)" and mm.shape is None


def test_given_v():
    e = explain("x * 2", {"x": np.arange(3.0)}, gradient=[1, 2, 3])
    assert e.gradient == "given"
    np.testing.assert_array_equal(e.grads[0].value, [2.0, 4.0, 6.0])
    np.testing.assert_array_equal(e.jacobian["x"], 2 * np.eye(3))


def test_too_large_is_refused_before_anything_runs():
    with pytest.raises(CaseFileError, match="1,000,000 elements"):
        explain("sum(x)", {"x": [1001, 1000]})


def test_graphs_that_differ_are_shown_one_after_the_other():
    import dataclasses

    e = explain("sum(sin(x))", {"x": [2]})
    other = dataclasses.replace(e, engine_graph=e.engine_graph[1:])
    text = render_text(other)
    assert "  #   torch " in text and "  #   engine " in text
    assert "  #   torch           engine " not in text
    assert "  #   torch           engine " in render_text(e)


def test_an_infinite_gradient_that_torch_and_the_reference_share_differs_by_nothing():
    e = explain("sum(sqrt(x))", {"x": np.array([0.0, 1.0])})
    assert e.grads[0].value[0] == np.inf and e.grads[0].error == 0.0
    doc = json.loads(render_json(e))   # strict JSON: no bare Infinity
    assert doc["grads"][0]["value"] == ["inf", 0.5]
