"""gradcheck.doctor on real torch training setups: the gallery in
examples/doctor_gallery.py (one broken setup per finding kind, three healthy models),
the evidence each finding gives, assert_healthy, and ``gradcheck doctor``."""

from __future__ import annotations

import importlib.util
import json
import re
import warnings
from pathlib import Path

import pytest
import torch

import gradcheck
from gradcheck.cli.main import main
from gradcheck.health import KINDS, doctor
from gradcheck.health.factory import FactoryError, setup

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location(
    "doctor_gallery", ROOT / "examples" / "doctor_gallery.py")
gallery = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gallery)


def diagnose(made: dict, **override):
    made = {**made, **override}
    with warnings.catch_warnings():   # F.mse_loss warns about the broadcast it does
        warnings.simplefilter("ignore", UserWarning)
        return doctor(made["model"], made["loss_fn"], *made["batch"],
                      optimizer=made.get("optimizer"), train_step=made.get("train_step"),
                      frozen=made.get("frozen", ()))


def by_kind(report, kind):
    return [f for f in report.findings if f.kind == kind]


@pytest.mark.parametrize("factory", list(gallery.EXPECTED), ids=lambda f: f.__name__)
def test_gallery_reports_exactly_its_kinds(factory):
    report = diagnose(factory())
    assert set(report.kinds()) == gallery.EXPECTED[factory]
    assert report.healthy == (not gallery.EXPECTED[factory])
    for f in report.findings:
        assert f.kind in KINDS and f.name and f.message and f.fix


def test_every_kind_has_a_broken_setup():
    assert set().union(*gallery.EXPECTED.values()) == set(KINDS)


@pytest.mark.parametrize("factory, names, cause", [
    (gallery.cut_by_detach, {"0.weight", "0.bias"}, ".detach()"),
    (gallery.cut_by_numpy, {"0.weight", "0.bias"}, "a NumPy round trip"),
    (gallery.cut_by_no_grad, {"0.weight", "0.bias"}, "torch.no_grad()"),
    (gallery.cut_by_data, {"0.weight", "0.bias"}, ".data"),
], ids=["detach", "numpy", "no_grad", "data"])
def test_param_no_grad_names_the_cut(factory, names, cause):
    found = by_kind(diagnose(factory()), "param-no-grad")
    assert {f.name for f in found} == names
    assert all(f"cut from the graph by {cause}" in f.message for f in found)
    assert all("doctor_gallery.py:" in f.message for f in found)   # the user's line


@pytest.mark.parametrize("first, cause", [
    (lambda m, x: torch.from_numpy(m[1](m[0](x)).detach().cpu().double().numpy()).float(),
     "a NumPy round trip"),
    (lambda m, x: gallery._inference_stage(m, x).clone(), "torch.inference_mode()"),
], ids=["numpy-by-way-of-cpu", "inference_mode"])
def test_cut_named_through_the_calls_around_it(first, cause):
    found = by_kind(diagnose(gallery._two_stage(first)), "param-no-grad")
    assert {f.name for f in found} == {"0.weight", "0.bias"}
    assert all(f"cut from the graph by {cause}" in f.message for f in found)


def test_item_cut_and_unused_are_told_apart():
    found = {f.name: f for f in by_kind(diagnose(gallery.cut_by_item_and_unused()),
                                        "param-no-grad")}
    assert set(found) == {"scale", "unused.weight", "unused.bias"}
    assert ".item()" in found["scale"].message and "in Scaled" in found["scale"].message
    assert "unused" in found["unused.weight"].message
    assert found["unused.weight"].shape == (1, 4)


def test_no_graph_says_where_the_graph_was_cut():
    (f,) = diagnose(gallery.no_graph()).findings
    assert (f.kind, f.name) == ("no-graph", "loss")
    assert "does not have a grad_fn" in f.message and "cut by .detach()" in f.message


def test_no_graph_for_a_loss_that_is_a_float():
    made = gallery.healthy_mlp()
    (f,) = diagnose(made, loss_fn=lambda m, x, y: gallery.mse(m, x, y).item(),
                    train_step=None).findings
    assert f.kind == "no-graph" and "float, not a tensor" in f.message
    assert "cut by .item()" in f.message


def test_no_graph_when_nothing_requires_grad():
    made = gallery.healthy_mlp()
    made["model"].requires_grad_(False)
    (f,) = diagnose(made, optimizer=None, train_step=None).findings
    assert f.kind == "no-graph" and "no parameter has requires_grad=True" in f.message


def test_non_finite_forward_names_the_first_op():
    (f,) = diagnose(gallery.non_finite_forward()).findings
    assert f.name == "loss_fn:log" and f.shape == (8, 1)
    assert "the loss is NaN: first produced by log in loss_fn" in f.message


def test_non_finite_gradient_names_the_backward_op():
    found = diagnose(gallery.non_finite_gradient()).findings
    assert {f.name for f in found} == {"0.weight", "0.bias", "2.weight", "2.bias"}
    assert all("backward of sqrt" in f.message for f in found)


def test_non_finite_in_a_module_is_named_by_its_path():
    class Bad(torch.nn.Module):
        def forward(self, x):
            return torch.exp(x * 1000.0)   # inf
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), Bad(), torch.nn.Linear(4, 1))
    x, y = gallery._data()
    found = diagnose({"model": model, "loss_fn": gallery.mse, "batch": (x, y)}).findings
    assert [(f.kind, f.name) for f in found] == [("non-finite", "1:exp")]


def test_loss_broadcast_gives_both_shapes():
    for factory in (gallery.loss_broadcast, gallery.mse_loss_broadcast):
        (f,) = diagnose(factory()).findings
        assert f.shape == (8, 8) and "[8, 1] and [8]" in f.message


def test_a_broadcast_off_the_loss_path_is_no_finding():
    def loss_fn(m, x, y):
        (m(x) - y.squeeze(1)).sum()   # made, then thrown away
        return gallery.mse(m, x, y)
    assert diagnose(gallery.healthy_mlp(), loss_fn=loss_fn).healthy


def test_explicit_pairwise_broadcast_is_no_finding():
    def loss_fn(m, x, y):   # every pair of rows, singleton axes written out
        h = m[0](x)
        return ((h[:, None, :] - h[None, :, :]) ** 2).mean() + gallery.mse(m, x, y)
    assert diagnose(gallery.healthy_mlp(), loss_fn=loss_fn).healthy


def test_frozen_embedding_is_a_finding_unless_declared():
    made = gallery.healthy_transformer()
    found = diagnose(made, frozen=()).findings
    assert [(f.kind, f.name) for f in found] == [("param-frozen", "embed.weight")]
    assert diagnose(made, frozen=["embed.weight"]).healthy


def test_grad_zero_names_the_dead_layer():
    names = {f.name for f in diagnose(gallery.grad_zero()).findings}
    assert {"0.weight", "0.bias"} <= names and "2.bias" not in names


def test_doctor_leaves_weights_grads_and_optimizer_as_they_were():
    made = gallery.healthy_transformer()
    model = made["model"]
    made["train_step"](model, *made["batch"])   # the optimizer holds state now
    weights = {n: p.detach().clone() for n, p in model.named_parameters()}
    grads = {n: None if p.grad is None else p.grad.clone()
             for n, p in model.named_parameters()}
    steps = [s["step"].item() for s in made["optimizer"].state.values()]
    rng = torch.get_rng_state()
    assert diagnose(made).healthy
    assert torch.equal(torch.get_rng_state(), rng)
    for n, p in model.named_parameters():
        assert torch.equal(p, weights[n])
        assert (p.grad is None) == (grads[n] is None)
        assert p.grad is None or torch.equal(p.grad, grads[n])
    assert [s["step"].item() for s in made["optimizer"].state.values()] == steps


def test_assert_healthy():
    made = gallery.healthy_cnn()
    gradcheck.assert_healthy(made["model"], made["loss_fn"], *made["batch"],
                             optimizer=made["optimizer"])
    made = gallery.param_frozen()
    with pytest.raises(AssertionError, match="param-frozen: 0.weight"):
        gradcheck.assert_healthy(made["model"], made["loss_fn"], *made["batch"],
                                 optimizer=made["optimizer"])


def test_exported_lazily():
    assert gradcheck.doctor is doctor
    assert gradcheck.DoctorReport is type(doctor(*_tiny()))


def _tiny():
    model = torch.nn.Linear(2, 1)
    return model, lambda m, x: m(x).sum(), torch.ones(3, 2)


def test_cli_json(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        code = main(["doctor", "examples.doctor_gallery:loss_broadcast",
                     "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1
    (f,) = out["findings"]
    assert set(f) == {"kind", "name", "shape", "message", "fix"}
    assert (f["kind"], f["shape"]) == ("loss-broadcast", [8, 8])
    assert main(["doctor", "examples.doctor_gallery:healthy_mlp"]) == 0
    assert capsys.readouterr().out == "healthy: no findings\n"


def test_cli_refuses_a_module_outside_the_project(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    assert main(["doctor", "os:getcwd"]) == 2
    assert "refused" in capsys.readouterr().err
    with pytest.raises(FactoryError, match="no function defined"):
        setup("examples.doctor_gallery:EXPECTED")
    with pytest.raises(FactoryError, match="raised TypeError"):
        setup("examples.doctor_gallery:mse")


def test_the_documented_output_is_the_commands_real_output(monkeypatch, capsys):
    readme = (ROOT / "docs" / "doctor.md").read_text()
    (block,) = re.findall(r"```console\n\$ gradcheck doctor (\S+)\n(.*?)```", readme, re.S)
    monkeypatch.chdir(ROOT)
    assert main(["doctor", block[0]]) == 1
    assert capsys.readouterr().out == block[1]


def test_a_loss_that_is_no_scalar_is_refused():
    model, _, x = _tiny()
    with pytest.raises(ValueError, match="scalar loss"):
        doctor(model, lambda m, x: m(x), x)


def test_nan_in_the_data_is_one_finding():
    made = gallery.healthy_mlp()
    x, y = made["batch"]
    x[2, 1] = float("nan")
    found = diagnose(made, train_step=None).findings
    assert [(f.kind, f.name) for f in found] == [("non-finite", "batch[0]")]
