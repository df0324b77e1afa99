"""A run's results come in file order, and every report keeps it: the error of an
invalid case stands where that case is written, and that of a file that cannot be read
where the file comes in the paths, not all of them at the top."""

from __future__ import annotations

import dataclasses
import json
import textwrap
import xml.etree.ElementTree as ET

import pytest

from gradcheck.cases import read_entries
from gradcheck.base.errors import CaseFileError
from gradcheck.report import render
from gradcheck.session.runner import run


def case(name: str, expr: str = "sum(x**2)") -> str:
    return textwrap.dedent(f"""
        [[case]]
        name = "{name}"
        expr = "{expr}"
        inputs.x.shape = [3]
        points = 1
        extreme_points = 0
        dtype = ["float64"]
        """)


BROKEN = "this is [[[ not TOML"


def names(result) -> list[str]:
    return [c.name for c in result.cases]


def test_an_invalid_case_keeps_its_place_in_its_file(tmp_path):
    (tmp_path / "cases.toml").write_text(case("first-ok") + case("broken-one", "sum(x**")
                                         + case("last-ok"))
    result = run([tmp_path])
    assert names(result) == ["first-ok", "broken-one", "last-ok"]
    assert [c.status for c in result.cases] == ["passed", "error", "passed"]
    assert result.cases[1].error_kind == "case"


def test_an_unreadable_file_keeps_its_place_among_the_files(tmp_path):
    (tmp_path / "a.toml").write_text(case("a-one") + case("a-two"))
    (tmp_path / "b.toml").write_text(BROKEN)
    (tmp_path / "c.toml").write_text(case("c-one"))
    # a folder's files in name order, then a file named after it
    (tmp_path / "z").mkdir()
    (tmp_path / "z" / "broken.yaml").write_text("[unclosed")
    result = run([tmp_path / "z", tmp_path / "a.toml", tmp_path / "b.toml",
                  tmp_path / "c.toml"])
    assert names(result) == ["broken.yaml", "a-one", "a-two", "b.toml", "c-one"]
    assert [c.status for c in result.cases] == ["error", "passed", "passed", "error",
                                                "passed"]


def test_the_first_file_unreadable_comes_first(tmp_path):
    (tmp_path / "a.toml").write_text(BROKEN)
    (tmp_path / "b.toml").write_text(case("b-one") + case("b-two"))
    assert names(run([tmp_path])) == ["a.toml", "b-one", "b-two"]


def test_read_entries_is_file_order_and_read_paths_splits_it(tmp_path):
    from gradcheck.cases import read_paths

    (tmp_path / "a.toml").write_text(case("one") + case("two", "sum(x**") + case("three"))
    (tmp_path / "b.toml").write_text(BROKEN)
    entries = read_entries([tmp_path])
    kinds = [type(e).__name__ for e in entries]
    assert kinds == ["Case", "CaseFileError", "Case", "CaseFileError"]
    cases, errors = read_paths([tmp_path])
    assert [c.name for c in cases] == ["one", "three"]
    assert [e.case for e in errors] == ["two", None]
    assert all(isinstance(e, CaseFileError) for e in errors)


def test_keyword_keeps_the_order_of_what_it_selects(tmp_path):
    (tmp_path / "a.toml").write_text(case("keep-1") + case("keep-bad", "sum(x**")
                                     + case("drop") + case("keep-2"))
    (tmp_path / "b.toml").write_text(BROKEN)
    assert names(run([tmp_path], keyword="keep")) == ["keep-1", "keep-bad", "keep-2",
                                                      "b.toml"]


def test_run_takes_its_options_as_keywords_or_as_one_object(tmp_path):
    """gradcheck.run(paths, **options), as docs/testing.md documents it, is
    run(paths, RunOptions(**options)); a keyword overrides the object's field."""
    import gradcheck
    from gradcheck.session.runner import RunOptions

    (tmp_path / "a.toml").write_text(case("keep-1") + case("drop") + case("keep-2"))
    by_keywords = gradcheck.run([tmp_path], keyword="keep", witnesses=["torch"])
    by_object = run([tmp_path], RunOptions(keyword="keep", witnesses="torch"))
    replaced = run([tmp_path], RunOptions(keyword="drop", witnesses=("torch",)),
                   keyword="keep")
    for result in (by_keywords, by_object, replaced):
        assert names(result) == ["keep-1", "keep-2"]
        assert [[w.witness for w in c.witnesses] for c in result.cases] == [["torch"]] * 2
    with pytest.raises(TypeError, match="keywords"):
        run([tmp_path], keywords="keep")   # a misspelt option is no silent no-op
    with pytest.raises(dataclasses.FrozenInstanceError):
        RunOptions().seed = 1


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("order")
    (folder / "a.toml").write_text(BROKEN)
    (folder / "b.toml").write_text(case("first-ok") + case("broken-one", "sum(x**")
                                   + case("last-ok"))
    return run([folder])


ORDER = ["a.toml", "first-ok", "broken-one", "last-ok"]


def _in_order(text: str, wanted: list[str]) -> bool:
    at = [text.find(w) for w in wanted]
    return -1 not in at and at == sorted(at)


def test_json_keeps_file_order(mixed):
    assert [c["name"] for c in json.loads(render(mixed, "json"))["cases"]] == ORDER


def test_junit_keeps_file_order(mixed):
    root = ET.fromstring(render(mixed, "junit"))
    # a run's name carries its dtype: first-ok[float64]
    assert [t.get("name").split("[")[0] for t in root.iter("testcase")] == ORDER


def test_text_keeps_file_order(mixed):
    text = render(mixed, "text")
    assert _in_order(text, [f"ERROR  {ORDER[0]}", f"PASS   {ORDER[1]}", f"ERROR  {ORDER[2]}",
                            f"PASS   {ORDER[3]}"]), text


def test_markdown_keeps_file_order(mixed):
    text = render(mixed, "markdown")
    problems, _, every = text.partition("<details>")
    assert _in_order(problems, ["<code>a.toml</code>", "<code>broken-one</code>"])
    assert _in_order(every, [f"<code>{n}</code>" for n in ORDER]), every
