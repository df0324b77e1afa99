"""The worst elements of a comparison (:class:`gradcheck.checking.compare.Tally`): the
:data:`WORST_KEPT` elements furthest past their tolerance, found slab by slab as one
stable sort of every element would order them."""

from __future__ import annotations

import numpy as np

WORST_KEPT = 5       # worst elements a result keeps for its report
SAMPLED = 1 << 14    # above this many entries, top_indices first cuts at a sample's
SAMPLE = 1 << 12     # k-th largest, a sample of about this many


def kth_best(candidates: list[tuple[float, int]]) -> float:
    """The WORST_KEPT-th largest ratio among ``candidates`` (NaN counting as -inf)."""
    ratios = sorted((r if r == r else -np.inf for r, _ in candidates), reverse=True)
    return ratios[WORST_KEPT - 1]


def top_indices(flat: np.ndarray, k: int, most: float = np.nan,
                at_least: float = -np.inf) -> np.ndarray:
    """Indices of the ``k`` largest entries, largest first, ties in index order (as a
    stable sort of all of them gives, in O(n) rather than O(n log n)); ``most``: the
    largest entry when known (NaN if any entry is: the NaNs are then put last).
    ``at_least``: of those, the ones at or above it alone (the caller holds k entries
    that large already: nothing below could be among the k worst), found by one
    comparison where they are few, not a partition of every entry."""
    if most != most:
        flat = np.where(np.isnan(flat), -np.inf, flat)   # NaN last, as the sort puts it
    if flat.size > SAMPLED:
        # (with a bar, the k largest are at or above both, or those at or above the bar
        # are fewer than k and all of them lie at or above the sample's cut too)
        at_least = max(at_least, sample_cut(flat, k))
    index = None
    if at_least > -np.inf:
        index = np.flatnonzero(flat >= at_least)   # (increasing: ties stay in order)
        flat = flat[index]
    if flat.size <= k:
        out = np.argsort(-flat, kind="stable")
    else:
        cut = np.partition(flat, flat.size - k)[flat.size - k]   # the k-th largest
        chosen = np.flatnonzero(flat >= cut)
        out = chosen[np.argsort(-flat[chosen], kind="stable")][:k]
    return out if index is None else index[out]


def sample_cut(flat: np.ndarray, k: int) -> float:
    """A threshold at or below the k-th largest of ``flat`` (no NaN): the k-th largest
    of about :data:`SAMPLE` entries at an even stride, since a subset's k-th largest
    cannot pass the whole's; -inf where the sample is shorter than k. The partition
    of :func:`top_indices` then runs over the few entries at or above it (about k
    times the stride) instead of every one."""
    sample = flat[::max(1, flat.size // SAMPLE)]
    if sample.size < k:
        return -np.inf
    return float(np.partition(sample, sample.size - k)[sample.size - k])
