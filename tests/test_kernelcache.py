"""The disk cache of compiled reference kernels (gradcheck.kernelcache) and the formula
text it is keyed by (gradcheck.tree.canonical): a hit computes what the built kernel
computes and skips SymPy; a corrupt entry, an unwritable folder, a changed source or
--no-cache never serve a wrong kernel or fail a run."""

from __future__ import annotations

import gc as garbage
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import make_case
from gradcheck import kernelcache
from gradcheck.cli import main
from gradcheck.expr import parse
from gradcheck.tree import Node, canonical

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
def cache(tmp_path, monkeypatch) -> Path:
    """A fresh, enabled cache folder, and no kernel of this process remembered."""
    where = tmp_path / "cache"
    monkeypatch.setenv("GRADCHECK_CACHE_DIR", str(where))
    monkeypatch.delenv("GRADCHECK_NO_CACHE", raising=False)
    kernelcache._loaded.clear()
    return where


def forget() -> None:
    """Drop this process's kernels: the next build reads the disk."""
    kernelcache._loaded.clear()
    garbage.collect()


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
def test_a_hit_computes_what_the_built_kernel_computes(cache, expr, extra):
    from gradcheck.reference import Reference

    before = counts()
    built = everything(Reference(case_of(expr, extra)), np.random.default_rng(0))
    assert delta(before) == {"misses": 4, "written": 4}   # main, second, magnitude, first
    forget()
    before = counts()
    ref = Reference(case_of(expr, extra))
    again = everything(ref, np.random.default_rng(0))
    assert delta(before) == {"hits": 4}
    assert len(kernelcache.entries()) == 4
    for a, b in zip(built, again, strict=True):
        np.testing.assert_array_equal(a, b)     # the same code: the same floats
    assert ref._kernel.__code__.co_filename.startswith("<lambdifygenerated-cached-")


def test_every_name_a_kernel_uses_resolves(cache):
    """Plain lambdify (SymPy's cse) over every name MODULES provides and NumPy's."""
    import sympy

    from gradcheck.reference.derivatives import MODULES

    x, y = sympy.symbols("_x _y", real=True)
    exprs = [sympy.tanh(x) * sympy.erf(y), sympy.Piecewise((x, x > y), (y ** 2, True)),
             sympy.Heaviside(x - y), sympy.sign(x) * sympy.Max(x, y), sympy.pi + sympy.E,
             sympy.sqrt(sympy.Abs(y)) + sympy.log(1 + x ** 2) + sympy.atan2(x, y)]

    def build():
        return sympy.lambdify([x, y], exprs, modules=MODULES, cse=True)

    a, b = np.linspace(-2, 2, 9), np.linspace(1.5, -2.5, 9)
    first = kernelcache.cached_lambdify("test names", build, modules=MODULES)(a, b)
    forget()
    before = counts()
    second = kernelcache.cached_lambdify("test names", build, modules=MODULES)(a, b)
    assert delta(before) == {"hits": 1}
    for p, q in zip(first, second, strict=True):
        np.testing.assert_array_equal(p, q)


def test_a_hit_does_no_sympy_work(cache, monkeypatch):
    from gradcheck.reference import Reference
    from gradcheck.reference import elementwise
    from gradcheck.reference.adjoint import Program

    expr, extra = FORMULAS[2]
    built = everything(Reference(case_of(expr, extra)), np.random.default_rng(1))
    forget()

    def refuse(*args, **kwargs):
        raise AssertionError("SymPy work on a cache hit")

    monkeypatch.setattr(Program, "gradient", refuse)
    monkeypatch.setattr(Program, "lambdify", refuse)
    monkeypatch.setattr(elementwise, "lower", refuse)
    monkeypatch.setattr(elementwise.ElementwiseReference, "_second_derivatives", refuse)
    again = everything(Reference(case_of(expr, extra)), np.random.default_rng(1))
    for a, b in zip(built, again, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("damage", ["truncated", "not json", "edited source", "bytes",
                                    "wrong name", "no function"])
def test_a_corrupt_entry_is_rebuilt(cache, damage):
    from gradcheck.reference import Reference

    expr, extra = FORMULAS[0]
    built = everything(Reference(case_of(expr, extra)), np.random.default_rng(2))
    for path in kernelcache.entries():
        text = path.read_text()
        entry = json.loads(text)
        if damage == "truncated":
            path.write_text(text[: len(text) // 2])
        elif damage == "not json":
            path.write_text("[1, 2")
        elif damage == "edited source":     # the checksum no longer matches
            path.write_text(json.dumps(dict(entry, source=entry["source"] + "\nx = 1\n")))
        elif damage == "bytes":
            path.write_bytes(b"\xff\xfe\x00garbage")
        elif damage == "wrong name":
            path.write_text(json.dumps(dict(entry, name="0" * 64)))
        else:
            source = "def f():\n    return 1\n"
            path.write_text(json.dumps(dict(entry, source=source, sha256=hashlib.sha256(
                source.encode()).hexdigest())))
    forget()
    before = counts()
    again = everything(Reference(case_of(expr, extra)), np.random.default_rng(2))
    assert delta(before) == {"misses": 4, "written": 4}
    for a, b in zip(built, again, strict=True):
        np.testing.assert_array_equal(a, b)
    for path in kernelcache.entries():      # overwritten whole
        assert json.loads(path.read_text())["format"] == kernelcache.FORMAT


def test_an_unwritable_folder_does_not_fail(tmp_path, monkeypatch):
    from gradcheck.reference import Reference

    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("GRADCHECK_CACHE_DIR", str(blocker / "cache"))   # cannot exist
    monkeypatch.delenv("GRADCHECK_NO_CACHE", raising=False)
    forget()
    before = counts()
    everything(Reference(case_of(*FORMULAS[1])), np.random.default_rng(3))
    assert delta(before) == {"misses": 4}
    assert kernelcache.entries() == []
    read_only = tmp_path / "read-only"
    read_only.mkdir()
    read_only.chmod(0o555)      # (root writes there anyway: then it is simply a cache)
    try:
        monkeypatch.setenv("GRADCHECK_CACHE_DIR", str(read_only))
        forget()
        everything(Reference(case_of(*FORMULAS[3])), np.random.default_rng(3))
    finally:
        read_only.chmod(0o755)


def test_no_cache_reads_and_writes_nothing(cache, monkeypatch, tmp_path, capsys):
    from gradcheck.reference import Reference

    monkeypatch.setenv("GRADCHECK_NO_CACHE", "1")
    before = counts()
    Reference(case_of(*FORMULAS[0]))
    assert delta(before) == {"uncached": 1}
    monkeypatch.delenv("GRADCHECK_NO_CACHE")
    cases = tmp_path / "c.toml"
    cases.write_text('[[case]]\nname = "t"\nexpr = "sum(tanh(x) * x)"\n'
                     'inputs.x = { shape = [3] }\npoints = 2\n')
    assert main(["run", str(cases), "--no-cache", "--witness", "numeric"]) == 0
    assert kernelcache.entries() == [] and not cache.exists()
    assert "GRADCHECK_NO_CACHE" not in os.environ        # restored after the run
    assert main(["run", str(cases), "--witness", "numeric"]) == 0
    assert kernelcache.entries()
    capsys.readouterr()


def test_a_changed_source_digest_misses(cache, monkeypatch):
    from gradcheck.reference import Reference

    Reference(case_of(*FORMULAS[0]))
    first = set(kernelcache.entries())
    forget()
    monkeypatch.setattr(kernelcache, "source_digest", lambda: "another gradcheck")
    before = counts()
    Reference(case_of(*FORMULAS[0]))
    assert delta(before) == {"misses": 1, "written": 1}
    assert first < set(kernelcache.entries())


def test_the_digest_covers_the_code_that_decides_a_kernel():
    """The rules and the reference, and the printer and namespaces a kernel is compiled
    and run with (kernelnames): a change to any of them serves no old kernel."""
    files = {str(p.relative_to(kernelcache._PACKAGE)) for pattern in kernelcache.SOURCES
             for p in kernelcache._PACKAGE.glob(pattern)}
    assert {"kernelnames.py", "kernelcache.py", "lowering.py", "tree.py",
            "reference/adjoint.py", "reference/derivatives.py", "rules/table.py"} <= files


def test_a_patched_meaning_is_never_cached(cache, monkeypatch):
    import dataclasses

    import sympy

    from gradcheck.reference import Reference
    from gradcheck.rules import RULES

    monkeypatch.setitem(RULES, "tanh", dataclasses.replace(
        RULES["tanh"], sympy=lambda x: sympy.tanh(x) * 2))
    before = counts()
    Reference(case_of(*FORMULAS[0]))
    assert delta(before) == {"uncached": 1}
    assert kernelcache.entries() == []


def test_the_cache_command_shows_and_clears(cache, capsys):
    import sympy

    kernelcache.cached_lambdify("cmd", lambda: sympy.lambdify([], 1, modules=["numpy"]),
                                modules=["numpy"])
    (cache / "kernels" / "keep.txt").write_text("not ours")
    assert main(["cache"]) == 0
    out = capsys.readouterr().out
    assert str(cache) in out and "1 kernels" in out
    assert main(["cache", "--clear"]) == 0
    assert "removed 1 cached kernels" in capsys.readouterr().out
    assert kernelcache.entries() == [] and (cache / "kernels" / "keep.txt").exists()


def test_a_rerun_of_the_cli_reuses_the_entries(tmp_path):
    cases = tmp_path / "c.toml"
    cases.write_text('[defaults]\npoints = 2\n'
                     '[[case]]\nname = "a"\nexpr = "sum(tanh(x) * erf(x))"\n'
                     'inputs.x = { shape = [5] }\n'
                     '[[case]]\nname = "b"\nexpr = "sum(where(x > 0, x, exp(x) - 1))"\n'
                     'inputs.x = { shape = [5] }\n')
    env = dict(os.environ, GRADCHECK_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("GRADCHECK_NO_CACHE", None)

    def run() -> dict:
        proc = subprocess.run([sys.executable, "-m", "gradcheck", "run", str(cases),
                               "--format", "json"], cwd=ROOT, env=env, text=True,
                              capture_output=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        report = json.loads(proc.stdout)
        return without_seconds(report)

    first = run()
    stored = {p: p.stat().st_ino for p in kernelcache.entries(tmp_path / "cache")}
    assert stored
    assert run() == first
    # nothing rebuilt: the same files, never replaced (a rewrite is a new inode)
    assert {p: p.stat().st_ino for p in kernelcache.entries(tmp_path / "cache")} == stored


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
