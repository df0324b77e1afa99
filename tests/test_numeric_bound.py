"""The numeric witness's rounding term: one running bound at each end of a perturbed
segment, the larger doubled (numeric._bound_near), covers the running bound at every
point its differences evaluate (x ± h, x ± 2h, x ± 4h), at the sampled points and the
extreme ones (tiny magnitudes move most, relative to their size, under a step of 0.1%
of max(1, |x|))."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings

from conftest import make_case
from gradcheck.witnesses import numeric
from gradcheck.bounds.point import forward_bound
from gradcheck.sampling.points import case_points
from gradcheck.strategies import formulas


def _covers(root, env, name, x0, step) -> None:
    """The bound _bound_near gives for the segment x0 ± 4·step holds the running bound
    at each of the six points the differences evaluate."""
    far = numeric.FARTHEST * step
    near = numeric._bound_near(root, env, name, x0 - far, x0 + far)
    for k in (1, 2, numeric.FARTHEST):
        for sign in (1, -1):
            here = forward_bound(root, env, {name: x0 + sign * k * step})[1]
            assert np.all(here <= near), (name, sign * k, np.max(here - near))


def test_the_bound_at_a_segments_ends_covers_every_point_on_it():
    @settings(max_examples=120, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(formulas(depth=3, shapes=[[4, 3], [3], [4, 1]]))
    def check(table):
        case = make_case(table["expr"], table["inputs"], seed=table["seed"],
                         extreme_points=2)
        for point in case_points(case, "float64"):
            if point.near:
                # a kink point's segments may cross the kink (a selection flips inside
                # them); perturbing witnesses are judged there by the one-sided rule of
                # checking.case._add_near_kink, not by this rounding term
                continue
            env = {n: np.asarray(a) for n, a in point.values.items()}
            with np.errstate(all="ignore"):
                for spec in case.inputs:
                    x0 = np.asarray(env[spec.name], dtype=float)
                    if not spec.requires_grad or env[spec.name].dtype.kind != "f":
                        continue
                    h = numeric._step(x0)
                    _covers(case.output, env, spec.name, x0, h)    # every element
                    one = np.zeros(x0.size)
                    one[0] = h.reshape(-1)[0]                      # one element
                    _covers(case.output, env, spec.name, x0, one.reshape(x0.shape))

    check()
