"""What a test's failed plain ``assert`` shows of the gradcheck results it was given
(the marker's case, the ``gradchecker`` fixture's calls: :func:`given`): after a
comparison of statuses (``assert result.status == "passed"``) the case and its
diagnosis (:func:`pytest_assertrepr_compare`), and under any failed assertion (``assert
result.passed``) the whole text report in a ``gradcheck report`` section of the failure
(:func:`pytest_runtest_makereport`), the same text ``assert_passed()`` raises
(:func:`gradcheck.report.text.failure_text`)."""

from __future__ import annotations

from typing import Any

import pytest

from ..report.text import failure_text

_SEEN = pytest.StashKey[list]()         # per item: every CaseResult its test was given
_ITEM = pytest.StashKey[Any]()          # per session: the item running now


def given(item: pytest.Item, result) -> Any:
    """Remember ``result`` (a CaseResult or RunResult) as given to ``item``'s test; it
    is returned."""
    cases = getattr(result, "cases", None)
    item.stash.setdefault(_SEEN, []).extend(cases if cases is not None else (result,))
    return result


def _unpassed(item: pytest.Item | None) -> list:
    return [c for c in (item.stash.get(_SEEN, []) if item is not None else ())
            if c.status not in ("passed", "approximate", "skipped")]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem):
    # (pytest_assertrepr_compare is given the config, not the item)
    item.config.stash[_ITEM] = item
    try:
        yield
    finally:
        item.config.stash[_ITEM] = None


def pytest_assertrepr_compare(config: pytest.Config, op: str, left, right):
    """A comparison of statuses or truth values that failed in a test given results that
    did not pass: the comparison, then each such case's title and diagnoses. (pytest
    cuts an explanation to 8 lines unless -vv: the whole report follows in a section,
    :func:`pytest_runtest_makereport`.)"""
    from ..base.result import STATUSES

    def shaped(a) -> bool:
        return isinstance(a, bool) or (isinstance(a, str) and a in STATUSES)

    if not (shaped(left) and shaped(right)) or left == right:
        return None
    cases = _unpassed(config.stash.get(_ITEM, None))
    if not cases:
        return None
    lines = [f"{left!r} {op} {right!r}"]
    for case in cases:
        lines.append(failure_text(case).splitlines()[0])
        lines += [f"  diagnosis: {d}" for d in dict.fromkeys(
            w.diagnosis for w in case.witnesses if w.diagnosis)]
    return lines


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    # A failed assertion in a test given results that did not pass: the text report of
    # each in a section of the failure, unless the failure's message holds it already
    # (assert_passed's own).
    report = (yield).get_result()
    if call.when != "call" or not report.failed or call.excinfo is None \
            or not call.excinfo.errisinstance(AssertionError):
        return
    said = str(call.excinfo.value)
    texts = [failure_text(c) for c in _unpassed(item)]
    texts = [t for t in texts if t.splitlines()[-1] not in said]
    if texts:
        report.sections.append(("gradcheck report", "\n\n".join(texts)))
