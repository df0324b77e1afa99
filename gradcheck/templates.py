"""How each row of the rule table is spelled in a drawn formula: templates derived from
the row's data (arity, domain, growth, operator symbol, parameters), hand-written only
for the few rows the data cannot describe. :mod:`gradcheck.strategies` draws formulas
from these; a new row gets its templates here without an edit. No Hypothesis needed.
"""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple, Sequence

from .rules import AXIS, BOOL, COMPARISON, ELEMENTWISE, REDUCTION, RULES, Rule

__all__ = ["Template", "TEMPLATES", "SPECIAL", "into_domain"]


class Template(NamedTuple):
    """One way to apply a row: ``text`` with ``{0}``, ``{1}``... for its operands. Group
    ``unary``/``binary``: elementwise, every operand drawn; ``reduce``: one operand;
    ``linalg``: ``{0}`` is drawn, the others are inputs of a fitting shape. ``needs``:
    rows beyond the row itself and the guards (``add``, ``mul``, ``pow``, ``tanh``,
    ``sigmoid``) that the text applies."""

    row: str
    group: str
    text: str
    needs: frozenset[str] = frozenset()


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
    small constant (the i-th number parameter -0.5 + i, so a min stays below a max); at
    least one number is given (clamp() without min or max is the identity, which torch
    refuses)."""
    options, numbers = [], []
    for p in rule.params:
        if p.kind == AXIS:
            options.append([f"{p.name}=-1", ""])
        elif p.kind == BOOL:
            options.append(["", f"{p.name}={not p.default}"])
        else:
            numbers.append(len(options))
            options.append([f"{p.name}={_num(-0.5 + len(numbers) - 1)}", ""])
    return [tuple(o for o in combo if o) for combo in itertools.product(*options)
            if not numbers or any(combo[i] for i in numbers)]


def _derived(rule: Rule) -> tuple[Template, ...]:
    """The templates of a row from its data: arity, domain, growth, spelling, params."""
    variants = _keywords(rule)
    if rule.kind in (ELEMENTWISE, REDUCTION):
        group = ("reduce" if rule.kind == REDUCTION else
                 "unary" if rule.arity == 1 else "binary")
        operands = [_operand(rule, k, f"{{{k}}}") for k in range(rule.arity)]
        return tuple(Template(rule.name, group, _spell(rule, operands, kw))
                     for kw in variants)
    # linear algebra: the drawn operand {0} in each position, inputs {1}... elsewhere
    out = []
    for k in range(rule.arity):
        others = iter(range(1, rule.arity))
        operands = ["{0}" if j == k else f"{{{next(others)}}}" for j in range(rule.arity)]
        bare = [j for j in range(rule.arity) if j != k]
        out += [Template(rule.name, "linalg", _spell(rule, operands, kw, bare))
                for kw in variants]
    return tuple(out)


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
        # where's condition is a comparison (each row of the table's comparisons); its
        # branches are inputs, so that the condition decides between real values.
        "where": tuple(Template("where", "binary", "where(" + _spell(c, ["{0}", "{1}"])
                                 + ", {2}, {3})", frozenset({c.name}))
                       for c in sorted(RULES.values(), key=lambda c: c.name != "gt")
                       if c.kind == COMPARISON),
        # matmul also takes a transposed input (x @ transpose(W), the common layer).
        "matmul": _derived(RULES["matmul"]) + (Template(
            "matmul", "linalg", "({0}) @ transpose({1})", frozenset({"transpose"})),),
    }


#: The rows whose templates are written by hand (see _special).
SPECIAL = _special()
#: Every row's templates, in the table's order (comparisons come with where).
TEMPLATES = {name: SPECIAL.get(name) or _derived(rule) for name, rule in RULES.items()
              if rule.kind != COMPARISON}
