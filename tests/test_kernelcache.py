"""The memo of compiled reference kernels (gradcheck.reference.kernelcache) and the formula text it
is keyed by (gradcheck.formula.tree.canonical): a kernel compiled once in a process is reused
and computes what a fresh build computes; --no-cache compiles every kernel; nothing is
read from or written to the disk (the old cache folder's files are never run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import make_case
from gradcheck.reference import kernelcache
from gradcheck.cli.main import main
from gradcheck.formula.parser import parse
from gradcheck.formula.tree import Node, canonical

ROOT = Path(__file__).resolve().parents[1]

# tanh, erf (scipy.special), where (Piecewise: select), sign, relu and clamp
# (derivatives print Heaviside), maximum (functools' reduce), a retained let
FORMULAS = [
    ("sum(tanh(x) * y)", {}),
    ("erf(x) + sigmoid(y) * x", {}),
    ("sum(where(x > y, x * y, exp(-y)))", {}),
    ("sign(x) * abs(y) + relu(x) + clamp(y, min=-0.5)", {}),
    ("mean(maximum(x, y) + softplus(x))", {}),
    ("sum(h * h + log1p(h))", {"let": {"h": "tanh(x) * y"}, "retain_grad": ["h"]}),
]


@pytest.fixture
def memo(monkeypatch):
    """The memo on and empty."""
    monkeypatch.delenv("GRADCHECK_NO_CACHE", raising=False)
    kernelcache.clear()
    yield
    kernelcache.clear()


def counts() -> dict:
    return dict(kernelcache.STATS)


def delta(before: dict) -> dict:
    return {k: v - before[k] for k, v in kernelcache.STATS.items() if v != before[k]}


def case_of(expr: str, extra: dict):
    return make_case(expr, {"x": [4], "y": [4]}, **extra)


def everything(ref, rng) -> list[np.ndarray]:
    """Value, vᵀJ, hvp and |J|·|u| (every kernel of an elementwise reference)."""
    point = {"x": rng.uniform(-2, 2, 4), "y": rng.uniform(-2, 2, 4)}
    shape = ref.case.output.shape
    v = rng.normal(size=shape)
    u = {"x": rng.normal(size=4), "y": rng.normal(size=4)}
    e = ref.evaluate(point, v)
    out = [np.asarray(e.value)] + [e.grads[n] for n in sorted(e.grads)]
    out += [e.retained[n] for n in sorted(e.retained)]
    out += list(ref.hvp(point, v, u).values()) + list(ref.hvp(point, v, u, True).values())
    return out + [ref.jvp(point, u), ref.jvp(point, u, absolute=True)]


@pytest.mark.parametrize("expr, extra", FORMULAS, ids=[f for f, _ in FORMULAS])
def test_a_memoised_kernel_computes_what_a_fresh_build_computes(memo, expr, extra,
                                                                 monkeypatch):
    from gradcheck.reference import Reference

    monkeypatch.setenv("GRADCHECK_NO_CACHE", "1")
    built = everything(Reference(case_of(expr, extra)), np.random.default_rng(0))
    monkeypatch.delenv("GRADCHECK_NO_CACHE")
    before = counts()
    everything(Reference(case_of(expr, extra)), np.random.default_rng(0))
    assert delta(before) == {"misses": 4}   # main, second, magnitude, first
    before = counts()
    again = everything(Reference(case_of(expr, extra)), np.random.default_rng(0))
    assert delta(before) == {"memory": 4}
    for a, b in zip(built, again, strict=True):
        np.testing.assert_array_equal(a, b)     # the same code: the same floats


def test_a_memoised_kernel_does_no_sympy_work(memo, monkeypatch):
    from gradcheck.reference import Reference
    from gradcheck.reference import elementwise
    from gradcheck.reference.adjoint import Program

    expr, extra = FORMULAS[2]
    built = everything(Reference(case_of(expr, extra)), np.random.default_rng(1))

    def refuse(*args, **kwargs):
        raise AssertionError("SymPy work for a memoised kernel")

    monkeypatch.setattr(Program, "gradient", refuse)
    monkeypatch.setattr(Program, "lambdify", refuse)
    monkeypatch.setattr(elementwise, "lower", refuse)
    monkeypatch.setattr(elementwise.ElementwiseReference, "_second_derivatives", refuse)
    again = everything(Reference(case_of(expr, extra)), np.random.default_rng(1))
    for a, b in zip(built, again, strict=True):
        np.testing.assert_array_equal(a, b)


def test_different_modules_are_different_kernels(memo):
    built = []
    for modules in (["numpy"], [{"f": abs}, "numpy"]):
        built.append(kernelcache.cached_lambdify("same key", lambda: object(),
                                                 modules=modules))
    assert built[0] is not built[1]
    assert kernelcache.cached_lambdify("same key", lambda: None,
                                       modules=["numpy"]) is built[0]


def test_the_memo_keeps_the_most_recent_kernels(memo, monkeypatch):
    monkeypatch.setattr(kernelcache, "SIZE", 3)
    first = kernelcache.cached_lambdify("k0", object, modules=["numpy"])
    for k in range(1, 4):
        kernelcache.cached_lambdify(f"k{k}", object, modules=["numpy"])
    assert len(kernelcache._memo) == 3
    assert kernelcache.cached_lambdify("k0", object, modules=["numpy"]) is not first
    kept = kernelcache.cached_lambdify("k3", object, modules=["numpy"])
    assert kernelcache.cached_lambdify("k3", object, modules=["numpy"]) is kept


def test_no_cache_compiles_every_kernel_and_is_restored_after_the_run(
        memo, monkeypatch, tmp_path, capsys):
    from gradcheck.reference import Reference

    monkeypatch.setenv("GRADCHECK_NO_CACHE", "1")
    before = counts()
    Reference(case_of(*FORMULAS[0]))
    Reference(case_of(*FORMULAS[0]))
    assert delta(before) == {"uncached": 2}
    monkeypatch.delenv("GRADCHECK_NO_CACHE")
    cases = tmp_path / "c.toml"
    cases.write_text('[[case]]\nname = "t"\nexpr = "sum(tanh(x) * x)"\n'
                     'inputs.x = { shape = [3] }\npoints = 2\n')
    before = counts()
    assert main(["run", str(cases), "--no-cache", "--witness", "numeric"]) == 0
    assert set(delta(before)) == {"uncached"}
    assert "GRADCHECK_NO_CACHE" not in os.environ        # restored after the run
    before = counts()
    assert main(["run", str(cases), "--witness", "numeric"]) == 0
    assert "uncached" not in delta(before)
    capsys.readouterr()


def test_a_patched_meaning_is_never_memoised(memo, monkeypatch):
    import dataclasses

    import sympy

    from gradcheck.reference import Reference
    from gradcheck.rules import RULES

    monkeypatch.setitem(RULES, "tanh", dataclasses.replace(
        RULES["tanh"], sympy=lambda x: sympy.tanh(x) * 2))
    before = counts()
    Reference(case_of(*FORMULAS[0]))
    assert delta(before) == {"uncached": 1}
    assert not kernelcache._memo


def test_a_run_writes_nothing_to_the_old_cache_folder(tmp_path):
    """Neither GRADCHECK_CACHE_DIR nor XDG_CACHE_HOME gets a file from a run."""
    cases = tmp_path / "c.toml"
    cases.write_text('[[case]]\nname = "a"\nexpr = "sum(tanh(x) * erf(x))"\n'
                     'inputs.x = { shape = [5] }\npoints = 2\n')
    env = dict(os.environ, GRADCHECK_CACHE_DIR=str(tmp_path / "cache"),
               XDG_CACHE_HOME=str(tmp_path / "xdg"))
    env.pop("GRADCHECK_NO_CACHE", None)

    def run() -> dict:
        proc = subprocess.run([sys.executable, "-m", "gradcheck", "run", str(cases),
                               "--format", "json"], cwd=ROOT, env=env, text=True,
                              capture_output=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return without_seconds(json.loads(proc.stdout))

    assert run() == run()
    assert not (tmp_path / "cache").exists() and not (tmp_path / "xdg").exists()


def test_the_cache_command_names_and_removes_the_old_files(tmp_path, monkeypatch,
                                                          capsys):
    old = tmp_path / "cache"
    (old / "kernels").mkdir(parents=True)
    (old / "kernels" / ("0" * 64 + ".json")).write_text('{"source": "1/0"}')
    (old / "kernels" / "keep.txt").write_text("not ours")
    monkeypatch.setenv("GRADCHECK_CACHE_DIR", str(old))
    assert main(["cache"]) == 0
    out = capsys.readouterr().out
    assert str(old) in out and "1 files" in out and "never read" in out
    assert main(["cache", "--clear"]) == 0
    assert "removed 1 old cached kernels" in capsys.readouterr().out
    assert kernelcache.old_entries() == [] and (old / "kernels" / "keep.txt").exists()


def without_seconds(x):
    if isinstance(x, dict):
        return {k: without_seconds(v) for k, v in x.items() if k != "seconds"}
    if isinstance(x, list):
        return [without_seconds(v) for v in x]
    return x


# --------------------------------------------------------------------------- canonical

def test_canonical_names_the_computation_not_the_objects():
    def text(expr, **kw):
        return canonical(parse(expr, {"x": Node("input", shape=(3,), name="x"),
                                      "y": Node("input", shape=(3,), name="y")}), **kw)

    assert text("tanh(x) * y + 0.1") == text("tanh(x) * y + 0.1")
    distinct = ["tanh(x) * y + 0.1", "tanh(y) * x + 0.1", "tanh(x) * y + 0.10000001",
                "tanh(x) * y - 0.1", "clamp(x, min=0.5)", "clamp(x, min=0.25)",
                "clamp(x, max=0.5)", "sum(x, axis=0)", "sum(x, axis=0, keepdims=True)"]
    assert len({text(e) for e in distinct}) == len(distinct)
    x3, x4 = Node("input", shape=(3,), name="x"), Node("input", shape=(4,), name="x")
    assert canonical(parse("exp(x)", {"x": x3})) != canonical(parse("exp(x)", {"x": x4}))
    assert canonical(parse("exp(x)", {"x": x3}), shapes=False) == canonical(
        parse("exp(x)", {"x": x4}), shapes=False)


def test_canonical_is_linear_in_the_dag():
    node = Node("input", shape=(), name="x")
    for _ in range(200):       # 2**200 nodes as a tree
        node = Node("mul", (node, node))
    lines = canonical(node).splitlines()
    assert len(lines) == 201
    assert lines[-1] == "%200 = mul %199 %199 ()"


def test_canonical_stops_at_placeholders():
    x, w = Node("input", shape=(2, 3), name="x"), Node("input", shape=(3, 4), name="w")
    inner = parse("tanh(x @ w)", {"x": x, "w": w})
    a = parse("exp(h) * h", {"h": inner})
    b = parse("exp(h) * h", {"h": parse("sigmoid(x @ w)", {"x": x, "w": w})})
    assert canonical(a, {id(inner): "B0"}) == canonical(b, {id(b.args[1]): "B0"})
    assert "tanh" not in canonical(a, {id(inner): "B0"})
    assert "stop 'B0'" in canonical(a, {id(inner): "B0"})
