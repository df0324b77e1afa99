"""gradcheck.heap: inside reused_allocations, a large temporary freed and allocated
again is served from the heap, not by fresh pages the kernel has to fault in (and zero)
again; inside given_back, a temporary of 1 MiB or more is given back when freed. Faults are counted relative to one fresh temporary's: with transparent huge
pages a 64 MiB array faults in 32 huge pages, without them 16384 small ones."""

import resource
import sys

import numpy as np
import pytest

from gradcheck.heap import _glibc, given_back, reused_allocations

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or _glibc() is None,
                                reason="glibc's malloc only")

SIZE = 8 << 20          # float64 elements: 64 MiB, over glibc's largest mmap threshold


def faults_of_repeated_temporaries(times: int, size: int = SIZE) -> int:
    """Minor page faults of ``times`` full-size temporaries, each written and freed, as
    a forward evaluated again and again makes them."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(times):
        a = np.empty(size)
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
    from gradcheck.checking import HEAP_ELEMENTS, _heap

    def case(n):
        return case_from_dict({"name": "c", "expr": "sum(x @ transpose(x))",
                               "inputs": {"x": {"shape": [n, 64]}}})

    # x @ xᵀ is the formula's largest array: n² elements, not the input's 64·n
    assert 2048 ** 2 >= HEAP_ELEMENTS > 2048 * 64
    assert _heap(case(2048)) is reused_allocations
    assert _heap(case(16)) is not reused_allocations


def test_inside_given_back_a_freed_temporary_of_a_few_mib_is_given_back():
    """2 MiB, under the 32 MiB threshold a process keeps after reused_allocations (where
    freed blocks stay resident in the heap): inside the block each temporary is a
    mapping of its own, its pages faulted in afresh each time; inside
    reused_allocations the heap serves them again."""
    size = 1 << 18   # float64 elements: 2 MiB, 512 pages
    with reused_allocations():
        pass         # (the process now keeps freed blocks under 32 MiB in its heap)
    faults_of_repeated_temporaries(1, size)
    assert faults_of_repeated_temporaries(4, size) <= 100
    with given_back():
        assert faults_of_repeated_temporaries(4, size) >= 4 * 400
        with reused_allocations():
            faults_of_repeated_temporaries(1, size)
            assert faults_of_repeated_temporaries(4, size) <= 100


def test_only_formulas_with_an_array_over_the_threshold_give_memory_back():
    from gradcheck.cases import case_from_dict
    from gradcheck.checking import GIVE_BACK_ELEMENTS, _heap

    def case(n):
        return case_from_dict({"name": "c", "expr": "sum(tanh(x))",
                               "inputs": {"x": {"shape": [n]}}})

    assert _heap(case(GIVE_BACK_ELEMENTS), GIVE_BACK_ELEMENTS, reuse=False) is given_back
    assert _heap(case(GIVE_BACK_ELEMENTS - 1), GIVE_BACK_ELEMENTS,
                 reuse=False) is not given_back
