"""A row of the rule table: one primitive of the expression language, as named data.

A row holds its columns (what the primitive means to SymPy, NumPy, torch and the engine),
its parameters (``axis=``, ``keepdims=``, ``min=``...), how it is spelled (a function
name, or an operator such as ``+`` or ``@``), the domain of its arguments, and its shape
rule. Everything that walks a formula calls a row through :meth:`Rule.call` (and the
engine's VJPs through :meth:`Rule.vjp`): one calling convention, so a new primitive, with
or without parameters, is one row.
"""

from __future__ import annotations

import functools
import numbers
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

from ..base.shapes import ShapeError, broadcast, normalize_axis, reduced
from . import keys

# The families of rows (a row's ``family``): each has its own module of the rounding
# model (gradcheck.bounds) and its own places a new row must fill (.families.NEEDS).
# elementwise: a function of each element of its broadcast operands (where included);
# comparison: a condition of where() (<, ==, &...): a bool, no derivative;
# reduction: a sum, mean, product, max... over axis= (keepdims=), each element feeding
# one output;
ELEMENTWISE, COMPARISON, REDUCTION = "elementwise", "comparison", "reduction"
# bilinear: maps whose sums round (matmul, dot, the convolutions);
# structure: an exact linear map with 0/1 coefficients (reshape, x[...], concat...): no
# rounding, the error bound goes through the map itself;
# pooling: a window's mean or max (avg_pool2d, max_pool2d);
# composite: a row that states its own first-order rounding bound in its ``rounding``
# column (softmax, var, sort, einsum, one_hot...), as the generic model cannot see
# through how it mixes elements
BILINEAR, STRUCTURE, POOLING, COMPOSITE = "bilinear", "structure", "pooling", "composite"
FAMILIES = (ELEMENTWISE, COMPARISON, REDUCTION, BILINEAR, STRUCTURE, POOLING, COMPOSITE)

#: Column names every row must fill.
BACKENDS: tuple[str, ...] = ("sympy", "numpy", "torch", "engine")

#: Argument domains, in the case files' vocabulary (an interval is a (lo, hi) pair).
DOMAINS: tuple[str, ...] = ("real", "positive", "nonnegative", "nonzero", "unit")

AXIS, BOOL, NUMBER = "axis", "bool", "number"
INT, INTS, CHOICE, TEXT, KEY = "int", "ints", "choice", "text", "key"

#: Largest magnitude of an integer parameter, and most integers in one INTS value.
MAX_INT, MAX_INTS = 1 << 31, 64


@dataclass(frozen=True)
class Param:
    """A parameter of a row, given after the operands, positionally in the row's order or
    as a keyword (``sum(x, 1)``, ``sum(x, axis=1)``, ``reshape(x, [2, -1])``).

    ``kind`` says what the parser accepts and how the value is normalised:

    - ``axis``: an int, a tuple of ints or None, normalised against the first argument's
      dimensions to a sorted tuple of non-negative axes;
    - ``bool``: True or False; ``number``: a number literal, or None for "not given";
    - ``int``: an integer (or None where the default is None), kept as written (a row's
      shape rule reads negative values, e.g. ``unsqueeze``'s axis counts the new one);
    - ``ints``: an integer or a list of integers, or of lists of integers (``pad``'s
      widths), normalised to a tuple (of tuples); at most :data:`MAX_INTS` integers;
    - ``choice``: one of the strings ``choices`` (``gelu``'s ``approximate="tanh"``);
    - ``text``: a string literal the row's shape rule validates (``einsum``'s subscripts);
    - ``key``: a subscript (:mod:`.keys`), written ``x[0, 1:3]`` after the call or the
      operand, never as an argument (``index``'s key, ``split``'s piece).
    """

    name: str
    kind: str
    default: Any = None
    choices: tuple[str, ...] = ()

    def normalize(self, value: Any, shapes: list[tuple[int, ...]]) -> Any:
        if self.kind == AXIS:
            return normalize_axis(value, len(shapes[0]))
        if self.kind == BOOL:
            if not isinstance(value, bool):
                raise ShapeError(f"{self.name}= must be True or False")
            return value
        if self.kind == KEY:
            return keys.check(value)
        if value is None and self.default is None:
            return None
        if self.kind in (INT, INTS):
            return _ints(value, self.name, nested=self.kind == INTS)
        if self.kind in (CHOICE, TEXT):
            if not isinstance(value, str) or (self.choices and value not in self.choices):
                allowed = " or ".join(repr(c) for c in self.choices) or "a string"
                raise ShapeError(f"{self.name}= must be {allowed}, got {value!r}")
            return value
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ShapeError(f"{self.name}= must be a number")
        return float(value)


def _ints(value: Any, name: str, nested: bool) -> Any:
    """``value`` as an int (``nested``: or a tuple of ints or of tuples of ints)."""
    count = [0]

    def one(v, depth):
        if isinstance(v, (list, tuple)) and nested and depth < 2:
            return tuple(one(e, depth + 1) for e in v)
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or abs(v) >= MAX_INT:
            what = "an integer or a list of integers" if nested else "an integer"
            raise ShapeError(f"{name}= must be {what}, got {value!r}")
        count[0] += 1
        if count[0] > MAX_INTS:
            raise ShapeError(f"{name}= holds more than {MAX_INTS} integers")
        return int(v)

    return one(value, 0)


@dataclass(frozen=True)
class EngineRule:
    """The engine column of a row: its reverse-mode rule, HIPS-autograd style.

    ``vjps[i](g, ans, *args, *params)`` is the cotangent of argument ``i``, given the
    output's cotangent ``g``, the forward's result ``ans``, the forward's arguments (NumPy
    arrays or Python numbers) and the row's parameter values in order. It may have the
    broadcast shape: the engine sums it back to the argument's shape in one place.
    ``None`` marks an argument with no derivative (the condition of ``where``).
    ``grad_fn`` is the class name PyTorch gives the node, or a function of the arguments
    and parameters choosing it (``x ** 2`` is PowBackward0, ``x ** y`` PowBackward1);
    ``None``: the result is not differentiable. ``saves``: whether PyTorch's node saves
    tensors, so that a second backward through it needs ``retain_graph``.
    """

    grad_fn: str | Callable[..., str] | None
    vjps: tuple[Callable[..., Any] | None, ...] = ()
    saves: bool = True
    op: str = ""                    # the row's name, set by Rule


@dataclass(frozen=True)
class TensorRule:
    """The tensor column of a row of any family but elementwise and comparison: its exact
    reverse-mode rule at tensor level, for the tensor-level symbolic reference
    (:mod:`gradcheck.reference.tensor`).

    ``vjps[i](b, g, ans, *args, *params)`` is the cotangent of argument ``i`` as a tensor
    expression built with ``b`` (a :class:`gradcheck.reference.texpr.Builder`: matmul,
    transpose, reshape, broadcast, sum back over broadcast axes, products, other rows),
    from the output's cotangent ``g``, the forward's result ``ans`` and the arguments,
    all tensor expressions with a ``shape``. These are the matrix-calculus identities
    (the adjoint of ``A @ B`` is ``Ḡ Bᵀ`` and ``Aᵀ Ḡ``; of a sum, a broadcast), each
    checked against SymPy's element-by-element derivative and by the adjoint identity
    ⟨L x, y⟩ = ⟨x, Lᵀ y⟩ in the tests. A cotangent may have the broadcast shape: the
    reference sums it back to the argument's shape in one place. ``None``: no
    derivative.
    """

    vjps: tuple[Callable[..., Any] | None, ...] = ()


def _default_shape(family: str) -> Callable[..., tuple[int, ...]]:
    if family in (ELEMENTWISE, COMPARISON):
        return broadcast
    if family == REDUCTION:
        return reduced
    raise ValueError(f"a {family} row needs its own shape rule")


@dataclass(frozen=True, kw_only=True)
class Rule:
    """One primitive of the expression language (see the module docstring), built by
    keyword (``Rule(name="exp", family=ELEMENTWISE, arity=1, sympy=..., ...)``).

    ``family`` is one of :data:`FAMILIES`: the one answer to "which kind of row is this"
    that every dispatch reads (the rounding model's, the engine's, the references',
    sampling's, the generators'); :data:`gradcheck.rules.families.NEEDS` lists what a
    row of each family must fill.

    Columns, each called as ``column(*args, *params)`` through :meth:`call`:

    - ``sympy``: its meaning in SymPy. Elementwise and comparison rows get SymPy
      scalars; the rows of every other family NumPy *object* arrays of SymPy scalars
      (NumPy supplies broadcasting, matmul and axes). The symbolic reference
      differentiates what this builds, so derivatives come from SymPy's calculus, never
      from this table.
    - ``numpy``: its float forward on NumPy arrays (finite differences differentiate it;
      sampling evaluates it to find kinks and singularities; the engine runs it).
    - ``torch``: the same operation in PyTorch, as a user would write it.
    - ``hazard``: distance of the arguments to the nearest kink or singularity (zero of
      a denominator, edge of the domain, switch of a branch), or ``None`` where the
      operation is smooth everywhere. Points are sampled away from these.
    - ``selector``: for a reduction that picks one element (max, min): the one-hot mask
      of the picked element from float values; the ``sympy`` column then also gets that
      one-hot array and means "the selected element" (exact wherever the pick is locally
      constant; SymPy's own ``Max`` of many arguments compiles far too slowly).
    - ``shape``: the result's shape from the arguments' shapes (raises ShapeError).
    - ``engine``: an :class:`EngineRule` (PyTorch's grad_fn name and one VJP per argument).
    - ``tensor``: a :class:`TensorRule` (every family but elementwise and comparison:
      the exact tensor-level adjoint the tensor-level reference uses; elementwise rows
      need none, SymPy differentiates their ``sympy`` column).

    Data: ``params`` (keyword parameters with defaults), ``symbol`` (the operator that
    spells the row, ``None`` for a function called by name), ``domain`` (per argument,
    where the row is defined: a name of :data:`DOMAINS` or an open interval; empty: real
    everywhere), ``grows`` (its value grows exponentially with its argument, or has
    poles, so formula generators bound the argument first), ``exponential`` (its SymPy
    form goes through exp(±argument): sampling bounds the argument of extreme points by
    ln of the dtype's range), ``periodic`` (extreme points keep its argument within a
    reach of 0), ``numbers`` (torch's operator and Scalar
    overloads take a Python number as it is, rather than a 0-d tensor), ``rounding``
    (units of the unit roundoff its result is rounded by beyond its arguments' errors,
    see :mod:`gradcheck.bounds.model`: 0 exact, 1 correctly rounded arithmetic, 2 a library
    function; a reduction's accumulation is counted apart; an elementwise row whose
    formula may cancel: its :class:`gradcheck.rules.terms.Terms`; a composite row: its
    own bound, a :class:`gradcheck.rules.composite.bounds.Bound`), ``variadic`` (the row takes
    any number of operands, at least ``arity``: ``"list"``, as one list argument,
    ``concat([a, b], axis=0)``; ``"star"``, after its ``text`` parameters,
    ``einsum("ij,jk->ik", a, b)``; ``None``: exactly ``arity`` operands), ``keeps_dtype``
    (a layout row: an integer or boolean operand 0 gives a result of its dtype),
    ``stops_gradient`` (detach: value kept, derivative zero), ``example``
    (a formula using the row over the inputs of :data:`gradcheck.formula.docs.EXAMPLE_INPUTS`,
    shown by ``gradcheck functions`` and docs/functions.md; empty: the row applied to ``x``).
    """

    name: str
    family: str                     # one of FAMILIES
    arity: int                      # operands (a variadic row: the fewest it takes)
    sympy: Callable[..., Any]
    numpy: Callable[..., Any]
    torch: Callable[..., Any]
    hazard: Callable[..., Any] | None = None
    selector: Callable[..., Any] | None = None
    engine: EngineRule | None = None
    tensor: TensorRule | None = None
    doc: str = ""
    rounding: float = 2.0
    params: tuple[Param, ...] = ()
    symbol: str | None = None
    domain: tuple[Any, ...] = ()
    grows: bool = False
    exponential: bool = False
    periodic: bool = False
    numbers: bool = False
    shape: Callable[..., tuple[int, ...]] | None = field(default=None, compare=False)
    variadic: str | None = None
    example: str = ""
    # a layout row (it moves, copies or picks operand 0's elements, computing none): an
    # integer or boolean operand 0 keeps its dtype through it (a mask[:, None] stays a
    # mask, idx[:, None] indices), as in PyTorch
    keeps_dtype: bool = False
    # a stop-gradient (detach): its value its operand's, its derivative zero; the
    # reference's SymPy function has fdiff 0, torch detaches, the engine records no
    # node, finite differences hold its value at the unmoved point, the rounding model
    # hands its operand's error on
    stops_gradient: bool = False
    # a structural row whose VJP adds the cotangents of repeated indices one at a time
    # in the dtype (take, gather: PyTorch's index_add_/scatter_add_ backward), rather
    # than summing them in an accumulator and rounding once (expand's sum_to_size)
    scatters: bool = False
    # how the row is printed (explain, reports' formulas): by its name, and its
    # derivative with respect to each operand as these formulas of the language over
    # its operands (x; a, b), in the rows' own spelling. For a row whose sympy meaning
    # is a numerically stable rewriting (a Piecewise, exp(-|w|)), which SymPy would
    # print, and differentiate, as that rewriting; a function of the parameters where
    # they change it (gelu's approximate). Only printing reads it
    # (gradcheck.reference.shown): what is computed is the sympy column's
    shown: tuple[str, ...] | Callable[..., tuple[str, ...]] = ()

    def __post_init__(self):
        if self.engine is not None and self.engine.op != self.name:
            object.__setattr__(self, "engine", replace(self.engine, op=self.name))
        if self.shape is None:
            object.__setattr__(self, "shape", _default_shape(self.family))

    @property
    def differentiable(self) -> bool:
        """Whether gradient flows through the row at all: not through a stop-gradient,
        nor where PyTorch records no node (``engine.grad_fn`` None: the comparisons and
        logical rows, one_hot); a path through such a row carries no gradient."""
        return (not self.stops_gradient and self.engine is not None
                and self.engine.grad_fn is not None)

    # ------------------------------------------------------------------ calling
    def bind(self, shapes: list[tuple[int, ...]],
             given: Mapping[str, Any] | None = None) -> tuple[tuple[str, Any], ...]:
        """The row's parameters for arguments of ``shapes``: ``given`` values (or the
        defaults), normalised, as (name, value) pairs in the row's order.

        Raises:
            ShapeError: a value does not fit (an axis out of range, a wrong type).
            TypeError: ``given`` names a parameter the row does not have.
        """
        given = dict(given or {})
        unknown = set(given) - {p.name for p in self.params}
        if unknown:
            raise TypeError(f"{self.name}() got an unexpected keyword "
                            f"{sorted(unknown)[0]!r}")
        return tuple((p.name, p.normalize(given.get(p.name, p.default), shapes))
                     for p in self.params)

    def call(self, column: str, args, params=(), *extra):
        """Column ``column`` applied to ``args`` and the parameter values ``params``
        (the pairs of :meth:`bind`), then ``extra`` (the sympy column of a selector row
        takes the one-hot mask)."""
        return getattr(self, column)(*args, *param_values(params), *extra)

    def engine_vjp(self, k: int):
        """The engine column's VJP of argument ``k``, ``f(g, ans, *args, *params)`` (or
        None). A variadic row has one VJP for every operand, taking the operand's
        position first (``concat``'s k-th cotangent is the k-th piece of ``g``)."""
        return _at(self.engine.vjps, k, self.variadic)

    def vjp(self, k: int, g, ans, args, params=()):
        """The engine column's cotangent of argument ``k``."""
        return self.engine_vjp(k)(g, ans, *args, *param_values(params))

    def tensor_vjp(self, k: int, b, g, ans, args, params=()):
        """The tensor column's cotangent of argument ``k`` (built with ``b``); None where
        the row has none."""
        f = _at(self.tensor.vjps, k, self.variadic)
        return None if f is None else f(b, g, ans, *args, *param_values(params))

    def grad_fn_name(self, args, params=()) -> str | None:
        """PyTorch's name for the node this row records on ``args``."""
        name = self.engine.grad_fn
        return name(*args, *param_values(params)) if callable(name) else name

    def result_shape(self, shapes: list[tuple[int, ...]], params=()) -> tuple[int, ...]:
        return tuple(self.shape(*shapes, *param_values(params)))

    def keywords(self, params=()) -> list[str]:
        """The parameter pairs as a user writes them: an axis always (an int for one
        axis, as it was normalised), the others where they differ from the default;
        ``text`` parameters are written first, as positional strings (einsum's)."""
        kinds = {p.name: p for p in self.params}
        out = []
        for name, value in params:
            p = kinds[name]
            if p.kind == KEY:
                out.append(keys.text(value))
            elif p.kind == AXIS:
                out.append(f"{name}={value[0] if len(value) == 1 else value}")
            elif p.kind == TEXT:
                out.insert(0, _literal(value))
            elif value != p.default:
                out.append(f"{name}={_literal(value)}")
        return out

    def spell(self, operands, keywords=()) -> str:
        """The row applied to operand texts, as a formula is written: by name with the
        ``keywords`` (``sum(x, axis=1)``, a list row's operands in one list,
        ``concat([a, b], axis=0)``), or by its operator (``-a``, ``a + b``); the caller
        parenthesises operands an operator needs parenthesised. A ``key`` parameter's
        subscript follows: ``split(x, [2, 3])[0]``, and for a row of a key alone the
        operand, parenthesised unless it is a name: ``x[0, 1:3]``, ``(a + b)[0]``."""
        subscript = "".join(k for k in keywords if k.startswith("["))
        if subscript:
            keywords = [k for k in keywords if not k.startswith("[")]
            if all(p.kind == KEY for p in self.params):
                base = operands[0]
                return (base if base.isidentifier() else f"({base})") + subscript
            return self.spell(operands, keywords) + subscript
        if self.symbol is None:
            texts = [f"[{', '.join(operands)}]"] if self.variadic == "list" else operands
            if self.variadic == "star":
                lead = [k for k in keywords if k.startswith('"')]
                keywords = [*lead, *(k for k in keywords if not k.startswith('"'))]
                texts, keywords = [*lead, *operands], keywords[len(lead):]
            return f"{self.name}({', '.join([*texts, *keywords])})"
        if len(operands) == 1:
            return self.symbol + operands[0]
        return f" {self.symbol} ".join(operands)

    def domain_of(self, k: int):
        """The domain of argument ``k`` ("real" when the row does not restrict it)."""
        return self.domain[k] if k < len(self.domain) else "real"


def _at(vjps: tuple, k: int, variadic: str | None):
    """The k-th of a column's VJPs; a variadic row's one VJP with ``k`` bound first."""
    if not variadic:
        return vjps[k]
    f = vjps[min(k, len(vjps) - 1)]
    return None if f is None else functools.partial(f, k)


def _literal(value: Any) -> str:
    """A parameter value as formula text: tuples as lists, strings double-quoted."""
    if isinstance(value, tuple):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    if isinstance(value, str):
        return '"' + value + '"'
    return str(value)


def param_values(params) -> tuple:
    """The values of (name, value) pairs, in the row's order (as :meth:`Rule.bind` and
    ``Node.params`` hold them)."""
    return tuple([v for _, v in params]) if params else ()
