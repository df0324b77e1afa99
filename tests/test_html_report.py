"""The HTML report and the error maps it draws: a real failing run (custom ops whose
backward is wrong, beside passing cases, one with a name that is HTML) rendered to one
self-contained page; the maps checked against a brute-force computation of the same
numbers, slab cuts along every kind of axis included."""

from __future__ import annotations

import base64
import dataclasses
import json
import re
from html.parser import HTMLParser

import numpy as np
import pytest

from conftest import SQUARE_OP
from gradcheck.checking.compare import Tally
from gradcheck.checking.errormap import GRID, view
from gradcheck.report import render
from gradcheck.report.html import render_html
from gradcheck.base.result import (FAILED, HIST_EXPONENTS, PASSED, SKIPPED, CaseResult, ErrorMap,
                                   RunResult, WitnessResult)

HOSTILE = "<script>alert(1)</script>"
OPS = '''
import torch

class MatMulTransposed(torch.autograd.Function):
    """x @ W whose backward returns the transpose of W's gradient."""
    @staticmethod
    def forward(ctx, x, W):
        ctx.save_for_backward(x, W)
        return x @ W

    @staticmethod
    def backward(ctx, g):
        x, W = ctx.saved_tensors
        return g @ W.T, (x.T @ g).T


class SquareDoubled(torch.autograd.Function):
    """x * x whose backward is twice the gradient."""
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 4 * x * g
''' + SQUARE_OP

CASES = f'''
[[case]]
name = "matmul-transposed"
op = "wrong_ops:MatMulTransposed"
reference = "x @ W"
inputs.x = {{ shape = [3, 4] }}
inputs.W = {{ shape = [4, 4] }}
points = 1

[[case]]
name = "tanh-ok"
expr = "tanh(x)"
inputs.x = {{ shape = [4] }}
points = 1

[[case]]
name = "{HOSTILE}"
op = "wrong_ops:SquareDoubled"
reference = "x**2"
inputs.x = {{ shape = [5] }}
points = 1

[[case]]
name = "square-ok"
op = "wrong_ops:Square"
reference = "x**2"
inputs.x = {{ shape = [3] }}
points = 1
'''


def failing_run(folder) -> RunResult:
    """A real run of four cases, two of them wrong ops (shared with test_browser)."""
    import gradcheck

    (folder / "wrong_ops.py").write_text(OPS)
    path = folder / "cases.toml"
    path.write_text(CASES)
    return gradcheck.run(path)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> RunResult:
    return failing_run(tmp_path_factory.mktemp("html"))


@pytest.fixture(scope="module")
def page(run) -> str:
    return render_html(run)


class Page(HTMLParser):
    """Every start tag with its attributes, and the text of every script."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.scripts: list[str] = []
        self._in_script = False
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"
        if self._in_script:
            self.scripts.append("")

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts[-1] += data

    def all(self, tag: str) -> list[dict]:
        return [a for t, a in self.tags if t == tag]


def test_the_run_fails_where_the_ops_are_wrong(run):
    status = {c.name: c.status for c in run.cases}
    assert status == {"matmul-transposed": "failed", "tanh-ok": "passed",
                      HOSTILE: "failed", "square-ok": "passed"}


def test_the_page_is_self_contained(page):
    parsed = Page(page)
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert "http://" not in page and "https://" not in page and "url(" not in page
    for tag, attrs in parsed.tags:
        for key in ("src", "href", "action", "data"):
            value = attrs.get(key)
            assert value is None or value.startswith(("data:image/png;base64,", "#")), \
                (tag, key, value[:80])
    assert parsed.all("link") == [] and parsed.all("iframe") == []
    assert [a for a in parsed.all("script") if "src" in a] == []


def test_a_case_named_like_html_is_text_not_markup(page):
    parsed = Page(page)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert HOSTILE not in page
    assert len(parsed.scripts) == 1 and "alert(1)" not in parsed.scripts[0]


def test_the_summary_and_every_case_in_file_order(run, page):
    assert '<span class="passed">2 passed</span>' in page
    assert '<span class="failed">2 failed</span>' in page
    rows = re.findall(r'<td data-key="name" data-sort="([^"]*)"', page)
    assert rows == ["matmul-transposed", "tanh-ok", "&lt;script&gt;alert(1)&lt;/script&gt;",
                    "square-ok"]
    assert 'id="incomplete"' not in page


def test_the_error_column_is_the_worst_error_against_its_tolerance(run, page):
    """As every report shows it (mismatch.shown_error), sorted by the ratio."""
    from gradcheck.report.mismatch import shown_error

    cells = re.findall(r'<td data-key="err" data-sort="([^"]*)" class="num">([^<]*)</td>',
                       page)
    assert cells[0][1].endswith("✗")
    assert cells[0][1] in {f"{w.witness} {shown_error(w)}" for w in run.cases[0].witnesses}
    assert float(cells[0][0]) > 1 >= float(cells[1][0])   # failed, passed


def _section(page: str, i: int) -> str:
    m = re.search(f'<section class="case" id="case-{i}">(.*?)</section>', page, re.S)
    return m.group(1) if m else ""


def test_pictures_and_diagnosis_for_the_failing_cases_only(run, page):
    images = Page(page).all("img")
    maps = sum(len(w.error_maps) for c in run.cases for w in c.witnesses)
    assert len(images) == 2 * maps >= 4
    for img in images:   # real PNGs
        data = base64.b64decode(img["src"].split(",", 1)[1])
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 1000
    matmul = _section(page, 0)
    assert "W.grad is the transpose of the exact gradient" in matmul
    assert 'alt="heat map of W.grad"' in matmul and "worst elements" in matmul
    assert 'alt="heat map of d out0 / d W"' in matmul       # the Jacobian's
    assert "2 times the exact gradient" in _section(page, 2)
    assert _section(page, 1) == "" and _section(page, 3) == ""   # passing: a row only
    assert page.count("<img") == len(images)


def test_error_maps_are_kept_for_failing_witnesses_only(run):
    data = run.to_dict()
    for case in data["cases"]:
        for name, w in case["witnesses"].items():
            assert ("error_maps" in w) == (w["status"] != PASSED and w["mismatched"] > 0
                                           and w["checked"] > 0), (case["name"], name)
    matmul = run.cases[0]
    (grad,) = [m for m in matmul.witness("op.backward").error_maps]
    assert (grad.quantity, grad.shape, grad.view, grad.cell) == ("W.grad", (4, 4), (4, 4),
                                                                 (1, 1))
    # the transpose is right on the diagonal only
    diagonal = [abs(grad.grid[i][i]) for i in range(4)]
    assert max(diagonal) <= 1 < min(abs(grad.grid[i][j]) for i in range(4)
                                    for j in range(4) if i != j)
    jac = next(m for m in matmul.witness("op.jacobian").error_maps if m.quantity.endswith("W"))
    assert (jac.kind, jac.shape, jac.view) == ("jacobian", (12, 4, 4), (12, 16))
    doubled = run.cases[2].witness("op.backward").error_maps[0]
    assert doubled.view == (1, 5) and all(abs(x) > 1 for x in doubled.grid[0])


def test_round_trip_keeps_the_maps_exactly(run):
    data = run.to_dict()
    again = RunResult.from_dict(json.loads(json.dumps(data)))
    assert again.to_dict() == data
    assert [w.error_maps for c in again.cases for w in c.witnesses] == \
        [w.error_maps for c in run.cases for w in c.witnesses]
    assert json.loads(render(run, "json"))["cases"] == data["cases"]


# --------------------------------------------------------------------------- the maps


def _brute(got, exp, tol):
    """The map of :mod:`gradcheck.checking.errormap` computed from whole arrays at once."""
    signed = ((got - exp) / tol).reshape(view(exp.shape))
    rows, cols = signed.shape
    step = (-(-rows // GRID), -(-cols // GRID))
    cells = (-(-rows // step[0]), -(-cols // step[1]))
    padded = np.zeros((cells[0] * step[0], cells[1] * step[1]))
    padded[:rows, :cols] = signed
    blocks = padded.reshape(cells[0], step[0], cells[1], step[1]).transpose(0, 2, 1, 3)
    blocks = blocks.reshape(cells[0], cells[1], -1)
    pick = np.take_along_axis(blocks, np.abs(blocks).argmax(axis=2)[..., None], 2)[..., 0]
    counts = np.bincount(np.searchsorted(10.0 ** np.array(HIST_EXPONENTS),
                                         np.abs(signed).ravel()), minlength=26)
    return pick, step, counts


@pytest.mark.parametrize("shape", [(50, 7), (300, 500), (3, 400, 70), (200_000,), ()])
def test_the_map_is_the_brute_force_one_whatever_the_slabs(shape):
    rng = np.random.default_rng(7)
    exp = rng.standard_normal(shape)
    got = exp + rng.standard_normal(shape) * 10.0 ** rng.uniform(-8, 0, shape)
    tol = np.full(shape, 1e-3)
    tally = Tally("w", "float64")
    tally.add_quantities({"q": got}, {"q": exp}, 0, {"q": tol})
    (m,) = tally.result().error_maps
    pick, step, counts = _brute(got, exp, tol)
    assert m.view == view(shape) and m.cell == step and m.shape == shape
    assert np.allclose(np.array(m.grid), pick, rtol=5e-3, atol=0)
    assert m.counts == tuple(counts) and m.total == exp.size
    assert m.mismatched == tally.mismatched == int(np.count_nonzero(np.abs(got - exp) > tol))
    assert len(m.grid) <= GRID and len(m.grid[0]) <= GRID


def test_a_large_quantity_is_mapped_from_the_point_where_it_differs():
    exp = np.ones((400, 300))
    tally = Tally("w", "float64")
    tally.add_quantities({"q": exp}, {"q": exp}, 0, {"q": 1e-9})    # agrees
    assert "q" not in tally.maps                 # nothing spent on a passing layer
    bad = exp.copy()
    bad[390, 299] = 1.5                          # in the last slab
    tally.add_quantities({"q": bad}, {"q": exp}, 1, {"q": 1e-9})
    (m,) = tally.result().error_maps
    assert m.total == exp.size and m.mismatched == 1
    assert m.grid[390 // m.cell[0]][299 // m.cell[1]] == pytest.approx(5e8, rel=1e-2)
    assert sum(abs(x) > 1 for row in m.grid for x in row) == 1
    assert sum(m.counts) == exp.size and m.counts[0] == exp.size - 1


def test_a_passing_witness_keeps_no_map_and_maps_can_be_off():
    exp = np.arange(6.0).reshape(2, 3)
    tally = Tally("w", "float64")
    tally.add_quantities({"q": exp}, {"q": exp}, 0, {"q": 1e-9})
    assert tally.result().error_maps == () and "error_maps" not in tally.result().to_dict()
    off = Tally("w", "float64")
    off.maps = None
    off.add_quantities({"q": exp + 1}, {"q": exp}, 0, {"q": 1e-9})
    assert off.result().status == "failed" and off.result().error_maps == ()


def test_pictures_draw_infinite_and_missing_cells():
    """An infinite ratio (a tolerance of 0) takes the end colour; a cell without an
    element is grey; a name with mathtext and workflow-command marks is plain text."""
    from gradcheck.report.pictures import heat_map, histogram

    m = ErrorMap("x.grad·u ##[x] $\\alpha$", (3,), (1, 3), (1, 1),
                 ((float("inf"), None, -0.5),), (1,) * 26, 1, 3)
    assert ErrorMap.from_dict(json.loads(json.dumps(m.to_dict()))) == m
    for draw in (heat_map, histogram):
        url = draw(m)
        assert base64.b64decode(url.split(",", 1)[1]).startswith(b"\x89PNG")


def _synthetic(passing: int, failing: int, maps: int) -> RunResult:
    m = ErrorMap("x.grad", (2, 2), (2, 2), (1, 1), ((0.5, -3.0), (None, 2.0)),
                 (1,) + (0,) * 24 + (2,), 2, 3)
    bad = WitnessResult("torch", FAILED, checked=4, mismatched=2, message="differs",
                        error_maps=(m,) * maps)
    ok = WitnessResult("torch", PASSED, checked=4, max_rel_err=1e-16)
    cases = [CaseResult(f"ok-{i}", "cases/many.toml", i + 1, "float64", PASSED,
                        witnesses=(ok,)) for i in range(passing)]
    cases += [CaseResult(f"bad-{i}", "cases/many.toml", i + 1, "float64", FAILED,
                         witnesses=(bad,)) for i in range(failing)]
    return RunResult(tuple(cases), seconds=2.0)


def test_hundreds_of_passing_cases_make_a_small_page():
    small, large = render_html(_synthetic(10, 0, 0)), render_html(_synthetic(510, 0, 0))
    assert "<img" not in large and "<section" not in large
    assert (len(large) - len(small)) / 500 < 1200      # one table row each
    assert large.count('<td data-key="name"') == 510


def test_a_page_draws_a_bounded_number_of_maps(monkeypatch):
    from gradcheck.report import html

    monkeypatch.setattr(html, "MAPS_DRAWN", 3)
    page = render_html(_synthetic(0, 2, 2))
    assert page.count("<img") == 2 * 3
    assert page.count('class="left-out"') == 1 and "1 of the 4 error maps not drawn" in page
    assert page.count('class="left-out-here"') == 1     # the witness it left out, once
    monkeypatch.setattr(html, "MAPS_DRAWN", 4)
    assert 'class="left-out' not in render_html(_synthetic(0, 2, 2))


def test_an_interrupted_run_says_so():
    partial = dataclasses.replace(_synthetic(2, 0, 0), interrupted="SIGINT", not_run=3)
    page = render_html(partial)
    assert 'id="incomplete"' in page and "interrupted by SIGINT" in page
    assert "3 case run(s) did not finish" in page


def test_the_histogram_puts_exact_elements_first_and_nan_and_inf_last():
    from gradcheck.checking.errormap import MapAccumulator

    acc = MapAccumulator("q", (6,))
    signed = np.array([[0.0, -1e-7, 1.0, -1.5, np.inf, np.nan]])
    acc.add(signed, np.zeros(1, dtype=np.int64), np.arange(6))
    m = acc.result()
    assert m.counts[0] == 2 and m.counts[-1] == 2 and sum(m.counts) == 6
    edges = 10.0 ** np.array(HIST_EXPONENTS)
    assert m.counts[int(np.searchsorted(edges, 1.0))] == 1        # 1 is within: (.., 1]
    assert m.counts[int(np.searchsorted(edges, 1.5))] == 1
    # (a NaN ratio counts as no mismatch, as the tally counts it)
    assert m.mismatched == 2 and m.grid == ((0.0, -1e-07, 1.0, -1.5, float("inf"), None),)


def test_the_grad_fn_chain_of_a_failing_witness_is_shown_escaped():
    case = _synthetic(0, 1, 0).cases[0]
    torch = dataclasses.replace(case.witnesses[0], grad_fn=("MulBackward0", "<Evil>",
                                                            "AccumulateGrad"))
    page = render_html(RunResult((dataclasses.replace(case, witnesses=(torch,)),)))
    chain = re.search(r'<ol class="chain">(.*?)</ol>', page).group(1)
    assert re.findall(r"<li>(.*?)</li>", chain) == ["MulBackward0", "&lt;Evil&gt;",
                                                    "AccumulateGrad"]


def test_merged_tallies_keep_the_jacobian_rows_where_they_belong():
    exp = np.zeros(3)
    a, b, both = (Tally("op.jacobian", "float64") for _ in range(3))
    rows = {"0": np.array([5.0, 0, 0]), "1": np.array([0, -7.0, 0])}
    for tally, order in ((a, "01"), (b, "10"), (both, "0110")):
        for idx in order:
            tally.add_quantities({f"d out0[{idx}] / d x": rows[idx]},
                                 {f"d out0[{idx}] / d x": exp}, 0,
                                 {f"d out0[{idx}] / d x": 1.0})
    a.merge(b)
    (merged,), (direct,) = a.result().error_maps, both.result().error_maps
    assert merged == direct and merged.grid == ((5.0, 0.0, 0.0), (0.0, -7.0, 0.0))
    assert (merged.kind, merged.shape) == ("jacobian", (2, 3))


def test_a_jacobian_map_keeps_the_rows_that_agreed_before_one_differed():
    """Rows are mapped only once one differs: those of that point that agreed before
    it are mapped then too (pale, not missing); a point where nothing differed is not."""
    tally = Tally("op.jacobian", "float64")
    row = lambda i: f"d out0[{i}] / d x"           # noqa: E731
    exp = np.zeros(2)
    for i, got in enumerate(([0.5, 0], [0, 0], [3.0, 0])):      # point 0: all agree
        tally.add_quantities({row(i): np.array(got) * 0.1}, {row(i): exp}, 0, {row(i): 1.0})
    assert tally.maps == {}
    for i, got in enumerate(([0.5, 0], [0, 0.25], [3.0, 0])):   # point 1: the last differs
        tally.add_quantities({row(i): np.array(got)}, {row(i): exp}, 1, {row(i): 1.0})
    (jac,) = tally.result().error_maps
    assert jac.grid == ((0.5, 0.0), (0.0, 0.25), (3.0, 0.0)) and jac.mismatched == 1


def test_a_gradient_is_mapped_from_the_point_where_it_first_differs():
    tally = Tally("torch", "float64")
    exp = np.zeros(3)
    tally.add_quantities({"x.grad": np.array([0.9, 0, 0])}, {"x.grad": exp}, 0,
                         {"x.grad": 1.0})
    assert tally.maps == {}                      # agreed: nothing built
    tally.add_quantities({"x.grad": np.array([0, 2.0, 0])}, {"x.grad": exp}, 1,
                         {"x.grad": 1.0})
    (m,) = tally.result().error_maps
    assert m.grid == ((0.0, 2.0, 0.0),)


def test_the_page_says_why_a_case_was_skipped():
    skipped = CaseResult("on-gpu", "cases/a.toml", 3, "float64", SKIPPED,
                         message="device cuda: no such device here")
    page = render_html(RunResult((skipped,)))
    items = re.findall(r'<ul class="skipped">(.*?)</ul>', page, re.S)
    assert items and "<code>on-gpu[float64]</code>: device cuda: no such device here" in items[0]
    assert 'id="skipped"' not in render_html(RunResult(()))
