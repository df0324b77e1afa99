"""Finite differences where they are needed (gradcheck.checking.spared): a large case
whose engine and torch agree with the exact gradient far inside their tolerances is not
measured by finite differences, and says so; one that names its witnesses, a small one,
and one where an exact witness differs are measured at every point."""

from __future__ import annotations

import numpy as np

from gradcheck.checking import spared
from gradcheck.checking.case import run_case
from gradcheck.cases import case_from_dict
from gradcheck.reference import Reference

LARGE = {"expr": "sum(tanh(x @ W))", "inputs": {"x": {"shape": [64, 64]},
                                                   "W": {"shape": [64, 16]}},
         "points": 2, "extreme_points": 0}   # 5,120 gradient elements


def _run(raw: dict, reference=None, large: int = 4096):
    case = case_from_dict({"name": "t", **raw})
    old, spared.LARGE = spared.LARGE, large
    try:
        cache = {} if reference is None else {id(case): reference(case)}
        return run_case(case, "float64", cache=cache, timeout=None)
    finally:
        spared.LARGE = old


def test_a_large_case_whose_exact_witnesses_agree_spares_finite_differences():
    result = _run(LARGE)
    assert result.status == "passed", result.message
    numeric = result.witness("numeric")
    assert numeric.status == "skipped" and numeric.checked == 0
    assert numeric.message.startswith("finite differences not measured at every point: "
                                      "the engine and torch agree with the exact "
                                      "gradient there within 0.125 of their tolerances")
    assert "5,120 gradient elements" in numeric.message
    assert all(result.witness(w).status == "passed" for w in ("engine", "torch"))


def test_a_small_case_or_one_naming_its_witnesses_measures_them_at_every_point():
    small = _run(LARGE, large=1 << 16)
    named = _run({**LARGE, "witnesses": ["engine", "torch", "numeric"]})
    for result in (small, named):
        numeric = result.witness("numeric")
        assert numeric.status == "passed" and numeric.checked > 0, numeric.message


class _Wrong:
    """The exact reference with W's gradient off by 1e-6 relative (a mutation): every
    witness differs from it."""

    def __init__(self, case):
        self.exact = Reference(case)

    def __getattr__(self, name):
        return getattr(self.exact, name)

    def evaluations(self, points, vs):
        for e in self.exact.evaluations(points, vs):
            e.grads = {n: (None if g is None else g * (1 + 1e-6) if n == "W" else g)
                       for n, g in e.grads.items()}
            yield e


def test_where_an_exact_witness_differs_finite_differences_are_measured():
    result = _run(LARGE, reference=_Wrong)
    assert result.status == "failed"
    numeric = result.witness("numeric")
    # measured at every point, and they too find the reference wrong
    assert numeric.status == "failed" and numeric.checked > 0
    assert not any("not measured" in n for n in numeric.notes)


def test_the_rule_reads_gradients_only_and_needs_both_exact_witnesses():
    case = case_from_dict({"name": "t", **LARGE})

    class Check:   # the parts of _FormulaCheck the rule reads
        def __init__(self, worst: dict, names=("engine", "torch", "numeric")):
            from gradcheck.checking.compare import Tally

            self.case, self.names, self.errors, self.skipped = case, list(names), {}, {}
            self.tallies = {w: Tally(w, "float64") for w in names}
            for w, r in worst.items():
                self.tallies[w].point_worst[0] = r

    old, spared.LARGE = spared.LARGE, 4096
    try:
        assert spared.spared(Check({"engine": 0.1, "torch": 0.125}), 0)
        assert not spared.spared(Check({"engine": 0.1, "torch": 0.2}), 0)
        assert not spared.spared(Check({"engine": 0.1, "torch": np.inf}), 0)
        assert not spared.spared(Check({"engine": 0.1}), 0)   # torch not compared there
        assert not spared.spared(Check({"torch": 0.1}, names=("torch", "numeric")), 0)
    finally:
        spared.LARGE = old
