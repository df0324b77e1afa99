"""The float forward without callbacks runs as a loop over precomputed steps
(:func:`gradcheck.formula.forward.program`); with a callback it is the walk every witness uses
(:func:`gradcheck.formula.tree.fold`). Both are one computation: bit for bit equal, on random
formulas over every row, with overrides by name and by node, merged or not."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gradcheck.cases import case_from_dict
from gradcheck.formula.forward import evaluate
from gradcheck.strategies import formulas
from gradcheck.formula.tree import walk


def _walked(root, env, overrides=None, merge=False):
    """The same forward through fold (a callback turns the compiled loop off)."""
    return evaluate(root, env, overrides, on_node=lambda node, args, value: None,
                    merge=merge)


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b,
                                                                        equal_nan=True)


def _integers(rng, spec):
    """An integer or boolean input's elements, inside its declared domain (an index
    input's domain is its axis: a drawn gather's indices stay in range)."""
    lo, hi = spec.domain if isinstance(spec.domain, tuple) else (0, 2)
    return rng.integers(int(lo), int(hi) + 1, spec.shape)


@settings(max_examples=150)
@given(formulas(), st.data())
def test_the_compiled_forward_is_the_walk_bit_for_bit(table, data):
    case = case_from_dict(table)
    rng = np.random.default_rng(table["seed"])
    env = {s.name: (_integers(rng, s) if s.dtype else rng.uniform(-2, 2, s.shape))
           for s in case.inputs}
    root = case.output
    with np.errstate(all="ignore"):
        assert _same(evaluate(root, env), _walked(root, env))
        assert _same(evaluate(root, env, merge=True), _walked(root, env))
        # an input given anew, and an inner node pinned by its id
        name = data.draw(st.sampled_from(sorted(env)))
        moved = {name: np.asarray(env[name]) * 0.5}
        assert _same(evaluate(root, env, moved, merge=True), _walked(root, env, moved))
        inner = [n for n in walk(root) if n.op not in ("input", "const", "let")]
        if inner:
            node = data.draw(st.sampled_from(inner))
            pinned = {id(node): np.full(node.shape, 0.25)}
            assert _same(evaluate(root, env, pinned, merge=True),
                         _walked(root, env, pinned, merge=True))
            assert _same(evaluate(root, env, pinned), _walked(root, env, pinned))
