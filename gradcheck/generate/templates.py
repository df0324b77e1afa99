"""How each row of the rule table is spelled in a drawn formula: templates derived from
the row's data (arity, domain, growth, operator symbol, parameters), hand-written only
for the few rows the data cannot describe. :mod:`gradcheck.strategies` draws formulas
from these; a new row gets its templates here without an edit. No Hypothesis needed.
"""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple, Sequence

from ..rules import (AXIS, BOOL, CHOICE, COMPARISON, COMPOSITE, ELEMENTWISE, INT, NUMBER, REDUCTION,
                     RULES, STRUCTURE, Rule)
from .structure_templates import structural_texts

__all__ = ["Template", "TEMPLATES", "TEMPLATE_INPUTS", "SPECIAL", "into_domain"]


class Template(NamedTuple):
    """One way to apply a row: ``text`` with ``{0}``, ``{1}``... for its operands. Group
    ``unary``/``binary``: elementwise, every operand drawn; ``reduce``: one operand;
    ``linalg`` and ``structure`` (reshape, x[...], concat...): ``{0}`` is drawn, the
    others are inputs of a fitting shape. ``needs``:
    rows beyond the row itself and the guards (``add``, ``mul``, ``pow``, ``tanh``,
    ``sigmoid``) that the text applies. ``inputs``: (name, shape) of small inputs the
    template's other operands may also be, where the drawn inputs have too few
    dimensions (a convolution's image and kernel: :data:`TEMPLATE_INPUTS`)."""

    row: str
    group: str
    text: str
    needs: frozenset[str] = frozenset()
    inputs: tuple[tuple[str, tuple[int, ...]], ...] = ()


def _num(value: float) -> str:
    return f"{value:.6g}"


def _affine(mid: float, reach: float, text: str) -> str:
    scaled = f"{_num(reach)} * tanh({text})"
    return scaled if mid == 0 else f"{_num(mid)} + {scaled}"


def into_domain(rule: Rule, k: int, text: str) -> str:
    """The text of a real operand ``text`` mapped into the domain of argument ``k`` of
    ``rule`` (:meth:`gradcheck.rules.Rule.domain_of`), through the guards only:
    ``positive``, ``nonnegative``, ``nonzero``: ``1 + (a)**2``; ``unit``:
    ``0.9 * tanh(a)``; an interval ``(lo, inf)``: ``lo + 0.5 + (a)**2``; ``(-inf, hi)``:
    ``hi - 0.5 + -1 * (a)**2``; a bounded ``(lo, hi)``: its middle plus 0.9 of its half-width
    times ``tanh(a)``; ``real``: ``text`` itself.

    >>> from gradcheck.rules import RULES
    >>> into_domain(RULES["acosh"], 0, "x"), into_domain(RULES["div"], 1, "y")
    ('1.5 + (x)**2', '1 + (y)**2')
    """
    domain = rule.domain_of(k)
    if domain == "real":
        return text
    if domain in ("positive", "nonnegative", "nonzero"):
        return f"1 + ({text})**2"
    if domain == "unit":
        return f"0.9 * tanh({text})"
    if not (isinstance(domain, tuple) and len(domain) == 2):
        raise ValueError(f"{rule.name}: unknown domain {domain!r} of argument {k}")
    lo, hi = (float(v) for v in domain)
    if math.isinf(lo) and math.isinf(hi):
        return text
    if math.isinf(hi):
        return f"{_num(lo + 0.5)} + ({text})**2"
    if math.isinf(lo):
        return f"{_num(hi - 0.5)} + -1 * ({text})**2"
    return _affine((lo + hi) / 2, 0.9 * (hi - lo) / 2, text)


def _operand(rule: Rule, k: int, text: str) -> str:
    """Argument ``k`` of ``rule``: in its domain, and bounded first when the row grows
    (``exp(tanh(a))``; on a bounded interval, within 0.5 of its middle: ``tan`` stays
    below 1 in magnitude, so that nesting cannot overflow)."""
    domain = rule.domain_of(k)
    if rule.grows and isinstance(domain, tuple) and all(map(math.isfinite, domain)):
        lo, hi = (float(v) for v in domain)
        return _affine((lo + hi) / 2, min(0.9 * (hi - lo) / 2, 0.5), text)
    if rule.grows and domain != "unit":
        text = f"tanh({text})"
    return into_domain(rule, k, text)


def _spell(rule: Rule, operands: Sequence[str], keywords: Sequence[str] = (),
           bare: Sequence[int] = ()) -> str:
    """``rule`` applied to operand texts: called by name, or by its operator with the
    operands in parentheses (but those at the positions ``bare``: input names)."""
    if rule.symbol is None:
        return rule.spell(operands, keywords)
    return rule.spell([o if k in bare else f"({o})" for k, o in enumerate(operands)])


def _keywords(rule: Rule) -> list[tuple[str, ...]]:
    """Every drawn combination of the row's parameters, as ``name=value`` texts: an axis
    is the last one or (omitted) all, a bool its default or not, a number omitted or a
    small constant (the i-th number parameter -0.5 + i, so a min stays below a max), a
    choice its default or another; at least one number is given where every number's
    default is None (clamp() without min or max is the identity, which torch
    refuses)."""
    options, numbers = [], []
    for p in rule.params:
        if p.kind == AXIS:
            options.append([f"{p.name}=-1", ""])
        elif p.kind == BOOL:
            options.append(["", f"{p.name}={not p.default}"])
        elif p.kind == CHOICE:   # the default, or each other choice
            options.append(["", *(f'{p.name}="{c}"' for c in p.choices if c != p.default)])
        elif p.kind == INT:      # the default, or one more or less (topk's k=2, var's
            options.append(["", *(f"{p.name}={v}" for v in (p.default + 1, p.default - 1)
                                  if v >= 0)])      # correction=0)
        elif p.kind == NUMBER and p.choices:   # the default, or each other value listed
            options.append(["", *(f"{p.name}={_num(c)}" for c in p.choices
                                  if c != p.default)])
        else:
            numbers.append(len(options))
            options.append([f"{p.name}={_num(-0.5 + len(numbers) - 1)}", ""])
    needed = all(p.default is None for p in rule.params if p.kind == NUMBER)
    return [tuple(o for o in combo if o) for combo in itertools.product(*options)
            if not (numbers and needed) or any(combo[i] for i in numbers)]


def _derived(rule: Rule) -> tuple[Template, ...]:
    """The templates of a row from its data: arity, domain, growth, spelling, params."""
    if rule.family == STRUCTURE:   # (from its example and its parameters' kinds; indices
        # from the templates' own integer inputs)
        own = (("at", TEMPLATE_INPUTS["at"]), ("at2", TEMPLATE_INPUTS["at2"])) if \
            "integer" in rule.domain else ()
        return tuple(Template(rule.name, "structure", text, inputs=own)
                     for text in structural_texts(rule))
    variants = _keywords(rule)
    # (a composite row takes one operand along an axis, as a reduction: einsum's and
    # one_hot's templates are written by hand)
    if rule.family in (ELEMENTWISE, REDUCTION, COMPOSITE):
        group = ("reduce" if rule.family in (REDUCTION, COMPOSITE) else
                 "unary" if rule.arity == 1 else "binary")
        operands = [_operand(rule, k, f"{{{k}}}") for k in range(rule.arity)]
        return tuple(Template(rule.name, group, _spell(rule, operands, kw))
                     for kw in variants)
    # bilinear and pooling rows: the drawn operand {0} in each position, inputs {1}...
    # elsewhere
    out = []
    for k in range(rule.arity):
        others = iter(range(1, rule.arity))
        operands = ["{0}" if j == k else f"{{{next(others)}}}" for j in range(rule.arity)]
        bare = [j for j in range(rule.arity) if j != k]
        out += [Template(rule.name, "linalg", _spell(rule, operands, kw, bare))
                for kw in variants]
    return tuple(out)


# Conditions of where over its operands {0} (a formula of an input) and {1}, beyond one
# comparison: each comparison has {0} on a side (a comparison of two constants is
# refused). Equality of floats holds on a set of measure zero (points keep off it): it
# is also drawn between rounded values, equal on whole regions (forward.steady_nodes).
_CONDITIONS = (("(({0}) > ({1})) & (({0}) < 1)", {"gt", "lt", "logical_and"}),
               ("(({0}) < ({1})) | (({0}) > 1)", {"lt", "gt", "logical_or"}),
               ("~(({0}) > ({1}))", {"gt", "logical_not"}),
               ("~((({0}) <= ({1})) & ~(({0}) >= 0.5))", {"le", "ge", "logical_and",
                                                         "logical_not"}),
               ("round({0}) == round({1})", {"eq", "round"}),
               ("round({0}) != round(2 * ({1}))", {"ne", "round"}))


def _conditions() -> list[tuple[str, set[str]]]:
    """where's conditions: each comparison row (gt first: the shrinker's choice), then
    :data:`_CONDITIONS`."""
    logical = {"logical_and", "logical_or", "logical_not"}
    single = [(_spell(c, ["{0}", "{1}"]), {c.name})
              for c in sorted(RULES.values(), key=lambda c: c.name != "gt")
              if c.family == COMPARISON and c.name not in logical]
    return single + [(text, needs) for text, needs in _CONDITIONS if needs <= set(RULES)]


_EINSUMS = (("ij,jk->ik", "{0}, {1}"), ("ij,jk->ik", "{1}, {0}"), ("ij,j->i", "{0}, {1}"),
            ("i,i->", "{0}, {1}"), ("ij,ij->i", "{0}, {1}"), ("i,j->ij", "{0}, {1}"),
            ("ij,kj", "{0}, {1}"), ("...j,j->...", "{0}, {1}"), ("bij,bjk->bik", "{0}, {1}"),
            ("ij->ji", "{0}"), ("ij->j", "{0}"), ("...i->...", "{0}"))


def _special() -> dict[str, tuple[Template, ...]]:
    """Rows whose templates the table's data cannot give (each says why)."""
    return {
        # pow's domain (positive base) is what a drawn real exponent needs, but integer
        # exponents hold for every real base and are the common case; a drawn exponent
        # needs a bounded base, or a power of 1 + a**2 overflows when nested.
        "pow": (Template("pow", "unary", "({0})**2"), Template("pow", "unary", "({0})**3"),
                Template("pow", "unary", "(1 + ({0})**2)**0.5"),
                Template("pow", "binary", "(1.5 + sigmoid({0})) ** ({1})")),
        # sign's derivative is zero wherever it is defined: times its operand, the
        # formula keeps a gradient flowing through the operand (|a|, with sign's node).
        "sign": (Template("sign", "unary", "sign({0}) * ({0})"),),
        # detach alone cuts every path through it: beside its operand, a gradient flows
        # (a straight-through estimator: a value of its own, the gradient a's; and a
        # factor held constant)
        "detach": (Template("detach", "unary", "({0}) + detach(({0}) * ({0}) + ({0}))"),
                   Template("detach", "unary", "({0}) * detach({0})")),
        # where's condition is a comparison (each row of the table's comparisons), or
        # comparisons combined (_CONDITIONS); its branches are inputs, so that the
        # condition decides between real values.
        "where": tuple(Template("where", "binary", f"where({cond}, {{2}}, {{3}})",
                                frozenset(needs)) for cond, needs in _conditions()),
        # masked_fill's mask is where's condition over its operand {0} and a drawn {1}
        "masked_fill": tuple(Template("masked_fill", "binary",
                                      f"masked_fill({{0}}, {cond}, value=-0.5)",
                                      frozenset(needs)) for cond, needs in _conditions()),
        # einsum's subscripts are text its data cannot draw: the common equations (a
        # contraction, a product, a sum, a transpose, with ... and implicitly), the
        # drawn operand {0} on either side.
        "einsum": tuple(Template("einsum", "linalg", f'einsum("{eq}", {ops})')
                        for eq, ops in _EINSUMS),
        # matmul also takes a transposed input (x @ transpose(W), the common layer).
        "matmul": _derived(RULES["matmul"]) + (Template(
            "matmul", "linalg", "({0}) @ transpose({1})", frozenset({"transpose"})),),
    }


# The convolutions and poolings need operands of 3 or 4 dimensions, which the drawn
# inputs rarely have: their templates bring a batch of small signals or images and
# kernels (N = 2, C = 2), which the drawn operand {0} scales or is (a conv's output
# is an image too), so that its gradient flows through the input or the weight.
TEMPLATE_INPUTS: dict[str, tuple[int, ...]] = {
    "seq": (2, 2, 3), "w1": (2, 2, 3), "wg1": (2, 1, 3),
    "img": (2, 2, 2, 3), "k": (2, 2, 2, 3), "kg": (2, 1, 2, 2), "lab": (2,),
    "at": (3,), "at2": (2, 2), "sig": (4, 2)}
#: The template inputs that hold integers (one_hot's class labels; the indices of
#: x[idx], gather and take_along_axis: 0, in range along any axis), as input tables.
TEMPLATE_LABELS: dict[str, dict] = {"lab": {"dtype": "int64", "domain": [0, 3]},
                                    "at": {"dtype": "int64", "domain": [0, 1]},
                                    "at2": {"dtype": "int64", "domain": [0, 1]}}


def template_dtype(name: str) -> str | None:
    """The dtype of a template's own input (None: a float one)."""
    return TEMPLATE_LABELS.get(name, {}).get("dtype")


def template_inputs(used, drawn) -> dict:
    """The case-table entries of the templates' own inputs a formula ``used`` (where no
    ``drawn`` input has their name): a shape, or an integer input's table."""
    return {n: dict(TEMPLATE_LABELS[n], shape=list(s)) if n in TEMPLATE_LABELS else list(s)
            for n, s in TEMPLATE_INPUTS.items() if n in used and n not in drawn}
_WINDOWED = {
    "conv1d": (["seq", "w1", "wg1"], [
        "conv1d({0}, {1}, padding=1)", "conv1d({1} * ({0}), {2}, padding=1)",
        "conv1d({1} * ({0}), {2}, stride=2, padding=2, dilation=2)",
        "conv1d({1}, {2} * ({0}), padding=1)", "conv1d({1} * ({0}), {2}, padding=1, groups=2)"]),
    "conv2d": (["img", "k", "kg"], [
        "conv2d({0}, {1}, padding=1)", "conv2d({1} * ({0}), {2}, padding=1)",
        "conv2d({1} * ({0}), {2}, stride=[1, 2], padding=[1, 2], dilation=[2, 1])",
        "conv2d({1}, {2} * ({0}), padding=1)", "conv2d({1} * ({0}), {2}, padding=1, groups=2)"]),
    **{pool: (["img"], [f"{pool}({{0}}, 2)", f"{pool}({{1}} * ({{0}}), 2, stride=1)",
                        f"{pool}({{1}} * ({{0}}), [1, 3])"])
       for pool in ("avg_pool2d", "max_pool2d")},
}


# one_hot takes integer labels, which only a template's own input holds
_WINDOWED["one_hot"] = (["lab"], ["one_hot({1}, 3) * ({0})"])
# the FFTs are the complex table's (torch.fft's): a complex operand is a signal of 4
# complex values held in the view_as_real layout (sig, a last axis of 2), which the
# drawn inputs rarely have, scaled by {0} and viewed as complex; rfft takes any real
# operand ({0} itself). A complex result is viewed as real again, so that the formula
# stays real where it feeds the other rows
_WINDOWED.update({
    "fft": (["sig"], ["view_as_real(fft(view_as_complex({1} * ({0})), axis=0))",
                      'view_as_real(fft(view_as_complex({1} * ({0})), n=3, axis=0, '
                      'norm="ortho"))']),
    "ifft": (["sig"], ["view_as_real(ifft(view_as_complex({1} * ({0})), axis=0))",
                       'view_as_real(ifft(view_as_complex({1} * ({0})), n=6, axis=0, '
                       'norm="forward"))']),
    "rfft": ([], ["view_as_real(rfft({0}))", 'view_as_real(rfft({0}, n=5, norm="forward"))']),
    "irfft": (["sig"], ["irfft(view_as_complex({1} * ({0})), axis=0)",
                        'irfft(view_as_complex({1} * ({0})), n=5, axis=0, norm="ortho")'])})


def _windowed() -> dict[str, tuple[Template, ...]]:
    return {row: tuple(Template(row, "linalg", text, inputs=tuple(
        (n, TEMPLATE_INPUTS[n]) for n in names)) for text in texts)
        for row, (names, texts) in _WINDOWED.items() if row in RULES}


#: The rows whose templates are written by hand (see _special).
SPECIAL = {**_special(), **_windowed()}
#: Every row's templates, in the table's order (comparisons come with where).
TEMPLATES = {name: SPECIAL.get(name) or _derived(rule) for name, rule in RULES.items()
              if rule.family != COMPARISON}
