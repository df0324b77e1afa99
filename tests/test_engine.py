"""gradcheck.engine against PyTorch: every rule-table row and the autograd semantics users
observe (grad_fn names and graph, requires_grad, .grad accumulation, retain_grad,
errors in PyTorch's words), plus the engine-only guarantees (deep graphs, Function)."""

from __future__ import annotations

import dataclasses
import functools
import gc
import itertools
import json
import weakref
import zlib

import numpy as np
import pytest
import torch
from hypothesis import Phase, find, given, settings
from hypothesis import strategies as st

import gradcheck.engine as E
from gradcheck.witnesses.drive import rebuild
from gradcheck.cases import case_from_dict
from gradcheck.rules import COMPARISON, REDUCTION, RULES, EngineRule
from gradcheck.strategies import formulas, functions_for
from gradcheck.generate.templates import TEMPLATES
from gradcheck.formula.tree import walk

RNG = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def _seeded(request):
    """Each test's random data from a seed of its own: the same whichever tests ran
    before it in this process (their order differs under xdist)."""
    global RNG
    RNG = np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


# --------------------------------------------------------------------------- harness

class Side:
    """One engine (``engine`` or ``torch``) reached through the rule table's column."""

    def __init__(self, name: str, dtype=np.float64):
        self.name = name
        self.dtype = dtype      # of the constants a function row gets as 0-d tensors

    def op(self, rule: str, *args):
        # the row's operands, then its parameters (axis, keepdims), positionally
        if self.name == "engine":
            return getattr(E, rule)(*args)
        return getattr(RULES[rule], self.name)(*args)

    def apply(self, node, args):
        """A primitive of a parsed formula, as the engine and torch witnesses apply it:
        keywords by name on the engine; on torch, constants as 0-d tensors for the rows
        whose torch overloads do not take a Python number."""
        if self.name == "engine":
            return getattr(E, node.op)(*args, **dict(node.params))
        if not node.rule.numbers:
            dtype = torch.from_numpy(np.zeros((), self.dtype)).dtype
            args = [a if isinstance(a, torch.Tensor) else torch.tensor(a, dtype=dtype)
                    for a in args]
        return node.call("torch", args)

    def const(self, value, dtype=np.float64):
        """A constant function argument, as the torch witness passes it: a 0-d tensor."""
        a = np.asarray(value, dtype=dtype)
        return E.Tensor(a) if self.name == "engine" else torch.tensor(a)

    def leaf(self, array, requires_grad=True):
        if self.name == "engine":
            return E.Tensor(np.array(array), requires_grad=requires_grad)
        return torch.tensor(np.array(array), requires_grad=requires_grad)


def arr(t):
    return None if t is None else np.asarray(t.detach().numpy(), dtype=np.float64)


def structure(out, names):
    """The backward graph from ``out.grad_fn``, depth first: (node, its next_functions).
    AccumulateGrad nodes are named after their leaf; ``None`` slots are kept."""

    def label(fn):
        if fn is None:
            return None
        if type(fn).__name__ == "AccumulateGrad":
            return "AccumulateGrad:" + names[id(fn.variable)]
        return type(fn).__name__

    rows, seen, stack = [], set(), [out.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is None or id(fn) in seen:
            continue
        seen.add(id(fn))
        rows.append((label(fn), tuple(label(f) for f, _ in fn.next_functions)))
        stack.extend(f for f, _ in reversed(fn.next_functions))
    return rows


def outcome(call):
    try:
        call()
        return None
    except Exception as e:  # noqa: BLE001 - the type and message are what we compare
        return type(e).__name__, str(e)


def run_side(side, program, inputs, v, rg, again):
    s = Side(side)
    leaves = {n: s.leaf(a, rg.get(n, True)) for n, a in inputs.items()}
    names = {id(t): n for n, t in leaves.items()}
    out = program(s, **leaves)
    out, retained = out if isinstance(out, tuple) else (out, {})
    got = {"value": arr(out), "dtype": str(out.dtype).replace("torch.", ""),
           "requires_grad": out.requires_grad, "graph": structure(out, names)}
    grad = None if v is None else (E.Tensor(v) if side == "engine" else torch.tensor(v))
    if out.requires_grad:
        got["error"] = outcome(lambda: out.backward(grad))
        got["grads"] = {n: arr(t.grad) for n, t in {**leaves, **retained}.items()}
        if again:
            got["again"] = outcome(lambda: out.backward(grad))
            got["grads_again"] = {n: arr(t.grad) for n, t in {**leaves, **retained}.items()}
    return got


def parity(program, inputs, *, requires_grad=None, gradient="auto", again=True,
           rtol=1e-12, atol=1e-14):
    """Run ``program(side, **leaves)`` on the engine and on torch; assert they agree on
    the value, the grad_fn graph, every leaf's grad (None or not), and the outcome of a
    second backward without retain_graph (works, or PyTorch's error). A program may
    return ``(out, {name: intermediate})``: those intermediates' ``.grad`` are compared
    too (the program calls ``retain_grad()`` on them)."""
    rg = requires_grad or {}
    probe = program(Side("engine"), **{n: E.Tensor(np.array(a)) for n, a in inputs.items()})
    shape = np.shape((probe[0] if isinstance(probe, tuple) else probe).data)
    v = None if gradient == "auto" and shape == () else RNG.standard_normal(shape)
    e = run_side("engine", program, inputs, v, rg, again)
    t = run_side("torch", program, inputs, v, rg, again)
    # torch's matmul kernels sum in another order than NumPy's: an element that
    # cancels differs by rounding relative to the terms, not to itself
    scale = float(np.max(np.abs(t["value"]), initial=0.0))
    np.testing.assert_allclose(e["value"], t["value"], rtol=rtol, atol=1e-15 * scale or 1e-300)
    assert e["graph"] == t["graph"]
    for key in ("dtype", "requires_grad", "error", "again"):
        assert e.get(key) == t.get(key), key
    for key in ("grads", "grads_again"):
        for name, tg in t.get(key, {}).items():
            eg = e[key][name]
            assert (eg is None) == (tg is None), (key, name)
            if tg is not None:
                np.testing.assert_allclose(eg, tg, rtol=rtol, atol=atol, err_msg=name)
    return e


def uniform(shape, lo=-2.0, hi=2.0):
    return RNG.uniform(lo, hi, shape)


@functools.lru_cache(maxsize=4096)
def _parsed(expr: str, inputs: str):
    # a drawn table is parsed by several helpers (and each draw twice, run on both
    # sides): once per formula is enough
    return case_from_dict({"name": "formula", "expr": expr, "inputs": json.loads(inputs)})


def _output(table):
    return _parsed(table["expr"], json.dumps(table["inputs"], sort_keys=True)).output


def ops(table) -> set[str]:
    """The rule-table rows a drawn formula applies."""
    return {n.op for n in walk(_output(table))} - {"input", "const", "let"}


def primitives(table) -> int:
    return sum(1 for n in walk(_output(table)) if n.op in RULES)


def formula_program(table, retain=-1, detach=-1):
    """``program(side, **leaves)`` for :func:`parity`: a formula drawn by
    gradcheck.strategies rebuilt on one side, the ``retain``-th primitive's result
    retained (``retain_grad()``), the ``detach``-th detached (plus 0 times the last input
    where that keeps its shape: the value stays inside the domains the formula keeps)."""
    root = _output(table)

    def program(side, **leaves):
        count, kept = itertools.count(), {}
        last = leaves[sorted(leaves)[-1]]

        def apply(node, args):
            y, k = side.apply(node, args), next(count)
            if node.rule.family == COMPARISON or node.const is not None:
                return y        # a condition, or a constant subformula
            if k == detach:
                y = y.detach()
                if len(last.shape) <= len(y.shape) and all(
                        b in (1, a) for a, b in zip(y.shape[::-1], last.shape[::-1])):
                    y = y + last * 0.0
            if k == retain and y.requires_grad and not y.is_leaf:
                y.retain_grad()
                kept["retained"] = y
            return y

        return rebuild(root, leaves, apply), kept

    return program


M, V = (4, 3), (3,)

# --------------------------------------------------------------------------- every row

# Every row of the table (a comparison through where), in the simplest formula that
# gradcheck.strategies draws with it: a new row is checked here with nothing to add.
ROW_INPUTS = {"x": M, "y": V, "s": ()}


@pytest.mark.parametrize("row", sorted(RULES))
def test_every_row_matches_torch(row):
    # the first formula found that applies the row (not shrunk: cheaper than the check);
    # a row whose templates bring inputs of their own (a convolution's image and kernel)
    # draws over the default inputs, which let it
    own = any(t.inputs for t in TEMPLATES.get(row, ()))
    table = find(formulas(functions=functions_for(row), depth=2,
                          inputs=None if own else ROW_INPUTS),
                 lambda t: row in ops(t), settings=settings(database=None, deadline=None,
                                                            phases=[Phase.generate]))
    given = table["inputs"] if own else ROW_INPUTS
    labels = {n for n, v in given.items() if isinstance(v, dict)}   # integer inputs
    parity(formula_program(table), {n: _labels(v) if n in labels else uniform(tuple(v))
                                    for n, v in given.items()},
           requires_grad=dict.fromkeys(labels, False))


def _labels(table: dict) -> np.ndarray:
    """Values of an integer input: every label of its domain in turn."""
    n = int(np.prod(table["shape"], dtype=int))
    return (np.arange(n) % table["domain"][1]).reshape(table["shape"]).astype(table["dtype"])


OPERATOR_PROGRAMS = {
    "x + y": lambda s, x, y: x + y,
    "x + 2": lambda s, x, y: x + 2,
    "2 + x": lambda s, x, y: 2 + x,
    "x + c": lambda s, x, y: x + s.const(0.5),
    "x - y": lambda s, x, y: x - y,
    "x - 2": lambda s, x, y: x - 2,
    "2 - x": lambda s, x, y: 2 - x,
    "c - x": lambda s, x, y: s.const(0.5) - x,
    "x * y": lambda s, x, y: x * y,
    "2 * x": lambda s, x, y: 2 * x,
    "x / y": lambda s, x, y: x / y,
    "x / 2": lambda s, x, y: x / 2,
    "2 / x": lambda s, x, y: 2 / x,
    "c / x": lambda s, x, y: s.const(0.5) / x,
    "x ** 2": lambda s, x, y: x ** 2,
    "x ** y": lambda s, x, y: x ** y,
    "2 ** y": lambda s, x, y: 2 ** y,
    "x ** c": lambda s, x, y: x ** s.const(1.5),
    "c ** x": lambda s, x, y: s.const(1.5) ** x,
    "x ** 0.5": lambda s, x, y: x ** 0.5,
    "x ** -1.5": lambda s, x, y: x ** -1.5,
    "x ** 0": lambda s, x, y: x ** 0,
    "-x": lambda s, x, y: -x,
    "x * y - x / y": lambda s, x, y: x * y - x / y,
    "x * x": lambda s, x, y: x * x,
    "x + x * x": lambda s, x, y: (x + 1) * (x + 1) - x,
}


@pytest.mark.parametrize("text", list(OPERATOR_PROGRAMS))
def test_operator_matches_torch(text):
    parity(OPERATOR_PROGRAMS[text], {"x": uniform(M, 0.3, 2), "y": uniform(V, 0.5, 2)})


# Operands the formula generator does not draw: 0-d constant tensors, Python numbers in a
# condition, a condition on an input only (the rows themselves are covered above).
BINARY_PROGRAMS = {
    "maximum": lambda s, x, y: s.op("maximum", x, y),
    "maximum c": lambda s, x, y: s.op("maximum", x, s.const(0.5)),
    "minimum": lambda s, x, y: s.op("minimum", y, x),
    "minimum c": lambda s, x, y: s.op("minimum", s.const(0.5), x),
    "where": lambda s, x, y: s.op("where", s.op("gt", x, y), x * y, s.op("sin", x)),
    "where c": lambda s, x, y: s.op("where", s.op("lt", x, 0.3), x, s.const(2.0)),
    "where cond only": lambda s, x, y: s.op("where", s.op("gt", x, 0.0), y, s.const(0.0)),
}


@pytest.mark.parametrize("text", list(BINARY_PROGRAMS))
def test_binary_row_matches_torch(text):
    parity(BINARY_PROGRAMS[text], {"x": uniform(M), "y": uniform(V)})


def test_ties_share_the_gradient_as_in_torch():
    x = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]])
    parity(lambda s, x, y: s.op("maximum", x, y) + s.op("minimum", x, y),
           {"x": x, "y": np.array([3.0, 2.0, 0.0])})
    for name in ("max", "min"):
        parity(lambda s, x: s.op(name, x, (0, 1), False) + s.op(name, x, (1,), True).sum(),
               {"x": x})


# the reductions over axis= with keepdims= (the composite rows, which take other
# parameters, have their own parity tests in tests/test_composites.py)
REDUCTIONS = [n for n, r in RULES.items() if r.family == REDUCTION
              and [p.name for p in r.params] == ["axis", "keepdims"]]
AXES = [((1,), False), ((0,), True), ((0, 1), False), ((0, 1), True)]


@pytest.mark.parametrize("name", REDUCTIONS)
@pytest.mark.parametrize("axis,keepdims", AXES)
def test_reduction_matches_torch(name, axis, keepdims):
    parity(lambda s, x: s.op(name, s.op("exp", x), axis, keepdims), {"x": uniform(M)})


@pytest.mark.parametrize("name", REDUCTIONS)
def test_reduction_of_3d_over_two_axes_matches_torch(name):
    parity(lambda s, x: s.op(name, x * 2, (0, 2), False), {"x": uniform((2, 3, 4))})


def test_prod_with_zeros_matches_torch():
    x = np.array([[0.0, 2.0, 3.0], [0.0, 0.0, 1.5]])
    for axis in [(0,), (1,), (0, 1)]:
        parity(lambda s, x: s.op("prod", x, axis, False), {"x": x})


MATMUL_SHAPES = [((4, 3), (3, 2)), ((4, 3), (3,)), ((3,), (3, 2)), ((3,), (3,)),
                 ((2, 4, 3), (3, 2)), ((2, 4, 3), (3,))]


@pytest.mark.parametrize("a,b", MATMUL_SHAPES)
def test_matmul_matches_torch(a, b):
    parity(lambda s, a, b: s.op("matmul", a, b), {"a": uniform(a), "b": uniform(b)})


# Every rank pair the expression language allows, as PyTorch's _matmul_impl splits them:
# dot, mv, mm; a stack of matrices (either side) folded into one mm or mv; a 3-D batch of
# one squeezed away; bmm over batches expanded to their broadcast shape (views where the
# layout allows, copies where it does not). Which path runs depends also on which operand
# requires grad and on the operands' layout, hence the other two parameters.
MATMUL_RANKS = [
    ((3,), (3,)), ((3,), (3, 2)), ((4, 3), (3,)), ((4, 3), (3, 2)),
    ((2, 4, 3), (3,)), ((2, 4, 3), (3, 2)), ((3,), (2, 3, 5)), ((4, 3), (2, 3, 5)),
    ((2, 4, 3), (2, 3, 5)), ((1, 4, 3), (2, 3, 5)), ((2, 4, 3), (1, 3, 5)),
    ((1, 4, 3), (1, 3, 5)), ((1, 4, 3), (3, 5)),
    ((2, 2, 4, 3), (3, 5)), ((2, 2, 4, 3), (3,)), ((3,), (2, 2, 3, 5)),
    ((4, 3), (2, 2, 3, 5)), ((2, 2, 4, 3), (2, 2, 3, 5)), ((2, 1, 4, 3), (1, 3, 3, 5)),
    ((2, 4, 3), (2, 2, 3, 5)), ((2, 2, 4, 3), (2, 3, 5)), ((2, 1, 4, 3), (3, 3, 5)),
]
MATMUL_GRADS = {"both": {}, "a only": {"b": False}, "b only": {"a": False}}


def _transposed(shape):
    return shape[:-2] + (shape[-1], shape[-2])


@pytest.mark.parametrize("a,b", MATMUL_RANKS)
@pytest.mark.parametrize("grads", list(MATMUL_GRADS))
@pytest.mark.parametrize("layout", ["contiguous", "a transposed", "b transposed"])
def test_matmul_graph_and_grads_match_torch_for_every_rank_pair(a, b, grads, layout):
    # parity: the same grad_fn graph (names, next_functions in order, AccumulateGrad per
    # leaf, None for an operand without grad), values, grads, second-backward outcome.
    flip = {"a": layout == "a transposed", "b": layout == "b transposed"}
    if (flip["a"] and len(a) < 2) or (flip["b"] and len(b) < 2):
        pytest.skip("a vector has no transpose")

    def program(s, a, b):
        return s.op("matmul", s.op("transpose", a) if flip["a"] else a,
                    s.op("transpose", b) if flip["b"] else b)

    parity(program, {"a": uniform(_transposed(a) if flip["a"] else a),
                     "b": uniform(_transposed(b) if flip["b"] else b)},
           requires_grad=MATMUL_GRADS[grads])


def test_attention_scores_record_torchs_chain():
    # The chain the issue quotes, with what it hangs from: q's side is a view of an
    # expand; transpose(k) is not contiguous, so its reshape is an alias (not a view).
    q, k = (E.Tensor(uniform((2, 4, 3)), requires_grad=True) for _ in "qk")
    tq, tk = (torch.tensor(t.data, requires_grad=True) for t in (q, k))
    from gradcheck.witnesses.drive import grad_fn_chain

    chain = grad_fn_chain(E.matmul(q, E.transpose(k)))
    assert chain == grad_fn_chain(tq @ tk.mT)
    assert chain == ("UnsafeViewBackward0", "BmmBackward0", "ViewBackward0",
                     "ExpandBackward0", "AccumulateGrad", "ReshapeAliasBackward0",
                     "ExpandBackward0", "TransposeBackward0", "AccumulateGrad")


@pytest.mark.parametrize("expr,inputs", [
    ("sum(tanh(q @ transpose(k)))", {"q": [2, 4, 3], "k": [2, 4, 3]}),
    ("sum(tanh(q @ transpose(k)) @ v)", {"q": [2, 2, 3, 2], "k": [2, 2, 3, 2],
                                         "v": [2, 2, 3, 2]}),
    ("sum(sigmoid(x @ W) @ transpose(W))", {"x": [1, 3, 2], "W": [2, 2, 2]}),
    ("sum(tanh(x @ W))", {"x": [2, 3, 2], "W": [2, 3]}),
])
def test_batched_matmul_formulas_pass_the_engine_witness(expr, inputs):
    # verdicts.grad_fn_parity fails the engine witness when its graph is not torch's
    import gradcheck

    result = gradcheck.check(expr, inputs, witnesses=["symbolic", "engine", "torch"],
                             points=1)
    engine, torch_side = result.witness("engine"), result.witness("torch")
    assert engine.status == "passed", engine.message
    assert engine.grad_fn == torch_side.grad_fn


# Operands whose memory layout differs from a leaf's: the layout decides whether
# matmul's reshapes are views, aliases or copies, so the engine must lay out results as
# torch does (an elementwise result follows its first operand that orders the axes; a
# reduction's is row-major).
LAYOUT_OPERANDS = {
    "tanh(transpose(x))": lambda s, x: s.op("tanh", s.op("transpose", x)),
    "transpose(x) + z": lambda s, x: s.op("transpose", x) + s.const(np.ones(
        _transposed(x.shape))),
    "z + transpose(x)": lambda s, x: s.const(np.ones(_transposed(x.shape)))
    + s.op("transpose", x),
    "sum(transpose(x) * 2, axis=0)": lambda s, x: s.op("sum", s.op("transpose", x) * 2,
                                                       (0,), False),
}


@pytest.mark.parametrize("operand", list(LAYOUT_OPERANDS))
@pytest.mark.parametrize("b", [(4,), (4, 5), (2, 4, 5), (2, 2, 4, 5)])
@pytest.mark.parametrize("grads", list(MATMUL_GRADS))
def test_matmul_of_a_non_contiguous_operand_matches_torch(operand, b, grads):
    make = LAYOUT_OPERANDS[operand]
    x = uniform((2, 2, 2, 4, 3) if operand.startswith("sum") else (2, 2, 4, 3))
    parity(lambda s, a, b: s.op("matmul", make(s, a), b), {"a": x, "b": uniform(b)},
           requires_grad=MATMUL_GRADS[grads])


@pytest.mark.parametrize("operand", list(LAYOUT_OPERANDS))
def test_elementwise_and_reduction_results_have_torchs_strides(operand):
    make = LAYOUT_OPERANDS[operand]
    x = uniform((2, 2, 2, 4, 3) if operand.startswith("sum") else (2, 2, 4, 3))
    e = make(Side("engine"), E.Tensor(x))
    t = make(Side("torch"), torch.tensor(x))
    assert tuple(s // e.data.itemsize for s in e.data.strides) == t.stride()


def test_broadcasting_sums_gradients_back_to_each_shape():
    e = parity(lambda s, x, y, z: x * y + z - x / z,
               {"x": uniform((4, 3)), "y": uniform((3,)), "z": uniform((4, 1), 1, 2)})
    assert {n: g.shape for n, g in e["grads"].items()} == {"x": (4, 3), "y": (3,),
                                                          "z": (4, 1)}


def test_a_program_from_the_design_doc_matches_torch():
    def two_layer(s, x, W, b):
        h = s.op("tanh", x @ W + b)
        return s.op("sum", h ** 2, (1,), False)

    parity(two_layer, {"x": uniform((4, 3)), "W": uniform((3, 5)), "b": uniform((5,))})


def test_constants_and_inputs_without_grad_match_torch():
    parity(lambda s, x, y: s.op("sin", x) * y + y, {"x": uniform(M), "y": uniform(V)},
           requires_grad={"y": False})
    out = parity(lambda s, x, y: s.op("exp", x) * y, {"x": uniform(M), "y": uniform(V)},
                 requires_grad={"x": False, "y": False})
    assert out["graph"] == [] and out["requires_grad"] is False


def test_float32_stays_float32():
    x = E.Tensor(np.ones(3, np.float32), requires_grad=True)
    y = (E.exp(x) * 2.5 + x ** 2).sum()
    y.backward()
    assert y.dtype == np.float32 and x.grad.dtype == np.float32


# --------------------------------------------------------------------------- semantics

def both(program):
    """program(mod, make) on the engine and on torch; ``make`` builds a float64 leaf."""

    def make_e(v, requires_grad=True):
        return E.Tensor(np.array(v, dtype=np.float64), requires_grad=requires_grad)

    def make_t(v, requires_grad=True):
        return torch.tensor(np.array(v, dtype=np.float64), requires_grad=requires_grad)

    return program(E, make_e), program(torch, make_t)


def test_leaf_grad_accumulates_across_backward_calls():
    def program(mod, make):
        x = make([1.0, 2.0])
        (x * x).sum().backward()
        first = x.grad
        mod.exp(x).sum().backward()
        return arr(first), arr(x.grad), x.is_leaf, x.grad_fn

    e, t = both(program)
    np.testing.assert_allclose(e[1], t[1])
    np.testing.assert_allclose(e[0], t[0])        # accumulated in place, as in torch
    assert e[2:] == t[2:] == (True, None)


def test_zeroing_grad_restarts_accumulation():
    x = E.Tensor(np.array([1.0, 2.0]), requires_grad=True)
    (x * 3).sum().backward()
    x.grad = None
    (x * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.data, [3.0, 3.0])


def test_non_leaf_grad_is_none_unless_retained():
    def program(mod, make):
        x = make([1.0, 2.0, 3.0])
        h = x * 2
        k = mod.sin(h)
        k.retain_grad()
        y = (k * h).sum()
        y.retain_grad()
        y.backward(retain_graph=True)
        first = arr(k.grad)
        y.backward()
        with pytest.warns(UserWarning, match="not a leaf Tensor"):
            hg = h.grad
        return (hg, h.is_leaf, h.retains_grad, k.retains_grad, x.retains_grad,
                first, arr(k.grad), arr(y.grad), arr(x.grad))

    e, t = both(program)
    assert e[:5] == t[:5] == (None, False, False, True, False)
    for a, b in zip(e[5:], t[5:]):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_retain_grad_on_a_leaf_is_a_no_op_and_on_a_constant_an_error():
    e, t = both(lambda mod, make: (make([1.0]).retain_grad(),
                                   outcome(lambda: make([1.0], False).retain_grad())))
    assert e == t


def test_requires_grad_propagates_as_in_torch():
    def program(mod, make):
        x, c = make([1.0, 2.0]), make([3.0, 4.0], requires_grad=False)
        flags = []
        for y in (c * 2, x * c, mod.exp(c), c + x, x.detach() * 2, x > c):
            flags.append((y.requires_grad, y.is_leaf, y.grad_fn is None))
        with mod.no_grad():
            z = x * 2
        flags.append((z.requires_grad, z.is_leaf, z.grad_fn is None))
        return flags

    e, t = both(program)
    assert e == t


def test_no_grad_as_decorator_and_nested():
    x = E.Tensor(np.ones(2), requires_grad=True)

    @E.no_grad()
    def f(t):
        return t * 2

    assert f(x).grad_fn is None
    with E.no_grad():
        with E.no_grad():
            pass
        assert (x * 2).grad_fn is None
    assert (x * 2).grad_fn is not None and E.is_grad_enabled()


def test_detach_shares_data_and_cuts_the_graph():
    def program(mod, make):
        x = make([1.0, 2.0])
        d = x.detach()
        y = (x * d).sum()
        y.backward()
        return d.requires_grad, d.is_leaf, d.grad_fn, arr(x.grad)

    e, t = both(program)
    assert e[:3] == t[:3]
    np.testing.assert_allclose(e[3], t[3])
    x = E.Tensor(np.array([1.0, 2.0]), requires_grad=True)
    assert np.shares_memory(x.detach().data, x.data)


def test_backward_with_gradient_is_a_vector_jacobian_product():
    v = np.array([[1.0, -2.0, 0.5], [0.25, 3.0, -1.0]])

    def program(mod, make):
        x = make([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]])
        y = mod.tanh(x) * x
        y.backward(mod.tensor(v, dtype=mod.float64) if mod is torch else E.Tensor(v))
        return arr(x.grad)

    e, t = both(program)
    np.testing.assert_allclose(e, t, rtol=1e-13)
    x = np.array([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]])
    np.testing.assert_allclose(e, v * ((1 - np.tanh(x) ** 2) * x + np.tanh(x)))


def test_backward_of_a_leaf_and_of_a_one_element_tensor():
    def program(mod, make):
        s = make(2.0)
        s.backward()
        x = make([1.0, 2.0])
        (x.sum() * x).sum().backward()
        one = make([3.0])
        (one * 2).backward()
        return arr(s.grad), arr(x.grad), arr(one.grad)

    e, t = both(program)
    for a, b in zip(e, t):
        np.testing.assert_allclose(a, b)


def test_next_functions_and_accumulate_grad_as_in_torch():
    def program(mod, make):
        x, c = make([1.0, 2.0]), make([1.0, 1.0], requires_grad=False)
        y = x * c
        acc, none = (f for f, _ in y.grad_fn.next_functions)
        same = acc is (x + 1).grad_fn.next_functions[0][0]
        return (y.grad_fn.name(), type(acc).__name__, acc.variable is x, none, same,
                acc.next_functions, [n for _, n in y.grad_fn.next_functions])

    e, t = both(program)
    assert e == t == ("MulBackward0", "AccumulateGrad", True, None, True, (), [0, 0])


def test_a_leaf_is_freed_with_its_last_reference_as_in_torch():
    """A leaf holds its AccumulateGrad weakly (the graphs that use it hold it), as
    PyTorch does: no cycle leaf -> AccumulateGrad -> leaf, so with the cycle collector
    off a leaf (and its .grad) is freed as soon as the last reference goes, graph and
    all; while a graph is alive, the leaf's next graph gets the same node."""
    def program(mod, make):
        gc.disable()
        try:
            x = make([1.0, 2.0])
            y = (x * 2).sum()
            acc = y.grad_fn.next_functions[0][0].next_functions[0][0]
            y.backward()
            same = acc is mod.exp(x).grad_fn.next_functions[0][0]
            grad = weakref.ref(acc.variable)
            del x, y, acc
            return same, grad() is None
        finally:
            gc.enable()

    e, t = both(program)
    assert e == t == (True, True)


# --------------------------------------------------------------------------- errors

ERRORS = {
    "non-scalar backward": lambda mod, make: (make([1.0, 2.0]) * 2).backward(),
    "no grad_fn": lambda mod, make: (make([1.0, 2.0], False) * 2).sum().backward(),
    "no grad_fn, non-scalar": lambda mod, make: make([1.0, 2.0], False).backward(),
    "second backward": lambda mod, make: _twice(mod.exp(make([1.0, 2.0])).sum()),
    "second backward, shared subgraph": lambda mod, make: _shared(mod, make),
    "wrong gradient shape": lambda mod, make: (make([1.0, 2.0]) * 2).backward(
        make([1.0, 2.0, 3.0], False)),
    "wrong gradient shape, scalar": lambda mod, make: (make([1.0, 2.0]) * 2).sum()
    .backward(make([1.0], False)),
    "requires_grad on an int tensor": lambda mod, make: mod.tensor(
        [1, 2], requires_grad=True),
    "requires_grad=False on a non-leaf": lambda mod, make: setattr(
        make([1.0]) * 2, "requires_grad", False),
    "numpy of a tensor that requires grad": lambda mod, make: make([1.0]).numpy(),
    "item of many elements": lambda mod, make: make([1.0, 2.0]).item(),
}


def _twice(y):
    y.backward()
    y.backward()


def _shared(mod, make):
    h = mod.sigmoid(make([1.0, 2.0]))
    h.sum().backward()
    (h * 2).sum().backward()


@pytest.mark.parametrize("name", list(ERRORS))
def test_misuse_raises_torchs_error(name):
    e, t = both(lambda mod, make: outcome(lambda: ERRORS[name](mod, make)))
    assert t is not None
    assert e == t


def test_second_backward_through_a_graph_that_saves_nothing_works():
    e, t = both(lambda mod, make: outcome(lambda: _twice((make([1.0, 2.0]) + 1).sum())))
    assert e == t == None  # noqa: E711


def test_retain_graph_allows_a_second_backward():
    def program(mod, make):
        x = make([1.0, 2.0])
        y = mod.exp(x).sum()
        y.backward(retain_graph=True)
        y.backward()
        return arr(x.grad)

    e, t = both(program)
    np.testing.assert_allclose(e, t)


# --------------------------------------------------------------------------- depth

def test_a_chain_100000_nodes_deep():
    x = E.Tensor(np.array([0.5, 1.0]), requires_grad=True)
    y = x
    for _ in range(100_000):
        y = y + 0.0
    chain = y.sum()
    chain.backward()
    np.testing.assert_array_equal(x.grad.data, [1.0, 1.0])
    del y, chain          # freeing a deep graph must not recurse either
    gc.collect()


# --------------------------------------------------------------------------- Function

def make_functions(base):
    """The same custom ops, for engine.Function and torch.autograd.Function."""

    class Cube(base):
        @staticmethod
        def forward(ctx, x, k):
            ctx.save_for_backward(x)
            ctx.k = k
            return x * x * x * k

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            ctx.seen = ctx.needs_input_grad
            return 3 * ctx.k * x * x * g, None

    class TooFew(base):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, g):
            return g

    class TooMany(base):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, g):
            return g, g, g

    class ExtraNone(base):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, g):
            return g, g, None

    class WrongShape(base):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, g):
            return ones((2,)), g

    class Broadcast(base):           # a gradient with extra axes is summed back
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, g):
            return g * ones((2, 3)), g

    def ones(shape):
        return E.Tensor(np.ones(shape)) if base is E.Function else torch.ones(
            shape, dtype=torch.float64)

    return Cube, TooFew, TooMany, ExtraNone, WrongShape, Broadcast


E_FNS = make_functions(E.Function)
T_FNS = make_functions(torch.autograd.Function)


def test_function_with_ctx_matches_torch():
    def program(mod, make):
        cube = (E_FNS if mod is E else T_FNS)[0]
        x = make([1.0, -2.0, 0.5])
        y = cube.apply(x, 2.0)
        z = (y * x).sum()
        z.backward()
        return (y.grad_fn.name(), [None if f is None else type(f).__name__
                                   for f, _ in y.grad_fn.next_functions],
                y.grad_fn.seen, arr(y.detach()), arr(x.grad),
                outcome(lambda: y.grad_fn.saved_tensors))

    e, t = both(program)
    assert e[:3] == t[:3] == ("CubeBackward", ["AccumulateGrad"], (True, False))
    np.testing.assert_allclose(e[3], t[3])
    np.testing.assert_allclose(e[4], t[4])
    assert e[5] == t[5] and "second time" in e[5][1]


def test_function_without_grad_or_under_no_grad_records_nothing():
    cube = E_FNS[0]
    assert cube.apply(E.Tensor(np.ones(2)), 1.0).grad_fn is None
    with E.no_grad():
        y = cube.apply(E.Tensor(np.ones(2), requires_grad=True), 1.0)
    assert y.grad_fn is None and not y.requires_grad


@pytest.mark.parametrize("index", [1, 2, 3, 4, 5])
def test_function_backward_misuse_matches_torch(index):
    def program(mod, make):
        fn = (E_FNS if mod is E else T_FNS)[index]
        a, b = make([1.0, 2.0, 3.0]), make([4.0, 5.0, 6.0])
        err = outcome(lambda: fn.apply(a, b).sum().backward())
        return err, arr(a.grad), arr(b.grad)

    e, t = both(program)
    assert e[0] == t[0]
    for x, y in zip(e[1:], t[1:]):
        assert (x is None) == (y is None)
        if x is not None:
            np.testing.assert_allclose(x, y)


def test_function_error_names_the_function():
    a = E.Tensor(np.ones(3), requires_grad=True)
    with pytest.raises(RuntimeError, match=r"^function TooFewBackward returned an incorrect "
                                           r"number of gradients \(expected 2, got 1\)$"):
        E_FNS[1].apply(a, a).sum().backward()
    with pytest.raises(RuntimeError, match=r"^Function WrongShapeBackward returned an "
                                           r"invalid gradient at index 0 - got \[2\] but "
                                           r"expected shape compatible with \[3\]$"):
        E_FNS[4].apply(a, a).sum().backward()


# --------------------------------------------------------------------------- the table

def test_every_row_has_an_engine_rule():
    for name, rule in RULES.items():
        assert isinstance(rule.engine, EngineRule)
        assert rule.engine.op == name
        if rule.family != COMPARISON:
            assert len(rule.engine.vjps) == rule.arity, name


def _patched_vjp(monkeypatch, name, *vjps):
    rule = RULES[name]
    monkeypatch.setitem(RULES, name, dataclasses.replace(
        rule, engine=dataclasses.replace(rule.engine, vjps=vjps)))


def test_a_wrong_vjp_in_the_table_is_caught_by_the_comparison(monkeypatch):
    program = BINARY_PROGRAMS["where"]            # uses gt, where, mul and sin
    inputs = {"x": uniform(M), "y": uniform(V)}
    parity(program, inputs)
    _patched_vjp(monkeypatch, "sin", lambda g, ans, x: -g * np.cos(x))   # sign flipped
    with pytest.raises(AssertionError, match="x"):
        parity(program, inputs)


def test_a_wrong_reduction_vjp_is_caught(monkeypatch):
    program = lambda s, x: s.op("sum", x * x, (1,), False)  # noqa: E731
    _patched_vjp(monkeypatch, "sum", lambda g, ans, x, axis, keepdims: np.ones_like(x))
    with pytest.raises(AssertionError):
        parity(program, {"x": uniform(M)})


def test_a_vjp_that_forgets_to_sum_broadcast_axes_is_fixed_in_one_place():
    # The add row returns g for both inputs; the walk sums it to y's shape (3,).
    x = E.Tensor(np.ones((4, 3)), requires_grad=True)
    y = E.Tensor(np.ones(3), requires_grad=True)
    (x + y).sum().backward()
    np.testing.assert_array_equal(y.grad.data, [4.0, 4.0, 4.0])


def test_the_engine_op_of_a_row_is_called_like_the_torch_column():
    x = E.Tensor(np.array([[1.0, 2.0], [3.0, 4.0]]), requires_grad=True)
    y = E.prod(E.exp(x), (0, 1), True)
    assert y.shape == (1, 1) and y.grad_fn.name() == "ProdBackward1"
    assert E.add(2.0, 3.0).item() == 5.0


# --------------------------------------------------------------------------- Tensor API

def test_tensor_basics():
    t = E.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
    assert t.dtype == np.float32 and t.shape == (1, 3) and t.ndim == 2 and t.is_leaf
    assert E.tensor(np.zeros(2)).dtype == np.float64
    assert E.tensor(2.5).item() == 2.5 and float(E.tensor([4.0])) == 4.0
    assert "requires_grad=True" in repr(t)
    assert "grad_fn=<MulBackward0>" in repr(t * 2)
    assert (t.detach().numpy() == t.data).all()
    c = t > 1.5
    assert c.dtype == bool and not c.requires_grad and c.grad_fn is None
    assert (t.exp().sum(axis=1, keepdims=True)).grad_fn.name() == "SumBackward1"
    assert hash(t) == hash(t) and t in {t}      # == is identity: tensors stay hashable


def test_numpy_arrays_mix_with_tensors():
    x = E.Tensor(np.array([1.0, 2.0]), requires_grad=True)
    y = np.array([3.0, 4.0]) * x + np.ones(2)
    y.sum().backward()
    assert isinstance(y, E.Tensor)
    np.testing.assert_array_equal(x.grad.data, [3.0, 4.0])


# --------------------------------------------------------------------------- random programs

@st.composite
def programs(draw):
    """A random formula of gradcheck.strategies on broadcastable shapes, with one
    intermediate retained and one detached."""
    shapes = [(), (3,), (2, 3), (2, 1), (1, 3)]
    n_inputs = draw(st.integers(1, 3))
    inputs = {f"x{i}": draw(st.sampled_from(shapes)) for i in range(n_inputs)}
    table = draw(formulas(inputs=inputs))
    arrays = {}
    for name, shape in inputs.items():
        size = int(np.prod(shape, dtype=int))
        values = draw(st.lists(st.floats(0.1, 1.5), min_size=size, max_size=size))
        arrays[name] = np.reshape(np.array(values), shape)
    n = primitives(table)
    retain = draw(st.integers(-1, n - 1))     # which primitive's result to retain
    detach = draw(st.integers(-1, n - 1))
    return table, arrays, retain, detach


@settings(max_examples=150)
@given(programs())
def test_random_programs_match_torch(program):
    table, arrays, retain, detach = program
    parity(formula_program(table, retain, detach), arrays, rtol=1e-10)


# --------------------------------------------------------------------------- float32

FLOAT32_PROGRAMS = {
    **{k: OPERATOR_PROGRAMS[k] for k in ("x * y - x / y", "2 / x", "x ** y", "2 ** y",
                                         "x ** 0.5", "c - x")},
    "reductions": lambda s, x, y: (s.op("sum", x, (1,), False) + s.op("prod", x, (1,), False)
                                   + s.op("logsumexp", x, (0, 1), False)
                                   + s.op("mean", x * y, (0, 1), False)),
    "functions with a float64 0-d constant": lambda s, x, y: s.op(
        "maximum", s.op("sigmoid", x), s.const(0.5)) * s.op("erf", y),
    "matmul": lambda s, x, y: s.op("matmul", x, y),
}


@pytest.mark.parametrize("text", list(FLOAT32_PROGRAMS))
def test_float32_matches_torch(text):
    # y is broadcast over x's 4 rows: y.grad sums 4 terms of size ~1 with random-sign
    # cotangents, and may cancel to 0.015 while each side's float32 rounding stays at the
    # terms' size: hence an absolute tolerance at that size, not only a relative one
    e = parity(FLOAT32_PROGRAMS[text], {"x": uniform(M, 0.3, 2).astype(np.float32),
                                        "y": uniform(V, 0.5, 2).astype(np.float32)},
               rtol=2e-6, atol=2e-6)
    assert e["dtype"] == "float32"
