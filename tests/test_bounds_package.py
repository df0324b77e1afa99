"""The rounding model as one package (gradcheck.bounds): one dispatch by family, one
PointBounds per point handed from the tolerance's bounds to the numeric witness (no
module global), dtype facts as fields of the dtype (no silent fallback)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from gradcheck.base import dtypes
from gradcheck.bounds import families
from gradcheck.bounds.point import PointBounds, error_bounds, forward_bound
from gradcheck.rules import RULES
from gradcheck.rules.row import FAMILIES

BOUNDS = Path(families.__file__).parent


def test_every_family_has_a_handler_in_the_dispatch_table():
    assert set(families.HANDLERS) == set(FAMILIES)
    for name, rule in RULES.items():
        handler = families.family(rule)
        assert handler is families.HANDLERS[rule.family], name
        assert callable(handler.value) and callable(handler.many), name
        # a cotangent flows through every row whose family has one (comparisons: none)
        assert (handler.cotangent is None) == (rule.family == "comparison"), name


def test_no_family_module_reaches_into_the_model_or_decides_a_family_itself():
    """The family modules read the model through its public protocol; inside the
    package a row's family is read off rule.family alone."""
    for path in BOUNDS.glob("*.py"):
        text = path.read_text()
        assert not re.search(r"\bb\._", text), path.name
        for banned in ("rule.kind", "LINALG", "isinstance(rule.rounding", "in POOLS"):
            assert banned not in text, (path.name, banned)


def test_the_numeric_witness_reads_the_forward_bound_of_its_own_point(monkeypatch):
    """Each point's PointBounds is made where the point is checked, filled by the
    tolerance's bounds, and handed to the numeric witness: the witness's forward bound
    at that point is the one kept there, and no other point's."""
    from gradcheck.bounds import point as bounds_point
    from gradcheck.cases import case_from_dict
    from gradcheck.checking.case import run_case
    from gradcheck.witnesses import numeric

    case = case_from_dict({"name": "handed", "expr": "sum(tanh(x @ W))", "points": 2,
                           "extreme_points": 0,
                           "inputs": {"x": {"shape": [8, 40]}, "W": {"shape": [40, 4]}}})
    kept, read = [], []
    real_keep, real_run = PointBounds.keep, numeric.run

    def keep(self, root, point, dtype, value, bound):
        kept.append((self, dtype, bound))
        return real_keep(self, root, point, dtype, value, bound)

    def run(*args, at=None, **options):
        read.append(at)
        return real_run(*args, at=at, **options)

    real_forward = bounds_point.forward_bound

    def forward(root, env, overrides=None, dtype="float64", at=None):
        value, bound = real_forward(root, env, overrides, dtype, at)
        if not overrides:
            read.append((at, bound))
        return value, bound

    monkeypatch.setattr(PointBounds, "keep", keep)
    monkeypatch.setattr(numeric, "run", run)
    monkeypatch.setattr(numeric, "forward_bound", forward)
    result = run_case(case, "float64", timeout=None)
    assert result.status == "passed", result.message
    ats = [r for r in read if isinstance(r, PointBounds)]
    bounds = [r for r in read if isinstance(r, tuple)]
    assert len(ats) == 2 and ats[0] is not ats[1]          # one per point
    for at, (given, bound) in zip(ats, bounds):
        assert given is at
        own = next(b for a, d, b in kept if a is at and d == "float64")
        assert bound is own                                  # the point's own, not recomputed


def test_a_point_bounds_answers_only_for_its_own_point():
    from conftest import make_case

    case = make_case("sum(exp(x) * x)", {"x": [5]})
    rng = np.random.default_rng(0)
    point, other = {"x": rng.standard_normal(5)}, {"x": rng.standard_normal(5)}
    at = PointBounds()
    error_bounds(case, point, np.ones(()), "float64", at=at)
    assert at.get(case.output, point, "float64") is not None
    assert at.get(case.output, other, "float64") is None
    assert at.get(case.output, point, "float32") is None
    np.testing.assert_array_equal(forward_bound(case.output, other, at=at)[1],
                                  forward_bound(case.output, other)[1])


@pytest.mark.parametrize("fact", [dtypes.unit_roundoff, dtypes.accumulator_roundoff,
                                  dtypes.smallest_normal, dtypes.eps])
def test_an_unknown_dtype_is_an_error_not_float64s_facts(fact):
    from gradcheck.bounds.tolerance import pattern_tolerance

    with pytest.raises(ValueError, match="float128"):
        fact("float128")
    with pytest.raises(ValueError, match="float128"):
        pattern_tolerance("float128")


def test_every_dtype_fact_is_a_field_of_its_record():
    from gradcheck.bounds.tolerance import PATTERN_TOLERANCES

    for name, f in dtypes.FORMATS.items():
        assert PATTERN_TOLERANCES[name] == f.pattern
        assert f.accumulator in dtypes.FORMATS
        # (the model's u_acc: sums in float32 at least, as torch's CPU kernels form them)
        assert dtypes.accumulator_roundoff(name) == min(dtypes.unit_roundoff(name),
                                                       dtypes.unit_roundoff("float32"))
