"""Safe parser: expression text -> formula DAG (:class:`gradcheck.formula.tree.Node`).

The text is parsed by Python's ``ast`` and the tree is walked under a whitelist; nothing
is ever evaluated (no ``eval``, ``exec`` or ``sympify`` on user text). Size, nesting,
literal magnitude and constant exponents are bounded *before* any work grows with them,
so hostile text fails fast with a :class:`CaseFileError`.
"""

from __future__ import annotations

import ast
import math
from typing import Mapping

from ..base.errors import CaseFileError
from ..rules import (AXIS, BOOL, CHOICE, COMPARISON, FUNCTIONS, INT, INTS, KEY, NUMBER, OPERATORS,
                     RULES, TEXT)
from ..base.shapes import ShapeError
from ..rules.complex import COMPLEX, COMPLEX_ONLY
from .complexes import constant, lower
from .constructors import Constructing, is_constructor
from .suggestions import suggest, suggest_arity, usage as _usage
from .subscripts import subscript
from .tree import Node

MAX_CHARS = 20_000        # characters in one expression
MAX_NODES = 5_000         # syntax nodes in one expression
MAX_DEPTH = 64            # nesting of parentheses and calls
MAX_TREE_DEPTH = 200      # depth of the syntax tree (long operator chains, unary minus)
MAX_LITERAL = 1e15        # magnitude of a number literal
MAX_LITERAL_DIGITS = 40   # characters of a number literal
MAX_EXPONENT = 64         # magnitude of a constant exponent
MAX_CONSTANT = 1e300      # magnitude of any constant subexpression
MAX_ELEMENTS = 10_000_000  # elements of any tensor in the formula (inputs, intermediates)

CONSTANTS = {"pi": math.pi, "E": math.e}   # names usable in a formula, and their floats

# Python's operator syntax -> the spelling the rule table's rows carry (Rule.symbol).
_SYMBOLS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**",
            ast.MatMult: "@", ast.USub: "-", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">",
            ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=", ast.BitAnd: "&", ast.BitOr: "|",
            ast.Invert: "~"}
# Python binds & | ~ tighter than comparisons: x > 0 & y < 1 is x > (0 & y) < 1.
_PARENTHESISE = ("& | ~ bind tighter than comparisons: parenthesise each comparison, "
                 "as in (x > 0) & (y < 1) or ~(x > 0)")
_FLOAT_OPS = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b,
              "mul": lambda a, b: a * b, "div": lambda a, b: a / b,
              "pow": lambda a, b: a ** b, "neg": lambda a: -a}


class _Fail(Exception):
    """Raised inside the walk with the offending syntax node, located by the caller."""

    def __init__(self, message: str, node: ast.AST | None = None):
        super().__init__(message)
        self.node = node


def _nesting_depth(text: str) -> int:
    depth = best = 0
    for ch in text:
        if ch in "([{":
            depth += 1
            best = max(best, depth)
        elif ch in ")]}":
            depth -= 1
    return best


def _number_literal_too_long(text: str) -> bool:
    run = 0
    for ch in text:
        if ch.isdigit() or ch in "._":
            run += 1
            if run > MAX_LITERAL_DIGITS:
                return True
        else:
            run = 0
    return False


def parse(text: str, names: Mapping[str, Node], *, file: str | None = None,
          case: str | None = None, line: int | None = None) -> Node:
    """Parse ``text`` into a formula over the nodes in ``names`` (inputs and ``let``s).

    Args:
        text: the expression, e.g. ``"sum(tanh(x @ W + b)**2, axis=1)"``.
        names: the names the expression may use, each bound to its node.
        file, case, line: where the expression comes from, for error messages
            (``line`` is the line of the expression's first character).

    Raises:
        CaseFileError: the text is not a valid, bounded expression over ``names``.
    """

    def fail(message: str, lineno: int | None = None) -> CaseFileError:
        at = line if lineno is None or line is None else line + lineno - 1 + skipped
        return CaseFileError(message, file=file, case=case, line=at)

    skipped = 0  # lines before the first non-blank one (removed by strip below)
    if not isinstance(text, str):
        raise fail(f"an expression must be a string, not {type(text).__name__}")
    if len(text) > MAX_CHARS:
        raise fail(f"expression is {len(text)} characters long; the limit is {MAX_CHARS}")
    if not text.strip():
        raise fail("expression is empty")
    if _nesting_depth(text) > MAX_DEPTH:
        raise fail(f"expression nests deeper than {MAX_DEPTH} levels")
    if _number_literal_too_long(text):
        raise fail(f"a number literal is longer than {MAX_LITERAL_DIGITS} characters")
    stripped = text.strip()
    skipped = text[: len(text) - len(text.lstrip())].count("\n")
    try:
        tree = ast.parse(stripped, mode="eval")
    except SyntaxError as exc:
        raise fail(f"invalid syntax: {exc.msg}", exc.lineno) from None
    except RecursionError:
        raise fail(f"expression nests deeper than {MAX_TREE_DEPTH} operations; "
                   "split it with let names") from None
    except (ValueError, MemoryError) as exc:
        raise fail(f"expression cannot be parsed: {exc}") from None
    count = 0
    stack = [(tree.body, 1)]
    while stack:  # iterative: the bound must hold before anything recurses
        node, depth = stack.pop()
        count += 1
        if count > MAX_NODES:
            raise fail(f"expression has more than {MAX_NODES} syntax nodes")
        if depth > MAX_TREE_DEPTH:
            raise fail(f"expression nests deeper than {MAX_TREE_DEPTH} operations; "
                       "split it with let names")
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    try:
        return _Builder(names).build(tree.body)
    except _Fail as exc:
        raise fail(str(exc), getattr(exc.node, "lineno", None)) from None


class _Builder:
    """Turns whitelisted syntax into nodes. Depth is bounded above, so recursion is safe."""

    max_exponent = MAX_EXPONENT

    def __init__(self, names: Mapping[str, Node]):
        self.names = names
        self.parts: dict[int, list] = {}   # a complex node's real and imaginary parts

    # ------------------------------------------------------------------ node making
    def apply(self, op: str, args: list[Node], syntax: ast.AST,
              given: dict | None = None) -> Node:
        """The row ``op`` on ``args``; on a complex operand, lowered to real rows by
        the row of the complex table (:mod:`.complexes`)."""
        if any(a.complex for a in args):
            return lower(self, op, args, syntax, given or {}, _Fail)
        return self.apply_row(op, args, syntax, given)

    def apply_row(self, op: str, args: list[Node], syntax: ast.AST,
                  given: dict | None = None) -> Node:
        rule = RULES[op]
        shapes = [a.shape for a in args]
        try:
            params = rule.bind(shapes, given)
            shape = rule.result_shape(shapes, params)
        except ShapeError as exc:
            raise _Fail(f"{op}: {exc}", syntax) from None
        for k, a in enumerate(args):   # an operand taken as integer labels (one_hot's)
            if rule.domain_of(k) == "integer" and a.dtype not in ("int64", "int32"):
                raise _Fail(f"{op}: takes an integer input (dtype int64) as operand "
                            f"{k + 1}", syntax)
        if math.prod(shape) > MAX_ELEMENTS:
            raise _Fail(f"{op}: result of shape {list(shape)} has {math.prod(shape)} "
                        f"elements; the limit is {MAX_ELEMENTS}", syntax)
        const = None
        if all(a.const is not None for a in args) and op in _FLOAT_OPS:
            const = self.fold_constant(op, [a.const for a in args], syntax)
        if op == "pow" and args[1].const is not None and abs(args[1].const) > MAX_EXPONENT:
            raise _Fail(f"constant exponent {args[1].const:g} exceeds {MAX_EXPONENT} in "
                        "magnitude", syntax)
        # a layout row keeps an integer or boolean operand's dtype (mask[:, None])
        dtype = args[0].dtype if rule.keeps_dtype and args else None
        return Node(op, tuple(args), shape, params=params, const=const, dtype=dtype)

    @staticmethod
    def fold_constant(op: str, values: list[float], syntax: ast.AST) -> float:
        if op == "pow" and abs(values[1]) > MAX_EXPONENT:
            raise _Fail(f"constant exponent {values[1]:g} exceeds {MAX_EXPONENT} in "
                        "magnitude", syntax)
        try:
            value = _FLOAT_OPS[op](*values)
        except (OverflowError, ZeroDivisionError) as exc:
            raise _Fail(f"constant subexpression fails: {exc}", syntax) from None
        if isinstance(value, complex) or not math.isfinite(value) or abs(value) > MAX_CONSTANT:
            raise _Fail("constant subexpression is out of range", syntax)
        return float(value)

    # ------------------------------------------------------------------ the walk
    def build(self, node: ast.AST) -> Node:
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is None:
            raise _Fail(f"{_describe(node)} is not allowed in an expression", node)
        return method(node)

    def visit_Constant(self, node: ast.Constant) -> Node:
        value = node.value
        if isinstance(value, complex):   # 2j: a complex constant
            if not math.isfinite(abs(value)) or abs(value) > MAX_LITERAL:
                raise _Fail(f"number literal exceeds {MAX_LITERAL:g} in magnitude", node)
            return constant(self, value, node, _Fail)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _Fail(f"literal {value!r} is not a number", node)
        if not math.isfinite(value) or abs(value) > MAX_LITERAL:
            raise _Fail(f"number literal exceeds {MAX_LITERAL:g} in magnitude", node)
        text = repr(value) if isinstance(value, float) else str(value)
        return Node("const", exact=text, const=float(value))

    def visit_Name(self, node: ast.Name) -> Node:
        if node.id in self.names:
            return self.names[node.id]
        if node.id in CONSTANTS:
            return Node("const", exact=node.id, const=CONSTANTS[node.id])
        if node.id in FUNCTIONS:
            raise _Fail(f"{node.id} is a function; call it as {_usage(node.id)}", node)
        known = ", ".join(sorted(self.names)) or "none"
        hint = suggest(node.id, [*self.names, *CONSTANTS], "")
        raise _Fail(f"unknown name {node.id!r} (declared inputs and let names: {known})"
                    f"{hint}", node)

    def visit_BinOp(self, node: ast.BinOp) -> Node:
        op = OPERATORS.get((_SYMBOLS.get(type(node.op)), 2))
        if op is None:
            raise _Fail(f"operator {_describe(node.op)} is not allowed", node)
        if RULES[op].family == COMPARISON:   # & and |
            raise _Fail(f"{_SYMBOLS[type(node.op)]} combines conditions, only in the "
                        "condition of where(): where((x > 0) & (y < 1), a, b)", node)
        return self.apply(op, [self.build(node.left), self.build(node.right)], node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Node:
        if isinstance(node.op, ast.UAdd):
            return self.build(node.operand)
        if isinstance(node.op, ast.USub):
            operand = self.build(node.operand)
            if operand.op == "const":
                text = operand.exact
                text = text[1:] if text.startswith("-") else "-" + text
                return Node("const", exact=text, const=-operand.const)
            return self.apply(OPERATORS["-", 1], [operand], node)
        if isinstance(node.op, ast.Invert):
            raise _Fail("~ negates a condition, only in the condition of where(): "
                        "where(~(x > 0), a, b)", node)
        raise _Fail(f"operator {_describe(node.op)} is not allowed", node)

    def visit_Compare(self, node: ast.Compare) -> Node:
        raise _Fail("a comparison may only be the condition of where(cond, a, b)", node)

    def condition(self, node: ast.AST, what: str = "first argument of where()") -> Node:
        mask = self.names.get(node.id) if isinstance(node, ast.Name) else None
        if mask is not None and mask.dtype is not None:
            # a boolean or integer input (or let) as the mask, nonzero meaning true: the
            # comparison mask != 0, which torch.where takes (it refuses integer masks)
            return self.apply("ne", [mask, Node("const", exact="0", const=0.0)], node)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitAnd, ast.BitOr)):
            parts = [self.condition(node.left, what), self.condition(node.right, what)]
            return self.apply(OPERATORS[_SYMBOLS[type(node.op)], 2], parts, node)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert):
            return self.apply(OPERATORS["~", 1], [self.condition(node.operand, what)], node)
        if isinstance(getattr(node, "op", None), (ast.And, ast.Or, ast.Not)):
            raise _Fail("conditions combine with & | ~, not and/or/not: (x > 0) & (y < 1)",
                        node)
        if not isinstance(node, ast.Compare):
            raise _Fail(f"the {what} must be a comparison such as x > 0, "
                        "or comparisons combined: (x > 0) & (y < 1)", node)
        if any(_SYMBOLS.get(type(getattr(p, "op", None))) in ("&", "|", "~")
               for p in [node.left, *node.comparators]):
            raise _Fail(_PARENTHESISE, node)
        if len(node.ops) != 1:
            raise _Fail("chained comparisons are not allowed; write (0 < x) & (x < 1)", node)
        op = OPERATORS.get((_SYMBOLS.get(type(node.ops[0])), 2))
        if op is None or RULES[op].family != COMPARISON:
            raise _Fail(f"comparison {_describe(node.ops[0])} is not allowed; use == != < <= "
                        "> >=", node)
        args = [self.build(node.left), self.build(node.comparators[0])]
        if all(a.const is not None for a in args):
            raise _Fail("the condition compares two constants; it never changes", node)
        return self.apply(op, args, node)

    def visit_List(self, node: ast.List) -> Node:   # [[0, -1], [1, 0]]: .constructors
        return Constructing(self, _Fail).literal(node)

    def visit_Subscript(self, node: ast.Subscript) -> Node:
        return subscript(self, node, _Fail)   # x[0, 1:3], split(...)[0]: see .subscripts

    def visit_Call(self, node: ast.Call, piece: dict | None = None) -> Node:
        if not isinstance(node.func, ast.Name):
            raise _Fail(f"only functions of the rule table can be called, not "
                        f"{_describe(node.func)}", node)
        fname = node.func.id
        if is_constructor(fname):   # ones([3, 4]), eye(4), arange(5): see .constructors
            return Constructing(self, _Fail).call(fname, node)
        if fname in COMPLEX_ONLY:   # conj(z), fft(z): lowered whatever the operands
            row = COMPLEX[fname]
            operands, positional = _split_arguments(row, node)
            return lower(self, fname, [self.build(a) for a in operands], node,
                         self.parameters(row, node, positional), _Fail)
        if fname not in FUNCTIONS:
            raise _Fail(f"unknown function {fname!r}{suggest(fname)}", node)
        rule = RULES[fname]
        if piece is None and any(p.kind == KEY for p in rule.params):   # split(...)[0]
            raise _Fail(f"{fname}() is written with a subscript: {rule.example}", node)
        if any(isinstance(a, ast.Starred) for a in node.args) or any(
                k.arg is None for k in node.keywords):
            raise _Fail("* and ** arguments are not allowed", node)
        operands, positional = _split_arguments(rule, node)
        at = CONDITION_AT.get(fname)
        what = f"{('first', 'second')[at or 0]} argument of {fname}()"
        args = [self.condition(a, what) if k == at else self.build(a)
                for k, a in enumerate(operands)]
        if any(a.op in RULES and RULES[a.op].family == COMPARISON
               for k, a in enumerate(args) if k != at):
            raise _Fail("a comparison may only be the condition of where() or "
                        "masked_fill()", node)
        given = self.parameters(rule, node, positional)
        return self.apply(fname, args, node, {**given, **(piece or {})})

    @staticmethod
    def parameters(rule, node: ast.Call, positional: list[ast.AST]) -> dict:
        """The row's parameters given in the call, read as literals: ``positional`` (the
        arguments after the operands) bind to the parameters in the row's order, as
        Python binds them, then the keywords."""
        names = [p.name for p in rule.params]
        kinds = {p.name: p.kind for p in rule.params}
        given: dict = {}
        for k, (name, value) in enumerate(zip(names, positional)):
            if not _is_literal(value):   # a tensor where a parameter goes: max(x, y)
                n = rule.arity + k + 1
                raise _Fail(f"{rule.name}() takes {rule.arity} tensor argument"
                            f"{'s' if rule.arity != 1 else ''}, then its parameters "
                            f"{', '.join(names)}; argument {n} is not a literal"
                            f"{suggest_arity(rule.name, n)}", value)
            given[name] = _LITERALS[kinds[name]](value, name)
        for kw in node.keywords:
            if kw.arg not in kinds:
                allowed = " and ".join(f"{n}=" for n in names) or "none"
                raise _Fail(f"{rule.name}() got an unexpected keyword {kw.arg!r} "
                            f"(keywords allowed: {allowed}){suggest(kw.arg, names, '=')}",
                            kw.value)
            if kw.arg in given:
                raise _Fail(f"{rule.name}() got {kw.arg}= twice", kw.value)
            given[kw.arg] = _LITERALS[kinds[kw.arg]](kw.value, kw.arg)
        return given


#: The rows that take a condition (a comparison, comparisons combined, a boolean or
#: integer input), and its position among their operands.
CONDITION_AT = {"where": 0, "masked_fill": 1}
MAX_OPERANDS = 64   # operands of one variadic call (concat, stack, einsum)


def _split_arguments(rule, node: ast.Call) -> tuple[list[ast.AST], list[ast.AST]]:
    """A call's positional arguments as (operands, parameters given positionally): the
    row's ``arity`` operands, then its parameters in order; a ``"list"`` row's operands
    are its first argument's elements, a ``"star"`` row's every argument after its
    leading string parameters."""
    args, fname = list(node.args), rule.name
    if rule.variadic == "list":
        if not args or not isinstance(args[0], (ast.List, ast.Tuple)):
            raise _Fail(f"{fname}() takes a list of tensors first, e.g. "
                        f"{fname}([a, b], axis=0)", node)
        operands, rest = list(args[0].elts), args[1:]
    elif rule.variadic == "star":
        lead = 0
        while lead < len(args) and _is_string(args[lead]):
            lead += 1
        operands, rest = args[lead:], args[:lead]
    else:
        operands, rest = args[: rule.arity], args[rule.arity:]
    low, most = rule.arity, rule.arity + len(rule.params)
    more = (f" (then its parameters {', '.join(p.name for p in rule.params)})"
            if rule.params else "")
    if len(operands) < low or (rule.variadic is None and len(args) > most):
        many = len(operands) if rule.variadic else len(args)
        raise _Fail(f"{fname}() takes {'at least ' if rule.variadic else ''}{low} "
                    f"argument{'s' if low != 1 else ''}{more}, got {many}"
                    f"{suggest_arity(fname, many)}", node)
    if len(operands) > MAX_OPERANDS:
        raise _Fail(f"{fname}() takes at most {MAX_OPERANDS} tensors", node)
    if len(rest) > len(rule.params):
        raise _Fail(f"{fname}() takes {low} tensor argument{'s' if low != 1 else ''}"
                    f"{more}, got {len(rest)} more argument{'s' if len(rest) != 1 else ''}",
                    node)
    return operands, rest


def _is_literal(node: ast.AST) -> bool:
    """Whether ``node`` is written as a parameter value (a number, string, True/False/
    None, pi or E, possibly negated, or a list of those) rather than a tensor."""
    while isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    if isinstance(node, (ast.List, ast.Tuple)):
        return all(_is_literal(e) for e in node.elts)
    return isinstance(node, ast.Constant) or (isinstance(node, ast.Name)
                                              and node.id in (*CONSTANTS, "inf"))


def _is_string(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _axis_literal(node: ast.AST, name: str = "axis"):
    def one(n: ast.AST) -> int:
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            return -one(n.operand)
        if isinstance(n, ast.Constant) and type(n.value) is int and abs(n.value) < 64:
            return n.value
        raise _Fail("axis= must be an integer or a tuple of integers", node)

    if isinstance(node, ast.Constant) and node.value is None:
        return None
    if isinstance(node, (ast.Tuple, ast.List)):
        if len(node.elts) > 16:
            raise _Fail("axis= names too many dimensions", node)
        return tuple(one(e) for e in node.elts)
    return one(node)


def _bool_literal(node: ast.AST, name: str) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, bool):
        return node.value
    raise _Fail(f"{name}= must be True or False", node)


def _number_literal(node: ast.AST, name: str) -> float | None:
    """A number literal (possibly negated, or pi/E), or None: a parameter such as
    clamp's min= is a constant of the formula, never an input."""
    sign = 1.0
    while isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        sign = -sign if isinstance(node.op, ast.USub) else sign
        node = node.operand
    if isinstance(node, ast.Constant) and node.value is None and sign == 1.0:
        return None
    if isinstance(node, ast.Name) and node.id in (*CONSTANTS, "inf"):   # inf: norm's ord
        return sign * {**CONSTANTS, "inf": math.inf}[node.id]
    if (isinstance(node, ast.Constant) and type(node.value) in (int, float)
            and math.isfinite(node.value) and abs(node.value) <= MAX_LITERAL):
        return sign * float(node.value)
    raise _Fail(f"{name}= must be a number literal or None", node)


def _int_literal(node: ast.AST, name: str, nested: bool = False):
    """An integer literal, possibly negated (``nested``: or a list of them, or a list of
    lists: ``pad``'s ``[[0, 0], [1, 2]]``), or None; the row's Param checks the rest."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _int_literal(node.operand, name)
        if isinstance(value, int):
            return -value
    elif isinstance(node, ast.Constant) and (node.value is None or type(node.value) is int):
        return node.value
    elif nested and isinstance(node, (ast.List, ast.Tuple)) and len(node.elts) <= 64:
        return tuple(_int_literal(e, name, nested) for e in node.elts)
    what = "an integer or a list of integers" if nested else "an integer"
    raise _Fail(f"{name}= must be {what}", node)


def _string_literal(node: ast.AST, name: str) -> str:
    if _is_string(node) and len(node.value) <= 64:
        return node.value
    raise _Fail(f"{name}= must be a short string literal", node)


def _subscript_only(node: ast.AST, name: str):
    raise _Fail(f"{name} is written as the subscript after the call, not as an argument", node)


_LITERALS = {AXIS: _axis_literal, BOOL: _bool_literal, NUMBER: _number_literal,
             INT: _int_literal, INTS: lambda n, name: _int_literal(n, name, True),
             CHOICE: _string_literal, TEXT: _string_literal,
             KEY: _subscript_only}


def _describe(node: ast.AST) -> str:
    names = {ast.Attribute: "attribute access", ast.Lambda: "a lambda",
             ast.ListComp: "a comprehension", ast.SetComp: "a comprehension",
             ast.DictComp: "a comprehension", ast.GeneratorExp: "a generator expression",
             ast.Subscript: "indexing", ast.IfExp: "an if-expression",
             ast.BoolOp: "and/or", ast.NamedExpr: "assignment (:=)",
             ast.JoinedStr: "an f-string", ast.Mod: "%", ast.FloorDiv: "//",
             ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<",
             ast.RShift: ">>", ast.Not: "not", ast.Invert: "~", ast.Eq: "==",
             ast.NotEq: "!=", ast.Is: "is", ast.IsNot: "is not", ast.In: "in",
             ast.NotIn: "not in", ast.Await: "await", ast.Yield: "yield"}
    return names.get(type(node), type(node).__name__)
