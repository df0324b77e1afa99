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
  inside each input's domain and at least :data:`gradcheck.sampling.points.MARGIN` away from
  every kink and singularity of the formula.

This module is the only part of gradcheck that imports Hypothesis (install it with the
``test`` extra); ``import gradcheck`` does not load it.

Check gradcheck's witnesses (its own engine, torch and finite differences) against the
reference on random formulas:

>>> from hypothesis import given, settings
>>> from gradcheck.cases import case_from_dict
>>> from gradcheck.checking.case import run_case
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
>>> from gradcheck.reference import Reference
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

import functools
import itertools
import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

import numpy as np
from hypothesis import reject
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.extra import numpy as hnp

from .cases import Case, case_from_dict
from .base.dtypes import NAMES as DTYPES
from .base.errors import CaseFileError
from .formula.parser import MAX_ELEMENTS, parse
from .rules import COMPARISON, RULES
from .sampling.domains import Modulus
from .sampling.points import RANGES, _round, sample, settle
from .base.shapes import ShapeError, broadcast
from .generate.inputs import check_inputs as _check_inputs, check_shape as _check_shape
from .generate.templates import (SPECIAL, TEMPLATES, Template, into_domain, template_dtype,
                                 template_inputs)
from .formula.tree import Node

__all__ = ["formulas", "points", "into_domain", "functions_for", "DEFAULT_INPUTS",
           "DEFAULT_FUNCTIONS", "GUARDS", "MAX_DEPTH"]

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


#: Every row :func:`formulas` can draw: the default of its ``functions``, every row of
#: the table. (Comparisons come with ``where``, as its condition.)
DEFAULT_FUNCTIONS: frozenset[str] = frozenset(TEMPLATES)


def functions_for(row: str) -> frozenset[str]:
    """The ``functions=`` that lets :func:`formulas` draw ``row``: the row itself, or
    ``where`` for a comparison.

    >>> sorted(functions_for("lt")), sorted(functions_for("sin"))
    (['where'], ['sin'])
    """
    if row not in RULES:
        raise InvalidArgument(f"unknown row {row!r}")
    return frozenset(["where"] if RULES[row].family == COMPARISON else [row])


@functools.lru_cache(maxsize=8192)
def _shape(text: str, shapes: tuple[tuple[int, ...], ...], dtypes=()) -> tuple[int, ...] | None:
    """The shape (rows' shape rules) of a template on operands of ``shapes``, or None."""
    names = {f"_{k}": Node("input", shape=s, name=f"_{k}", dtype=dict(enumerate(dtypes)).get(k))
             for k, s in enumerate(shapes)}
    try:
        return parse(text.format(*names), names).shape
    except CaseFileError:
        return None


class _Expr(NamedTuple):
    text: str
    shape: tuple[int, ...]
    used: frozenset[str]


@dataclass(frozen=True)
class _Spec:
    """What one example may draw: its inputs and, by group, the allowed rows' templates."""

    shapes: dict[str, tuple[int, ...]]
    grad: tuple[str, ...]            # inputs that require grad (every formula uses one)
    allowed: frozenset[str]
    rows: dict[str, tuple[tuple[Template, ...], ...]]   # by group, by row
    dtypes: Mapping[str, str]        # the integer inputs' dtypes, by name
    own: bool = False                # templates may add their own inputs (the defaults)

    @property
    def groups(self) -> list[str]:
        # Order matters for shrinking: unary first, so one function of an input is the
        # simplest formula after a bare input.
        weights = [("unary", 2), ("binary", 2), ("reduce", 1), ("linalg", 1), ("structure", 1)]
        return [g for g, n in weights if self.rows.get(g) for _ in range(n)]


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
            :data:`DEFAULT_FUNCTIONS`, every row of the table. ``where`` brings the
            comparisons as its condition (:func:`functions_for`). Guards
            (:data:`GUARDS`: ``1 + a**2`` under ``log``, ``tanh`` under ``exp``...) are
            added where a row needs them. With no row that fits, a formula is an input.
        shapes: the inputs' shapes, named x, y, z, u, v, w in order: a list of shapes
            (``[[3], [2, 3]]``), or a strategy of shapes (e.g.
            ``hypothesis.extra.numpy.array_shapes(max_dims=2, max_side=3)``), in which
            case each example draws one to three inputs. Not with ``inputs``.
        inputs: the inputs by name: a shape (``{"w": [2, 3]}``) or an input table of the
            case-file keys (``{"w": {"shape": [3], "domain": "positive"}}``), passed on
            as given. Default :data:`DEFAULT_INPUTS`: x [3], y [2, 3], s []; with
            the default, the convolutions and poolings, whose operands have 3 or 4
            dimensions, may also draw small inputs of their own
            (:data:`gradcheck.generate.templates.TEMPLATE_INPUTS`: ``img`` [2, 2, 2, 3], ``k``...).

    Every row is drawn from the rule table's data: an argument mapped into the row's
    domain (:func:`into_domain`), bounded first when the row grows, reductions over the
    last axis or all (``keepdims`` drawn), number parameters drawn. Shapes that do not
    fit together are reduced to scalars with ``sum`` (when allowed) or the operation is
    dropped; matmul and dot take an input of a fitting shape as the other operand. A
    draw that sits on a kink wherever the sampler looks (a maximum of equal elements, an
    overflow) is rejected, so every drawn case gets points away from its kinks. The
    symbolic reference expands formulas that mix elements element by element, so keep
    the inputs small.

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
    fixed = _fixed_inputs(shapes, inputs)
    if fixed is not None:
        _spec(fixed, allowed)  # fail now, not at the first draw
    own = shapes is None and inputs is None
    return _formulas(depth, allowed, shapes if fixed is None else None, fixed, own)


def _fixed_inputs(shapes, inputs) -> dict[str, Any] | None:
    """The inputs by name, checked; None when each example draws its shapes."""
    if inputs is not None and shapes is not None:
        raise InvalidArgument("give inputs or shapes, not both")
    if isinstance(shapes, st.SearchStrategy):
        return None
    if shapes is None:
        return _check_inputs(DEFAULT_INPUTS if inputs is None else inputs)
    if isinstance(shapes, (str, bytes)) or not isinstance(shapes, Sequence) or not (
            1 <= len(shapes) <= len(_NAMES)):
        raise InvalidArgument(f"shapes must be a list of 1 to {len(_NAMES)} shapes "
                              f"(e.g. [[3], [2, 3]]) or a strategy of shapes, got "
                              f"{shapes!r}")
    return {n: _check_shape(s, f"shapes[{i}]") for i, (n, s) in enumerate(zip(_NAMES, shapes))}


@st.composite
def _formulas(draw, depth: int, allowed: frozenset[str], shapes, fixed, own=False):
    if fixed is None:  # one to three inputs, shapes drawn
        n = draw(st.integers(1, 3))
        fixed = {}
        for name in _NAMES[:n]:
            fixed[name] = _check_shape(draw(shapes), "a shape drawn from shapes")
    spec = _spec(fixed, allowed, own)
    e = draw(_expression(spec, depth, True))
    used = {n: (dict(v, shape=list(v.get("shape", []))) if isinstance(v, dict)
                else list(v)) for n, v in fixed.items() if n in e.used}
    used.update(template_inputs(e.used, fixed) if own else {})
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
    # Each operation draws its row and template before its operands, so that its draws
    # are one block ahead of the operand's: the shrinker can delete it, leaving the
    # operand.
    group = draw(st.sampled_from(groups))
    template = draw(st.sampled_from(draw(st.sampled_from(spec.rows[group]))))
    a = draw(_expression(spec, depth - 1, True))
    if group == "unary":
        return _Expr(template.text.format(a.text), a.shape, a.used)
    if group == "binary":
        return _elementwise(draw, spec, template, depth, a)
    if group == "reduce":
        shape = _shape(template.text, (a.shape,)) if a.shape else None
        return a if shape is None else _Expr(template.text.format(a.text), shape, a.used)
    options = _linalg_options(spec, template, a)
    if not options:
        return a
    text, shape, other = draw(st.sampled_from(options))
    return _Expr(text, shape, a.used | other)


def _elementwise(draw, spec: _Spec, template: Template, depth: int, a: _Expr) -> _Expr:
    """An elementwise row of two or more operands, ``a`` the first, the others drawn
    (maybe constants). where(a > b, p, q) takes inputs p (requires grad) and q as its
    branches: a always uses an input, so the condition never compares two constants."""
    rule, where = RULES[template.row], template.row == "where"
    others = [draw(_expression(spec, depth - 1, False))
              for _ in range(1 if where else rule.arity - 1)]
    if rule.hazard is not None or template.row in ("sub", "where", "masked_fill"):
        # not max(a, a), a - a or a > a: a kink everywhere, or no gradient
        others = [_Expr(_CONSTANTS[0], (), frozenset()) if o.text == a.text else o
                  for o in others]
    branches, names = (), []
    if where:
        p = draw(st.sampled_from(spec.grad))
        q = draw(st.sampled_from([n for n in spec.shapes
                                  if _fit(spec.shapes[p], spec.shapes[n]) is not None]))
        branches, names = _fit(spec.shapes[p], spec.shapes[q]), [p, q]
    shape = _fit(a.shape, *(o.shape for o in others), branches)
    if shape is None:
        if "sum" not in spec.allowed:
            return a
        a, others, shape = _summed(a), [_summed(o) for o in others], branches
    used = a.used.union(*(o.used for o in others), names)
    return _Expr(template.text.format(a.text, *(o.text for o in others), *names), shape,
                 used)


def _linalg_options(spec: _Spec, template: Template, a: _Expr) -> list[tuple]:
    """(text, shape, inputs used) for each way the template applies to ``a``: its other
    operands are inputs of a fitting shape."""
    out = []
    slots = template.text.count("{") - 1
    pool = dict(spec.shapes)
    if spec.own:   # the template's own inputs, where no drawn input has their name
        pool.update((n, s) for n, s in template.inputs if n not in spec.shapes)
    for names in itertools.product(pool, repeat=slots):
        shape = _shape(template.text, (a.shape, *(pool[n] for n in names)),
                       (None, *(spec.dtypes.get(n) if n in spec.shapes else template_dtype(n)
                                for n in names)))
        if shape is not None and math.prod(shape) <= MAX_ELEMENTS:
            out.append((template.text.format(f"{a.text}", *names), shape, frozenset(names)))
    return out


def _fit(*shapes: tuple[int, ...]) -> tuple[int, ...] | None:
    try:
        return broadcast(*shapes)
    except ShapeError:
        return None


def _summed(e: _Expr) -> _Expr:
    return e if not e.shape else _Expr(f"sum({e.text})", (), e.used)


def _spec(fixed: Mapping[str, Any], allowed: frozenset[str], own: bool = False) -> _Spec:
    shapes = {n: tuple(v["shape"] if isinstance(v, dict) else v) for n, v in fixed.items()}
    grad = tuple(n for n, v in fixed.items()
                 if not (isinstance(v, dict) and v.get("requires_grad") is False))
    if not grad:
        raise InvalidArgument("at least one input must require grad")
    dtypes = {n: v["dtype"] for n, v in fixed.items() if isinstance(v, dict) and v.get("dtype")}
    return _Spec(shapes, grad, allowed, _rows(allowed), dtypes, own)


_FIRST = ("sin", "tanh")
_COMPARISONS = frozenset(n for n, r in RULES.items() if r.family == COMPARISON)


def _order(t: Template) -> int:
    """Where a template goes in its group: the order the shrinker prefers (it tries a
    group's first two entries, then steps down one at a time): sin, and the guard tanh,
    so that a failure of tanh (which every bounded template applies) shrinks to
    ``tanh(x)``, not to ``expm1(tanh(x))``; then operators of two operands, functions
    applied as they are, and the guarded and special rows."""
    if t.row in _FIRST:
        return _FIRST.index(t.row) - len(_FIRST)
    rule, rest = RULES[t.row], t.text[len(t.row) + 1:]
    plain = t.text.startswith(t.row + "(") and "(" not in rest
    if t.row in SPECIAL:
        return 2
    return 0 if rule.symbol and rule.arity > 1 else 1 if plain or rule.symbol else 2


@functools.lru_cache(maxsize=256)
def _rows(allowed: frozenset[str]) -> dict[str, tuple[tuple[Template, ...], ...]]:
    """By group, the allowed rows (each a tuple of its templates that need no other row)
    in order. A row is drawn first, then one of its templates: every row of a group is
    equally likely, however many templates it has (where has one per comparison, a
    reduction one per axis and keepdims combination)."""
    kept = sorted((t for row, ts in TEMPLATES.items() if row in allowed for t in ts
                   if t.needs <= allowed | _COMPARISONS), key=_order)
    out: dict[str, dict[str, list[Template]]] = {}
    for t in kept:
        out.setdefault(t.group, {}).setdefault(t.row, []).append(t)
    return {g: tuple(tuple(ts) for ts in out[g].values())
            for g in ("unary", "binary", "reduce", "linalg", "structure") if g in out}


def _check_functions(functions: Iterable[str] | None) -> frozenset[str]:
    if functions is None:
        return DEFAULT_FUNCTIONS
    if isinstance(functions, (str, bytes)):
        raise InvalidArgument(f"functions takes a list of names, e.g. [{functions!r}]")
    names = list(functions)
    for name in names:
        if name in RULES and RULES[name].family == COMPARISON:
            raise InvalidArgument(f"{name!r} is a comparison: it comes with 'where', as "
                                  "its condition")
        if name not in DEFAULT_FUNCTIONS:
            raise InvalidArgument(f"unknown function {name!r}; the rows formulas() can "
                                  f"draw are {', '.join(sorted(DEFAULT_FUNCTIONS))}")
    return frozenset(names)


# --------------------------------------------------------------------------- points

def points(case: Case | Mapping[str, Any], dtype: str = "float64") -> st.SearchStrategy[
        dict[str, np.ndarray]]:
    """A strategy of input points for ``case``: float64 arrays by input name.

    Values are drawn by Hypothesis inside each input's domain (in the ranges gradcheck's
    sampler uses: [-2, 2] for ``real``, [0.05, 3] for ``positive``...) and rounded to
    ``dtype``. Elements closer than :data:`gradcheck.sampling.points.MARGIN` to a kink or
    singularity of the formula (per :func:`gradcheck.formula.forward.counted_hazards`), or
    pushed out of the domain by the rounding, are redrawn the way
    :func:`gradcheck.sampling.points.sample` does (element by element for elementwise formulas,
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
    if isinstance(domain, Modulus):   # each part within |z|'s bound: settle redraws the
        return st.floats(-domain.hi, domain.hi)   # pairs outside it by modulus
    if domain == "nonzero":
        return st.floats(0.1, 2.0).flatmap(lambda v: st.sampled_from([v, -v]))
    lo, hi = RANGES[domain] if isinstance(domain, str) else domain
    return st.floats(lo, hi)


@st.composite
def _points(draw, case: Case, dtype: str) -> dict[str, np.ndarray]:
    values: dict[str, np.ndarray] = {}
    free = []
    for spec in case.inputs:
        if spec.value is not None:
            values[spec.name] = _round(spec.value, dtype, spec)   # (integers as they are)
        else:
            raw = draw(hnp.arrays(np.float64, spec.shape, elements=_elements(spec.domain)))
            values[spec.name] = _round(raw, dtype, spec)
            free.append(spec)
    rng = np.random.default_rng(draw(st.integers(0, 2**64 - 1)))
    if not settle(case, values, free, rng, dtype):
        return values
    reject()  # still within MARGIN of a kink (or no free input can move it)
