"""gradcheck.process.heap: inside reused_allocations, a large temporary freed and allocated
again is served from the heap, not by fresh pages the kernel has to fault in (and zero)
again. Faults are counted relative to one fresh temporary's: with transparent huge
pages a 64 MiB array faults in 32 huge pages, without them 16384 small ones."""

import resource
import sys

import numpy as np
import pytest

from gradcheck.process.heap import _glibc, reused_allocations

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or _glibc() is None,
                                reason="glibc's malloc only")

SIZE = 8 << 20          # float64 elements: 64 MiB, over glibc's largest mmap threshold


def faults_of_repeated_temporaries(times: int) -> int:
    """Minor page faults of ``times`` full-size temporaries, each written and freed, as
    a forward evaluated again and again makes them."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(times):
        a = np.empty(SIZE)
        a.fill(1.0)
        del a
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


@pytest.fixture
def one():
    """The faults of one fresh temporary, outside any block. What the worker ran before
    may have left a large free chunk on top of the heap (glibc's dynamic thresholds keep
    up to 64 MiB there), which would serve the temporary without a fault: trimmed
    first."""
    _glibc().malloc_trim(0)
    found = min(faults_of_repeated_temporaries(1) for _ in range(3))
    assert found >= 16
    return found


def test_outside_every_large_temporary_faults_in_fresh_pages(one):
    assert faults_of_repeated_temporaries(4) >= 3.5 * one


def test_inside_a_freed_temporary_is_reused(one):
    with reused_allocations():
        faults_of_repeated_temporaries(1)        # the heap grows once
        assert faults_of_repeated_temporaries(3) <= 0.25 * one


def test_the_memory_is_given_back_after_the_block(one):
    with reused_allocations():
        faults_of_repeated_temporaries(2)
    # given back: a temporary after the block faults fresh pages in again
    assert faults_of_repeated_temporaries(2) >= 1.5 * one


def test_blocks_nest(one):
    with reused_allocations():
        with reused_allocations():
            faults_of_repeated_temporaries(1)
        # still inside the outer block: reused
        assert faults_of_repeated_temporaries(2) <= 0.25 * one


def test_only_formulas_with_an_array_over_the_threshold_reuse_the_heap():
    from gradcheck.cases import case_from_dict
    from gradcheck.process.heap import HEAP_ELEMENTS
    from gradcheck.sampling.points import for_formula

    def case(n):
        return case_from_dict({"name": "c", "expr": "sum(x @ transpose(x))",
                               "inputs": {"x": {"shape": [n, 64]}}})

    # x @ xᵀ is the formula's largest array: n² elements, not the input's 64·n
    assert 2048 ** 2 >= HEAP_ELEMENTS > 2048 * 64
    assert for_formula(case(2048).output) is reused_allocations
    assert for_formula(case(16).output) is not reused_allocations
