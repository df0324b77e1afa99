"""Each family's places a new row must fill (gradcheck.rules.families.NEEDS): every row
of the table fills its family's, and a row that lacks one is caught."""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path

import pytest

from gradcheck.rules import FAMILIES, RULES
from gradcheck.rules.complex import COMPLEX
from gradcheck.rules.composite.bounds import BOUNDS
from gradcheck.rules.families import COMPLEX as COMPLEX_FAMILY, NEEDS, missing

ROOT = Path(__file__).resolve().parents[1]


def _resolve(place: str):
    module, _, name = place.partition(":")
    return getattr(importlib.import_module(module), name)   # (raises: a stale name)


REGISTRIES = {r: _resolve(r) for needs in NEEDS.values() for r in needs.registries}


def test_every_family_declares_its_places_and_they_exist():
    assert set(NEEDS) == set(FAMILIES) | {COMPLEX_FAMILY}
    for family, needs in NEEDS.items():
        assert needs.fields and needs.files, family
        row = COMPLEX["mul"] if family == COMPLEX_FAMILY else RULES["add"]
        for f in needs.fields:
            assert f in {x.name for x in dataclasses.fields(row)}, (family, f)
        for path in needs.files:
            assert (ROOT / path.split(" ")[0]).is_file(), (family, path)


@pytest.mark.parametrize("name", list(RULES))
def test_every_row_fills_its_familys_places(name):
    assert missing(RULES[name], REGISTRIES) == []


@pytest.mark.parametrize("name", list(COMPLEX))
def test_every_complex_row_fills_its_places(name):
    assert COMPLEX[name].family == COMPLEX_FAMILY
    assert missing(COMPLEX[name], REGISTRIES) == []
    assert missing(dataclasses.replace(COMPLEX[name], torch=None), REGISTRIES) == ["torch"]


def test_a_composite_rows_rounding_is_its_registered_bound():
    for name, rule in RULES.items():
        if rule.family == "composite":
            assert rule.rounding is BOUNDS[name], name


@pytest.mark.parametrize("row, change, lacks", [
    # a structural row without its tensor-level adjoint
    ("reshape", {"tensor": None}, ["tensor"]),
    # ...or without the example its drawn formulas vary
    ("flip", {"example": ""}, ["example"]),
    # a reduction without axis=/keepdims=
    ("sum", {"params": ()}, ["params"]),
    # a bilinear row whose engine column has one VJP for two operands
    ("matmul", {"engine": dataclasses.replace(RULES["matmul"].engine,
                                              vjps=RULES["matmul"].engine.vjps[:1])},
     ["engine (one VJP per operand)"]),
    # a new composite row whose rounding bound was never written into BOUNDS
    ("softmax", {"name": "sparsemax"}, ["gradcheck.rules.composite.bounds:BOUNDS"]),
    # a new pooling without its hand-written templates over images
    ("max_pool2d", {"name": "lp_pool2d"}, ["gradcheck.generate.templates:SPECIAL"]),
    # a comparison without its operator
    ("lt", {"symbol": None}, ["symbol"]),
    # an elementwise row without its torch column
    ("exp", {"torch": None}, ["torch"]),
])
def test_an_incomplete_row_is_caught(row, change, lacks):
    incomplete = dataclasses.replace(RULES[row], **change)
    assert missing(incomplete, REGISTRIES) == lacks
