"""The namespace a compiled kernel runs in (gradcheck.reference.kernelnames): every name binds to
exactly what lambdify's own namespace for the same modules binds it to, the code is the
code lambdify prints for those modules, and a process imports SciPy only when one of its
kernels calls a SciPy function."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings

from gradcheck.reference import kernelnames
from gradcheck.cases import case_from_dict
from gradcheck.strategies import formulas

ROOT = Path(__file__).resolve().parents[1]


def _modules():
    from gradcheck.reference.derivatives import MODULES

    return MODULES


@pytest.mark.parametrize("which", ["MODULES", "scipy numpy", "numpy", "scipy"])
def test_every_name_binds_as_in_lambdifys_namespace(which):
    import sympy

    modules = {"MODULES": _modules(), "scipy numpy": ["scipy", "numpy"],
               "numpy": ["numpy"], "scipy": ["scipy"]}[which]
    full = sympy.lambdify([], 0, modules=modules).__globals__
    wrong = {name for name, value in full.items() if not name.startswith("__")
             and kernelnames.binding(name, modules, {}) is not value}
    assert not wrong


def test_the_scipy_shadows_are_the_numpy_names_scipy_rebinds():
    import sympy

    scipy = sympy.lambdify([], 0, modules=["scipy"]).__globals__
    numpy = sympy.lambdify([], 0, modules=["numpy"]).__globals__
    assert kernelnames.SCIPY_SHADOWS == {n for n, v in scipy.items()
                                         if n in numpy and numpy[n] is not v}
    # a name the printer imports from a module of its own is not one of SciPy's
    assert "reduce" not in scipy


def test_attributes_are_not_names():
    source = "def f(a):\n    return logical_and.reduce((a, tanh(a)))\n"
    scope: dict = {}
    exec(compile(source, "<t>", "exec"), {"logical_and": np.logical_and, "tanh": np.tanh},
         scope)
    assert kernelnames.code_names(scope["f"].__code__, source) == {"logical_and", "tanh"}
    assert kernelnames.code_names(scope["f"].__code__) == {"logical_and", "tanh", "reduce"}


def _expressions():
    import sympy
    from sympy.codegen.cfunctions import log1p

    x, y = sympy.symbols("_x _y", real=True)
    return [x, y], [
        sympy.tanh(x) * sympy.erf(y), sympy.Piecewise((x, x > y), (y ** 2, True)),
        sympy.Heaviside(x - y), sympy.sign(x) * sympy.Max(x, y, 0), sympy.pi + sympy.E,
        log1p(x ** 2) + sympy.gamma(y ** 2 + 1) + sympy.erfc(x),
        sympy.sqrt(sympy.Abs(y)) + sympy.atan2(x, y),
        sympy.Piecewise((x, sympy.And(x > 0, y < 1)), (y, True))]


def test_the_code_and_values_are_lambdifys():
    """SymPy's cse and printer for MODULES: the same source, the same floats, and
    each name of the kernel bound to the object lambdify's namespace binds it to."""
    import inspect

    import sympy

    args, exprs = _expressions()
    modules = _modules()
    plain = sympy.lambdify(args, exprs, modules=modules, cse=True)
    ours = kernelnames.lambdify(args, exprs, modules=modules, cse=True)
    assert inspect.getsource(ours) == inspect.getsource(plain)
    for name in kernelnames.code_names(ours.__code__, inspect.getsource(ours)):
        assert ours.__globals__[name] is plain.__globals__[name], name
    a, b = np.linspace(-2, 2, 9), np.linspace(1.5, -2.5, 9)
    for p, q in zip(plain(a, b), ours(a, b), strict=True):
        np.testing.assert_array_equal(p, q)


@settings(max_examples=25, suppress_health_check=list(HealthCheck), deadline=None,
          phases=[Phase.explicit, Phase.generate])
@given(formulas(depth=3))
def test_random_kernels_compute_what_lambdify_computes(table):
    """A reference kernel (the program's own printer) in its namespace and the same code
    in lambdify's full namespace: bit-identical values."""
    import inspect

    import sympy

    from gradcheck.reference import Reference

    for fn in _kernels(Reference(case_from_dict(table))):
        # lambdify's namespace, and what its printer imports itself
        full = dict(sympy.lambdify([], 0, modules=_modules()).__globals__,
                    reduce=functools.reduce)
        exec(compile(inspect.getsource(fn), "<full>", "exec"), full)
        args = [np.linspace(-1.5, 1.5, 7) + k / 7 for k in range(fn.__code__.co_argcount)]
        with np.errstate(all="ignore"):
            got, want = fn(*args), full[fn.__name__](*args)
        for p, q in zip(got, want, strict=True):
            np.testing.assert_array_equal(np.asarray(p), np.asarray(q))


def _kernels(ref) -> list:
    """The compiled kernels of a reference (elementwise: its kernel; tensor: each fused
    region's)."""
    if hasattr(ref, "_kernel"):
        return [ref._kernel]
    from gradcheck.reference.texpr import order

    return [t.data.fn for t in order(ref._outputs) if t.op == "kernel"]


SCRIPT = textwrap.dedent("""
    import json, os, sys
    from gradcheck.cases import case_from_dict
    from gradcheck.reference import Reference

    case = case_from_dict({"name": "t", "expr": sys.argv[1],
                           "inputs": {"x": {"shape": [3]}, "W": {"shape": [3, 2]}}})
    ref = Reference(case)
    ref.evaluate({"x": [0.1, 0.2, 0.3], "W": [[1.0, 2.0]] * 3}, 1.0)
    print(json.dumps({"scipy": "scipy" in sys.modules,
                      "fft": "numpy.fft" in sys.modules}))
    """)


@pytest.mark.parametrize("cache", ["off", "built"])
@pytest.mark.parametrize("expr, scipy", [("sum(tanh(x))", False),
                                         ("sum(tanh(x @ W) * relu(x @ W))", False),
                                         ("sum(erf(x))", True),
                                         ("sum(softplus(x @ W))", True)])
def test_scipy_is_imported_only_by_a_kernel_that_calls_it(expr, scipy, cache):
    import os

    env = dict(os.environ)
    env.pop("GRADCHECK_NO_CACHE", None)
    if cache == "off":
        env["GRADCHECK_NO_CACHE"] = "1"

    def run() -> dict:
        proc = subprocess.run([sys.executable, "-c", SCRIPT, expr], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return json.loads(proc.stdout)

    seen = run()
    assert seen["scipy"] == scipy
    if not scipy:   # nor NumPy's submodules, which lambdify's own namespace imports
        assert not seen["fft"]
