"""The false-alarm sweep (gradcheck bench --section sweep): its generator draws the same
layer-like formulas every time, every one of them valid, and a derandomized sample of
it runs with no false alarm."""

from __future__ import annotations

import tomllib

from gradcheck.cli.bench import sweep
from gradcheck.cases import case_from_dict


def test_the_generator_is_seeded_and_every_formula_is_a_valid_case():
    first, again = sweep.formulas(40, seed=5), sweep.formulas(40, seed=5)
    assert first == again and first != sweep.formulas(40, seed=6)
    parsed = tomllib.loads(sweep.to_toml(first))["case"]
    assert len(parsed) == 40
    for raw in parsed:   # raises CaseFileError on a formula the language refuses
        case_from_dict(dict(raw), file="<sweep>")


def test_the_default_sweep_has_its_runs_and_its_layer_kinds():
    drawn = sweep.formulas()
    assert sum(len(c["dtype"]) for c in drawn) >= 1500
    exprs = " ".join(c["expr"] for c in drawn)
    for part in ("@ W + b", "softmax(q @", "sqrt(var(", "(x @ A) * y", "sort(",
                 "cumsum(", "std(", "norm(", "logsumexp(", "max("):
        assert part in exprs, part


def test_a_sample_of_the_sweep_has_no_false_alarm():
    found = sweep.run_sweep(16, seed=0, jobs=1)
    assert found.runs == sum(len(c["dtype"]) for c in sweep.formulas(16, seed=0))
    assert found.false_alarms == 0, sweep.markdown(found)
    text = sweep.markdown(found)
    assert "| float64 |" in text and "false alarms" in text
