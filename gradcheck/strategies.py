"""Hypothesis strategies: random formulas over the rule table, and points to check them at.

Two strategies, for property-based tests of a differentiation engine (gradcheck's own,
or yours) against gradcheck's exact symbolic reference:

- :func:`formulas` draws *case tables*, the dicts :func:`gradcheck.cases.case_from_dict`
  accepts (``name``, ``expr``, ``inputs``, ``points``, ``seed``), each holding a random
  formula over the rule table (:mod:`gradcheck.rules`). Knobs choose the nesting depth,
  the functions used and the inputs' names and shapes. Every drawn formula parses, has a
  gradient to check and is defined at every real point: the argument of a function with
  a restricted domain is mapped into it (``log(1 + a**2)``, ``asin(0.9 * tanh(a))``...).
  Kinks (``abs``, ``relu``, ``maximum``, ``where``...) are left in; points are kept away
  from them. Failing examples shrink to small formulas: the simplest draw is a bare
  input name, then one function of it (``sin(x)``).
- :func:`points` draws input points for a case: a dict of float64 arrays by input name,
  inside each input's domain and at least :data:`gradcheck.sampling.MARGIN` away from
  every kink and singularity of the formula.

This module is the only part of gradcheck that imports Hypothesis (install it with the
``test`` extra); ``import gradcheck`` does not load it.

Check gradcheck's witnesses (its own engine, torch and finite differences) against the
reference on random formulas:

>>> from hypothesis import given, settings
>>> from gradcheck.cases import case_from_dict
>>> from gradcheck.runner import run_case
>>> from gradcheck.strategies import formulas
>>> @settings(max_examples=5, derandomize=True, database=None, deadline=None)
... @given(formulas(depth=2))
... def test_engine_matches_the_reference(table):
...     result = run_case(case_from_dict(table), "float64")
...     assert result.status == "passed", (table["expr"], result.message)
>>> test_engine_matches_the_reference()

Narrow the draw: only some functions, your own inputs:

>>> from hypothesis import find
>>> find(formulas(functions=["sin", "mul"], inputs={"w": [2]}),
...      lambda t: "*" in t["expr"])["expr"]
'(w) * (w)'

Check your own gradient at drawn points: here gradcheck's engine against the symbolic
reference, one formula and many points (:func:`points` also takes a case table):

>>> import numpy as np
>>> from hypothesis import strategies as st
>>> from gradcheck import engine
>>> from gradcheck.strategies import points
>>> from gradcheck.symbolic import Reference
>>> case = case_from_dict({"name": "t", "expr": "sum(abs(x) * log(y))",
...                        "inputs": {"x": [3], "y": [3]}})
>>> reference = Reference(case)
>>> @settings(max_examples=20, derandomize=True, database=None, deadline=None)
... @given(points(case))
... def test_my_gradient(point):
...     x = engine.Tensor(point["x"], requires_grad=True)
...     y = engine.Tensor(point["y"], requires_grad=True)
...     engine.sum(engine.abs(x) * engine.log(y)).backward()
...     want = reference.evaluate(point, np.ones(())).grads
...     assert np.allclose(x.grad.numpy(), want["x"], rtol=1e-12, atol=1e-12)
...     assert np.allclose(y.grad.numpy(), want["y"], rtol=1e-12, atol=1e-12)
>>> test_my_gradient()

Formula and point together: ``formulas().flatmap(lambda t: st.tuples(st.just(t),
points(t)))``.
"""

from __future__ import annotations

import keyword
import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

import numpy as np
from hypothesis import reject
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.extra import numpy as hnp

from .cases import Case, case_from_dict
from .dtypes import NAMES as DTYPES, round_to
from .expr import CONSTANTS, MAX_ELEMENTS
from .rules import COMPARISON, FUNCTIONS, RULES
from .sampling import _RANGES, sample, settle
from .shapes import ShapeError, broadcast, matmul_shape

__all__ = ["formulas", "points", "DEFAULT_INPUTS", "DEFAULT_FUNCTIONS", "GUARDS",
           "MAX_DEPTH"]

#: Inputs drawn over when neither ``inputs`` nor ``shapes`` is given.
DEFAULT_INPUTS: Mapping[str, tuple[int, ...]] = {"x": (3,), "y": (2, 3), "s": ()}

#: Deepest nesting :func:`formulas` accepts (deeper texts would meet the parser's bounds).
MAX_DEPTH = 8

#: Rows used to keep a function's argument in its domain (``log(1 + a**2)``): they may
#: appear in a drawn formula whatever ``functions`` says.
GUARDS: frozenset[str] = frozenset({"add", "mul", "pow", "tanh", "sigmoid"})

# Names given to the inputs of ``shapes=...``.
_NAMES = ("x", "y", "z", "u", "v", "w")
# Constant leaves (never the only leaf: every formula uses an input).
_CONSTANTS = ("0.5", "2")

# (row, template): "{0}" is the operand. Restricted domains are mapped into; exp, sinh
# and cosh go through tanh so that nesting cannot overflow.
_UNARY: tuple[tuple[str, str], ...] = (
    ("sin", "sin({0})"), ("cos", "cos({0})"), ("tanh", "tanh({0})"),
    ("sigmoid", "sigmoid({0})"), ("atan", "atan({0})"), ("erf", "erf({0})"),
    ("asinh", "asinh({0})"), ("softplus", "softplus({0})"), ("relu", "relu({0})"),
    ("abs", "abs({0})"), ("neg", "-({0})"), ("sign", "sign({0}) * {0}"),
    ("exp", "exp(tanh({0}))"), ("log", "log(1 + ({0})**2)"),
    ("sqrt", "sqrt(1 + ({0})**2)"), ("log1p", "log1p(({0})**2)"),
    ("expm1", "expm1(tanh({0}))"), ("asin", "asin(0.9 * tanh({0}))"),
    ("acos", "acos(0.9 * tanh({0}))"), ("acosh", "acosh(1.5 + ({0})**2)"),
    ("atanh", "atanh(0.9 * tanh({0}))"), ("tan", "tan(0.5 * tanh({0}))"),
    ("sinh", "sinh(tanh({0}))"), ("cosh", "cosh(tanh({0}))"), ("pow", "({0})**2"),
    ("pow", "({0})**3"), ("pow", "(1 + ({0})**2)**0.5"),
)
# (row, template): "{0}" and "{1}" are the operands; where() also takes two inputs.
_BINARY: tuple[tuple[str, str], ...] = (
    ("add", "({0}) + ({1})"), ("sub", "({0}) - ({1})"), ("mul", "({0}) * ({1})"),
    ("div", "({0}) / (1 + ({1})**2)"), ("maximum", "maximum({0}, {1})"),
    ("minimum", "minimum({0}, {1})"), ("where", "where(({0}) > ({1}), {2}, {3})"),
    ("pow", "(1.5 + sigmoid({0})) ** ({1})"),
)
# (row, template, what happens to the shape): over the last axis or the whole tensor.
_REDUCE: tuple[tuple[str, str, str], ...] = (
    ("sum", "sum({0}, axis=-1)", "last"), ("mean", "mean({0}, axis=-1)", "last"),
    ("max", "max({0}, axis=-1)", "last"), ("min", "min({0}, axis=-1, keepdims=True)", "keep"),
    ("logsumexp", "logsumexp({0}, axis=-1)", "last"), ("prod", "prod({0}, axis=-1)", "last"),
    ("sum", "sum({0})", "all"),
)
_LINALG = ("matmul", "dot", "transpose")

#: Every row :func:`formulas` can draw: the default of its ``functions``. (Comparisons
#: come with ``where``, as its condition.)
DEFAULT_FUNCTIONS: frozenset[str] = frozenset(
    [r for r, _ in _UNARY] + [r for r, _ in _BINARY] + [r for r, _, _ in _REDUCE]
    + list(_LINALG))


class _Expr(NamedTuple):
    text: str
    shape: tuple[int, ...]
    used: frozenset[str]


@dataclass(frozen=True)
class _Spec:
    """What one example may draw: its inputs and the templates of allowed rows."""

    shapes: dict[str, tuple[int, ...]]
    grad: tuple[str, ...]            # inputs that require grad (every formula uses one)
    unary: tuple
    binary: tuple
    reduce: tuple
    linalg: frozenset[str]

    @property
    def reduce_rows(self) -> frozenset[str]:
        return frozenset(t[0] for t in self.reduce)

    @property
    def groups(self) -> list[str]:
        # Order matters for shrinking: unary first, so one function of an input is the
        # simplest formula after a bare input.
        weights = [("unary", 2, self.unary), ("binary", 2, self.binary),
                   ("reduce", 1, self.reduce), ("linalg", 1, self.linalg)]
        return [g for g, n, there in weights if there for _ in range(n)]


# --------------------------------------------------------------------------- formulas

def formulas(*, depth: int = 3, functions: Iterable[str] | None = None,
             shapes: Sequence[Sequence[int]] | st.SearchStrategy | None = None,
             inputs: Mapping[str, Any] | None = None) -> st.SearchStrategy[dict]:
    """A strategy of case tables, each with a random formula over the rule table.

    A drawn table is what :func:`gradcheck.cases.case_from_dict` accepts, e.g.
    ``{"name": "formula", "expr": "maximum(sin(x), y)", "inputs": {"x": [3],
    "y": [2, 3]}, "points": 1, "seed": 17}``: ``inputs`` lists the inputs the formula
    uses (at least one that requires grad, on a differentiable path), ``seed`` is drawn.
    Add keys as you like (``dict(table, dtype=["float32"], points=3)``).

    Args:
        depth: the deepest nesting of drawn operations, 0 to :data:`MAX_DEPTH` (0: a bare
            input). The guards that keep an argument inside a domain do not count.
        functions: names of the rule table's rows the formulas may apply (``"sin"``,
            ``"maximum"``, ``"sum"``, ``"matmul"``, and the operators' rows ``"add"``,
            ``"sub"``, ``"mul"``, ``"div"``, ``"pow"``, ``"neg"``); default
            :data:`DEFAULT_FUNCTIONS`, every elementwise row, every reduction, matmul, dot
            and transpose. ``where`` brings a comparison as its condition. Guards
            (:data:`GUARDS`: ``1 + a**2`` under ``log``, ``tanh`` under ``exp``...) are
            added where a row needs them. With no row that fits, a formula is an input.
        shapes: the inputs' shapes, named x, y, z, u, v, w in order: a list of shapes
            (``[[3], [2, 3]]``), or a strategy of shapes (e.g.
            ``hypothesis.extra.numpy.array_shapes(max_dims=2, max_side=3)``), in which
            case each example draws one to three inputs. Not with ``inputs``.
        inputs: the inputs by name: a shape (``{"w": [2, 3]}``) or an input table of the
            case-file keys (``{"w": {"shape": [3], "domain": "positive"}}``), passed on
            as given. Default :data:`DEFAULT_INPUTS`: x [3], y [2, 3], s [].

    Shapes that do not fit together are reduced to scalars with ``sum`` (when allowed)
    or the operation is dropped; matmul and dot take an input of a fitting shape as the
    other operand. A draw that sits on a kink wherever the sampler looks (a maximum of
    equal elements, an overflow) is rejected, so every drawn case gets points away from
    its kinks. The symbolic reference expands formulas that mix elements element by
    element, so keep the inputs small.

    Raises:
        hypothesis.errors.InvalidArgument: a knob out of range, an unknown row, a bad
            input name or shape.

    >>> from hypothesis import find
    >>> find(formulas(), lambda t: "sin" in t["expr"])["expr"]
    'sin(x)'
    """
    if isinstance(depth, bool) or not isinstance(depth, int) or not 0 <= depth <= MAX_DEPTH:
        raise InvalidArgument(f"depth must be an integer from 0 to {MAX_DEPTH}, got "
                              f"{depth!r}")
    allowed = _check_functions(functions)
    if inputs is not None and shapes is not None:
        raise InvalidArgument("give inputs or shapes, not both")
    if isinstance(shapes, st.SearchStrategy):
        fixed = None
    elif shapes is not None:
        if isinstance(shapes, (str, bytes)) or not isinstance(shapes, Sequence) or not (
                1 <= len(shapes) <= len(_NAMES)):
            raise InvalidArgument(f"shapes must be a list of 1 to {len(_NAMES)} shapes "
                                  f"(e.g. [[3], [2, 3]]) or a strategy of shapes, got "
                                  f"{shapes!r}")
        fixed = {n: _check_shape(s, f"shapes[{i}]")
                 for i, (n, s) in enumerate(zip(_NAMES, shapes))}
    else:
        fixed = _check_inputs(DEFAULT_INPUTS if inputs is None else inputs)
    if fixed is not None:
        _spec(fixed, allowed)  # fail now, not at the first draw
    return _formulas(depth, allowed, shapes if fixed is None else None, fixed)


@st.composite
def _formulas(draw, depth: int, allowed: frozenset[str], shapes, fixed):
    if fixed is None:  # one to three inputs, shapes drawn
        n = draw(st.integers(1, 3))
        fixed = {}
        for name in _NAMES[:n]:
            fixed[name] = _check_shape(draw(shapes), "a shape drawn from shapes")
    spec = _spec(fixed, allowed)
    e = draw(_expression(spec, depth, True))
    used = {n: (dict(v, shape=list(v.get("shape", []))) if isinstance(v, dict)
                else list(v)) for n, v in fixed.items() if n in e.used}
    table = {"name": "formula", "expr": e.text, "inputs": used, "points": 1,
             "seed": draw(st.integers(0, 2**32 - 1))}
    # A formula sitting on a kink wherever it is defined (max over a broadcast scalar:
    # a tie everywhere) or overflowing wherever the sampler looks has no point to check.
    if sample(case_from_dict(table), "float64", 0).notes:
        reject()
    return table


@st.composite
def _expression(draw, spec: _Spec, depth: int, need: bool) -> _Expr:
    """A formula of at most ``depth`` nested operations; ``need``: it uses an input that
    requires grad (every operation's first operand does, so no subformula but a leaf is
    constant: constant folding never overflows)."""
    groups = spec.groups
    # Drawn at every depth, so a subformula's draws mean the same one level up: the
    # shrinker can put a subformula in its parent's place.
    stop = draw(st.integers(0, 3)) == 0
    if stop or depth == 0 or not groups:
        name = draw(st.sampled_from(spec.grad if need else tuple(spec.shapes) + _CONSTANTS))
        return _Expr(name, spec.shapes.get(name, ()), frozenset([name] if name in
                                                                spec.shapes else []))
    # Each operation draws its row before its operands, so that its draws are one
    # block ahead of the operand's: the shrinker can delete it, leaving the operand.
    group = draw(st.sampled_from(groups))
    if group == "unary":
        _, template = draw(st.sampled_from(spec.unary))
        a = draw(_expression(spec, depth - 1, True))
        return _Expr(template.format(a.text), a.shape, a.used)
    if group == "binary":
        row, template = draw(st.sampled_from(spec.binary))
        a = draw(_expression(spec, depth - 1, True))
        b = draw(_expression(spec, depth - 1, False))
        if b.text == a.text and row in ("sub", "maximum", "minimum", "where"):
            b = _Expr(_CONSTANTS[0], (), frozenset())  # not max(a, a): a kink everywhere
        if row == "where":
            return _where(draw, spec, template, a, b)
        shape = _fit(a, b)
        if shape is None:
            if "sum" not in spec.reduce_rows:
                return a
            a, b, shape = _summed(a), _summed(b), ()
        return _Expr(template.format(a.text, b.text), shape, a.used | b.used)
    if group == "reduce":
        _, template, keep = draw(st.sampled_from(spec.reduce))
        a = draw(_expression(spec, depth - 1, True))
        if not a.shape:
            return a
        shape = {"last": a.shape[:-1], "keep": a.shape[:-1] + (1,), "all": ()}[keep]
        return _Expr(template.format(a.text), shape, a.used)
    row = draw(st.sampled_from(sorted(spec.linalg)))
    a = draw(_expression(spec, depth - 1, True))
    options = _linalg_options(spec, row, a)
    if not options:
        return a
    text, shape, other = draw(st.sampled_from(options))
    return _Expr(text, shape, a.used | {other} - {""})


def _where(draw, spec: _Spec, template: str, a: _Expr, b: _Expr) -> _Expr:
    """where(a > b, p, q) with inputs p (requires grad) and q; a always uses an input, so
    the condition is never between two constants."""
    p = draw(st.sampled_from(spec.grad))
    fits = [n for n in spec.shapes if _fits(spec.shapes[p], spec.shapes[n])]
    q = draw(st.sampled_from(fits))
    branches = broadcast(spec.shapes[p], spec.shapes[q])
    shape = _fit(a, b, _Expr("", branches, frozenset()))
    if shape is None:
        if "sum" not in spec.reduce_rows:
            return a
        a, b, shape = _summed(a), _summed(b), branches
    return _Expr(template.format(a.text, b.text, p, q), shape, a.used | b.used | {p, q})


def _linalg_options(spec: _Spec, row: str, a: _Expr) -> list[tuple]:
    """(text, shape, input used) for each way ``row`` applies to ``a``: the other
    operand of matmul or dot is an input of a fitting shape."""
    out = []
    if row == "transpose" and len(a.shape) >= 2:
        out.append((f"transpose({a.text})", a.shape[:-2] + (a.shape[-1], a.shape[-2]), ""))
    for name, shape in spec.shapes.items():
        if not shape or not a.shape:
            continue
        if row == "dot" and len(a.shape) == 1 and shape == a.shape:
            out.append((f"dot({a.text}, {name})", (), name))
        if row != "matmul":
            continue
        tried = [(f"({a.text}) @ {name}", a.shape, shape),
                 (f"{name} @ ({a.text})", shape, a.shape)]
        if "transpose" in spec.linalg and len(shape) >= 2:
            swapped = shape[:-2] + (shape[-1], shape[-2])
            tried.append((f"({a.text}) @ transpose({name})", a.shape, swapped))
        for text, left, right in tried:
            try:
                out.append((text, matmul_shape(left, right), name))
            except ShapeError:
                pass
    return [o for o in out if math.prod(o[1]) <= MAX_ELEMENTS]


def _fits(*shapes: tuple[int, ...]) -> bool:
    try:
        broadcast(*shapes)
    except ShapeError:
        return False
    return True


def _fit(*exprs: _Expr) -> tuple[int, ...] | None:
    shapes = [e.shape for e in exprs]
    return broadcast(*shapes) if _fits(*shapes) else None


def _summed(e: _Expr) -> _Expr:
    return e if not e.shape else _Expr(f"sum({e.text})", (), e.used)


def _spec(fixed: Mapping[str, Any], allowed: frozenset[str]) -> _Spec:
    shapes = {n: tuple(v["shape"] if isinstance(v, dict) else v) for n, v in fixed.items()}
    grad = tuple(n for n, v in fixed.items()
                 if not (isinstance(v, dict) and v.get("requires_grad") is False))
    if not grad:
        raise InvalidArgument("at least one input must require grad")
    return _Spec(shapes, grad,
                 unary=tuple(t for t in _UNARY if t[0] in allowed),
                 binary=tuple(t for t in _BINARY if t[0] in allowed),
                 reduce=tuple(t for t in _REDUCE if t[0] in allowed),
                 linalg=frozenset(allowed & set(_LINALG)))


def _check_functions(functions: Iterable[str] | None) -> frozenset[str]:
    if functions is None:
        return DEFAULT_FUNCTIONS
    if isinstance(functions, (str, bytes)):
        raise InvalidArgument(f"functions takes a list of names, e.g. [{functions!r}]")
    names = list(functions)
    for name in names:
        if name in RULES and RULES[name].kind == COMPARISON:
            raise InvalidArgument(f"{name!r} is a comparison: it comes with 'where', as "
                                  "its condition")
        if name not in DEFAULT_FUNCTIONS:
            raise InvalidArgument(f"unknown function {name!r}; the rows formulas() can "
                                  f"draw are {', '.join(sorted(DEFAULT_FUNCTIONS))}")
    return frozenset(names)


def _check_shape(shape: Any, what: str) -> tuple[int, ...]:
    if isinstance(shape, (str, bytes)) or not isinstance(shape, (Sequence, np.ndarray)) \
            or not all(isinstance(n, (int, np.integer)) and not isinstance(n, bool)
                       and n > 0 for n in shape) or len(shape) > 8:
        raise InvalidArgument(f"{what} must be a list of at most 8 positive integers, got "
                              f"{shape!r}")
    if math.prod(shape) > MAX_ELEMENTS:
        raise InvalidArgument(f"{what} has more than {MAX_ELEMENTS} elements")
    return tuple(int(n) for n in shape)


def _check_inputs(inputs: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(inputs, Mapping) or not inputs:
        raise InvalidArgument(f"inputs must be a non-empty dict of name -> shape or "
                              f"input table, got {inputs!r}")
    out: dict[str, Any] = {}
    for name, value in inputs.items():
        if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name) \
                or name in FUNCTIONS or name in CONSTANTS or name in ("axis", "keepdims"):
            raise InvalidArgument(f"{name!r} cannot name an input")
        if isinstance(value, Mapping):
            table = dict(value)
            table["shape"] = list(_check_shape(table.get("shape", []), f"inputs[{name!r}]"))
            out[name] = table
        else:
            out[name] = _check_shape(value, f"inputs[{name!r}]")
    return out


# --------------------------------------------------------------------------- points

def points(case: Case | Mapping[str, Any], dtype: str = "float64") -> st.SearchStrategy[
        dict[str, np.ndarray]]:
    """A strategy of input points for ``case``: float64 arrays by input name.

    Values are drawn by Hypothesis inside each input's domain (in the ranges gradcheck's
    sampler uses: [-2, 2] for ``real``, [0.05, 3] for ``positive``...) and rounded to
    ``dtype``. Elements closer than :data:`gradcheck.sampling.MARGIN` to a kink or
    singularity of the formula (per :func:`gradcheck.forward.hazard_distances`), or
    pushed out of the domain by the rounding, are redrawn the way
    :func:`gradcheck.sampling.sample` does (element by element for elementwise formulas,
    the whole input otherwise) from a generator seeded by Hypothesis. A pinned ``value``
    is used as given. The rare point still too close after that many rounds is
    rejected, so a pinned value sitting on a kink makes the strategy unsatisfiable.

    Args:
        case: a :class:`gradcheck.cases.Case`, or a case table (as :func:`formulas` draws).
        dtype: ``"float64"``, ``"float32"``, ``"float16"`` or ``"bfloat16"``: the
            values are representable in it (float64 arrays of values it holds exactly).

    >>> from hypothesis import find
    >>> point = find(points({"name": "t", "expr": "log(x)", "inputs": {"x": [3]}}),
    ...              lambda p: True)
    >>> bool((point["x"] > 0).all())
    True
    """
    if isinstance(case, Mapping):
        case = case_from_dict(dict(case))
    if not isinstance(case, Case):
        raise InvalidArgument(f"points() takes a Case or a case table, got {case!r}")
    if dtype not in DTYPES:
        raise InvalidArgument(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if case.op is not None:
        raise InvalidArgument("points() draws for formula cases (expr), not op cases")
    return _points(case, dtype)


def _elements(domain) -> st.SearchStrategy[float]:
    if domain == "nonzero":
        return st.floats(0.1, 2.0).flatmap(lambda v: st.sampled_from([v, -v]))
    lo, hi = _RANGES[domain] if isinstance(domain, str) else domain
    return st.floats(lo, hi)


@st.composite
def _points(draw, case: Case, dtype: str) -> dict[str, np.ndarray]:
    values: dict[str, np.ndarray] = {}
    free = []
    for spec in case.inputs:
        if spec.value is not None:
            values[spec.name] = round_to(spec.value, dtype)
        else:
            raw = draw(hnp.arrays(np.float64, spec.shape, elements=_elements(spec.domain)))
            values[spec.name] = round_to(raw, dtype)
            free.append(spec)
    rng = np.random.default_rng(draw(st.integers(0, 2**64 - 1)))
    if not settle(case, values, free, rng, dtype):
        return values
    reject()  # still within MARGIN of a kink (or no free input can move it)
