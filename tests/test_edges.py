"""Right formulas at the edges (rounding that flips a tie, overflow as written, finite
differences that cannot resolve, torch's library functions at their real accuracy,
underflow): each of tests/fixtures/edges.toml passes in the dtype it names."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradcheck import run

EDGES = Path(__file__).parent / "fixtures" / "edges.toml"


@pytest.fixture(scope="module")
def edges():
    return run([EDGES]).cases


def test_every_example_passes(edges):
    assert len(edges) == 22
    wrong = [(c.name, c.dtype, c.status, c.message) for c in edges if c.status != "passed"]
    assert not wrong, wrong


def test_the_flipped_decisions_and_the_unresolved_steps_say_so(edges):
    notes = {(c.name, c.dtype): " ".join(c.notes) for c in edges}
    assert "decisions in float32" in notes[("flip-max-erf", "float32")]
    assert "decisions in bfloat16" in notes[("flip-layernorm-abs", "bfloat16")]
    assert "at a finer step they agree" in notes[("numeric-std-tanh", "float64")]
    assert "the exp inside silu overflows" in notes[("underflow-silu", "float32")]
