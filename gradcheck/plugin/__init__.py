"""gradcheck's pytest plugin (entry point ``pytest11``; active wherever gradcheck is
installed).

* The ``gradchecker`` fixture: ``run_case_file``, ``check_op``/``assert_op`` and
  ``check``/``assert_gradients``, the library calls of :mod:`gradcheck` from a test.
  (Named so as to shadow neither the module in a test that imports it nor the standard
  library's ``gc``; ``gradcheck``, its name in 0.1.0, is a deprecated alias.)
* ``@pytest.mark.gradcheck_cases("cases/", dtype=None, k=None)`` on a test function that
  takes a ``gradcheck_case`` argument: every case of the case files (in every dtype) is a
  test item of its own, ``test_name[file::case[dtype]]``. The item fails with the case's
  diagnosis when the case fails or errors; the test body receives the
  :class:`~gradcheck.base.result.CaseResult` and may check more. Relative paths are resolved
  against the folder of the test file that carries the marker.
* ``--gradcheck-report=PATH``: one JSON report (the schema of ``gradcheck run --format
  json``) of every case-file case run in the session, written atomically at the end, also
  under pytest-xdist (results travel to the controller on the test reports).
* ``--gradcheck-collect``: ``pytest cases/`` collects the case files themselves.
* The results a test is given (the marker's case, the fixture's calls) have
  ``assert_passed()`` (:class:`gradcheck.testing.CheckedCase`); a plain ``assert`` on
  them that fails shows their report too: ``pytest_assertrepr_compare`` after a
  comparison of statuses (or of ``passed``), and a ``gradcheck report`` section of the
  failure with the whole text report.

pytest imports this module in every project that has gradcheck installed, so it imports
nothing heavy (torch, SymPy, NumPy) until a gradcheck feature is used.
"""

from __future__ import annotations

import re
import time
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from ..process.timelimit import DEFAULT_TIMEOUT
from ..report.text import failure_text
from . import failures
from .failures import given as _given

__all__ = ["GradcheckFixture", "CaseFile", "CaseItem"]

_SUFFIXES = (".toml", ".yaml", ".yml")
_PHASES = {"setup": 0, "call": 1, "teardown": 2}
_MARKER_OPTIONS = {"dtype", "k", "keyword", "seed", "points", "extreme_points", "witnesses",
                   "device", "timeout", "allow_op_modules"}

_STATE = pytest.StashKey["_State"]()
_PENDING = pytest.StashKey[list]()      # per item: CaseResults recorded in the current phase
_ORDER = pytest.StashKey[int]()         # per item: its index in the session's collection
_CASE = pytest.StashKey[Any]()          # per marked item: the CaseResult of its case


# --------------------------------------------------------------------------- set-up

def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gradcheck", "gradcheck (gradient checks)")
    group.addoption("--gradcheck-report", metavar="PATH", default=None,
                    help="write one JSON report (the schema of `gradcheck run --format "
                         "json`) of every gradcheck case run in the session to PATH")
    group.addoption("--gradcheck-collect", action="store_true", default=False,
                    help="collect gradcheck case files (.toml/.yaml/.yml holding cases) "
                         "as tests: one item per case and dtype")


@dataclass
class _State:
    last_case: int | None = None      # id() of the case whose reference is cached
    cache: dict | None = None
    reporter: "_Reporter | None" = None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "gradcheck_cases(*paths, dtype=None, k=None, seed=None, points=None, "
        f"extreme_points=None, witnesses=None, device=None, timeout={DEFAULT_TIMEOUT:g}): "
        "run every case "
        "of these gradcheck case files (paths relative to the test file's folder) as its "
        "own test item; the test takes a `gradcheck_case` argument, the CaseResult")
    state = _State(cache={})
    # (its hooks: a failed plain assert on a result shows the result's report)
    config.pluginmanager.register(failures, "gradcheck-failures")
    report = config.getoption("gradcheck_report", None)
    if report:
        path = Path(report).expanduser()
        if not path.is_absolute():
            path = Path(config.invocation_params.dir) / path
        _confined(path, Path(config.invocation_params.dir))
        state.reporter = _Reporter(config, path)
        config.pluginmanager.register(state.reporter, "gradcheck-reporter")
    config.stash[_STATE] = state


def _confined(path: Path, start: Path) -> None:
    """Raise pytest's usage error where ``--gradcheck-report`` would write outside the
    project pytest runs in (see :mod:`gradcheck.project.confine`): addopts in a pyproject.toml
    can set it, and a pull request can change that file."""
    from ..project.confine import write_problem
    from ..project.settings import project_root

    problem = write_problem(path, project_root(start))
    if problem:
        raise pytest.UsageError(f"--gradcheck-report: {problem}")


def _state(config: pytest.Config) -> _State:
    return config.stash[_STATE]


# --------------------------------------------------------------------------- recording

def _record(item: pytest.Item, result) -> None:
    """Keep ``result`` for the session report; it travels on the item's next test report."""
    if _state(item.config).reporter is not None:
        item.stash.setdefault(_PENDING, []).append(result)


def _relative(config: pytest.Config, file: str) -> str:
    """A case's file relative to the rootdir (as pytest shows paths), when it is inside."""
    if not file or file.startswith("<"):
        return file
    try:
        return Path(file).resolve().relative_to(config.rootpath.resolve()).as_posix()
    except (ValueError, OSError):
        return file


def _located(config: pytest.Config, result):
    return replace(result, file=_relative(config, result.file))


class _Reporter:
    """``--gradcheck-report``: gathers the case results of the session's test reports and
    writes them as one JSON report at the end (on the xdist controller only).

    Results ride on the test reports (``report.gradcheck_cases``): pytest serializes a
    report's extra attributes, so pytest-xdist carries them from worker to controller."""

    def __init__(self, config: pytest.Config, path: Path):
        self.config = config
        self.path = path
        self.start = time.perf_counter()
        self.records: list[dict] = []
        self.written: int | None = None

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # Every xdist worker collects the same items in the same order: the index orders
        # the report the same way however the items were spread over the workers.
        for index, item in enumerate(session.items):
            item.stash[_ORDER] = index

    # an old-style wrapper: new-style ones need pluggy >= 1.1, and pytest loads this
    # plugin in every project that installs gradcheck, whatever its pytest
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call):
        report = (yield).get_result()
        pending = item.stash.get(_PENDING, None)
        if pending:
            index = item.stash.get(_ORDER, 0)
            phase = _PHASES.get(call.when, 3)
            report.gradcheck_cases = [
                {"order": [index, phase, seq], "case": _located(self.config, r).to_dict()}
                for seq, r in enumerate(pending)]
            pending.clear()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.records.extend(getattr(report, "gradcheck_cases", None) or ())

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if hasattr(self.config, "workerinput"):   # an xdist worker: the controller writes
            return
        from ..base.io import write_atomic
        from ..report.json import render_json
        from ..base.result import CaseResult, RunResult

        # a record is a dict (it may have come from an xdist worker): back to the result
        records = sorted(self.records, key=lambda r: r["order"])
        cases = tuple(CaseResult.from_dict(r["case"]) for r in records)
        write_atomic(self.path, render_json(
            RunResult(cases=cases, seconds=time.perf_counter() - self.start)))
        self.written = len(cases)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.written is not None:
            terminalreporter.write_sep(   # as junitxml announces its file
                "-", f"gradcheck report: {self.written} case run(s) written to {self.path}")


# --------------------------------------------------------------------------- running

@dataclass(frozen=True)
class _Run:
    """One item's work: a case in a dtype, or a case-file error to report."""

    case: Any = None
    dtype: str = "-"
    error: Any = None
    timeout: float | None = DEFAULT_TIMEOUT

    def result(self, config: pytest.Config):
        if self.error is not None:
            from ..checking.case import file_error

            return file_error(self.error)
        from ..checking.case import run_case

        state = _state(config)
        # A case's symbolic reference is reused across its dtypes (adjacent items); keep
        # only the latest so a long session does not hold every compiled reference.
        if state.last_case != id(self.case):
            state.cache, state.last_case = {}, id(self.case)
        # (a passing item shows nothing: its formulas only go to --gradcheck-report)
        return run_case(self.case, self.dtype, cache=state.cache, timeout=self.timeout,
                        formulas=state.reporter is not None)


def _fail_unless_passed(result) -> None:
    __tracebackhide__ = True
    if result.status == "skipped":
        pytest.skip(result.message or "skipped")
    if result.status not in ("passed", "skipped", "approximate"):
        pytest.fail(failure_text(result), pytrace=False)
    _warn_if_approximate(result)


def _warn_if_approximate(result) -> None:
    """An approximate case (within float32's tolerance only, in float64) passes with a
    warning in pytest's summary: its text and how to re-run it (``strict = true`` in
    the case makes it a failure)."""
    if result.status == "approximate":
        import warnings

        from ..base.errors import ApproximateGradient

        warnings.warn(ApproximateGradient(failure_text(result)), stacklevel=2)


def _runs_for(marker, base: Path) -> tuple[list[_Run], list[str]]:
    """The runs of one ``gradcheck_cases`` marker and their ids, ``file::case[dtype]``
    (``file::name`` for a case-file error). Files come in order, each file's errors
    before its cases; ``file`` is relative to the named folder (the name of a file)."""
    from ..cases import case_files, read_file
    from ..checking.case import file_error
    from ..base.errors import CaseFileError
    from ..report.details import title
    from ..session.runner import RunOptions, select

    options = dict(marker.kwargs)
    unknown = sorted(set(options) - _MARKER_OPTIONS)
    if unknown:
        raise pytest.Collector.CollectError(
            f"gradcheck_cases: unknown option {', '.join(unknown)} "
            f"(allowed: {', '.join(sorted(_MARKER_OPTIONS))})")
    paths = [p for arg in marker.args
             for p in (arg if isinstance(arg, (list, tuple)) else [arg])]
    if not paths:
        raise pytest.Collector.CollectError(
            "gradcheck_cases: name at least one case file or folder")
    k = options.pop("k", None)
    chosen = RunOptions(keyword=options.pop("keyword", None) or k, **options)
    runs, ids = [], []
    for given in paths:
        root = Path(given).expanduser()
        root = root if root.is_absolute() else base / root
        try:
            files = case_files([root])
        except CaseFileError as exc:
            raise pytest.Collector.CollectError(f"gradcheck_cases: {exc}") from None
        for file in files:
            label = file.relative_to(root).as_posix() if root.is_dir() else file.name
            cases, errors = read_file(file)
            for e in errors:   # reported whatever k says, as `gradcheck run` does
                if chosen.keyword and e.case is not None and chosen.keyword not in e.case:
                    continue
                runs.append(_Run(error=e))
                ids.append(f"{label}::{title(file_error(e))}")
            for case, dtype in select(cases, chosen):
                runs.append(_Run(case, dtype, timeout=chosen.timeout))
                ids.append(f"{label}::{case.name}[{dtype}]")
    return runs, ids


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    markers = list(metafunc.definition.iter_markers("gradcheck_cases"))
    if not markers:
        return
    if "gradcheck_case" not in metafunc.fixturenames:
        raise pytest.Collector.CollectError(
            f"{metafunc.definition.name}: a test marked gradcheck_cases must take a "
            "`gradcheck_case` argument (the CaseResult of its case)")
    base = Path(metafunc.definition.path).parent
    runs, ids = [], []
    for marker in markers:
        r, i = _runs_for(marker, base)
        runs += r
        ids += i
    metafunc.parametrize("gradcheck_case", runs, ids=ids, indirect=True)


@pytest.fixture
def gradcheck_case(request: pytest.FixtureRequest):
    """The :class:`~gradcheck.base.result.CaseResult` of this item's case (tests marked
    ``@pytest.mark.gradcheck_cases(...)`` only). The item fails after the test body when
    the case failed or errored, and is skipped when the case was skipped."""
    run = getattr(request, "param", None)
    if not isinstance(run, _Run):
        pytest.fail("the gradcheck_case fixture is for tests marked "
                    "@pytest.mark.gradcheck_cases(...)", pytrace=False)
    from ..testing import CheckedCase

    result = CheckedCase.of(_located(request.config, run.result(request.config)))
    _record(request.node, result)
    _given(request.node, result)
    request.node.stash[_CASE] = result
    if result.status == "skipped":
        pytest.skip(result.message or "skipped")
    return result


@pytest.hookimpl(trylast=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    # trylast: runs after pytest's own implementation has run the test body, and only
    # when the body passed (its own failure wins).
    result = item.stash.get(_CASE, None)
    if result is not None:
        _fail_unless_passed(result)


# --------------------------------------------------------------------------- fixture

class GradcheckFixture:
    """What the ``gradchecker`` fixture returns: gradcheck's library calls, from a test.

    Relative paths are resolved against the folder of the test file. Cases run through
    :meth:`run_case_file` go into the ``--gradcheck-report``; ``check``/``check_op``
    calls are not case-file cases and do not.
    """

    def __init__(self, request: pytest.FixtureRequest):
        self._node = request.node
        self._base = Path(request.node.path).parent

    def path(self, path: str | Path) -> Path:
        """``path`` resolved as this fixture resolves case-file paths."""
        p = Path(path).expanduser()
        return p if p.is_absolute() else self._base / p

    def run_case_file(self, path: str | Path, **options):
        """Run the cases of a case file or folder; returns the
        :class:`~gradcheck.base.result.RunResult` (a :class:`~gradcheck.testing.CheckedRun`,
        with ``assert_passed()``). Options as :func:`gradcheck.run` (``k`` or
        ``keyword``, ``dtype``, ``seed``, ``points``, ``extreme_points``, ``witnesses``,
        ``timeout``, ``device``, ``allow_op_modules``). It does not fail the test: assert
        on the result."""
        import gradcheck

        if "k" in options:   # as the marker and the command line spell it
            options["keyword"] = options.pop("k")
        from ..testing import CheckedRun

        result = CheckedRun.of(gradcheck.run([self.path(path)], **options))
        for case in result.cases:
            _record(self._node, case)
        return _given(self._node, result)

    def check_op(self, op, reference, inputs, **options):
        """:func:`gradcheck.check_op`: the CaseResult of a custom op against its formula
        (with ``assert_passed()``)."""
        return _given(self._node, _api("check_op")(op, reference, inputs, **options))

    def assert_op(self, op, reference, inputs, **options):
        """:func:`gradcheck.assert_op`: raises ``GradientMismatch`` with the diagnosis."""
        __tracebackhide__ = True
        return _api("assert_op")(op, reference, inputs, **options)

    def check(self, expr, inputs, **options):
        """:func:`gradcheck.check`: the CaseResult of a formula (with ``assert_passed()``)."""
        return _given(self._node, _api("check")(expr, inputs, **options))

    def assert_gradients(self, expr, inputs, **options):
        """:func:`gradcheck.assert_gradients`: raises ``GradientMismatch`` on a failure."""
        __tracebackhide__ = True
        return _api("assert_gradients")(expr, inputs, **options)

    def __repr__(self) -> str:
        return f"<gradchecker fixture for {self._node.nodeid}>"


def _api(name: str):
    import gradcheck

    function = getattr(gradcheck, name, None)
    if function is None:
        raise AttributeError(f"gradcheck {gradcheck.__version__} has no {name}()")
    return function


@pytest.fixture
def gradchecker(request: pytest.FixtureRequest) -> GradcheckFixture:
    """gradcheck's library calls (``run_case_file``, ``check_op``, ``assert_op``,
    ``check``, ``assert_gradients``) with paths relative to the test file."""
    return GradcheckFixture(request)


#: what the deprecated ``gradcheck`` fixture warns
FIXTURE_RENAMED = ("the gradcheck fixture is deprecated and will be removed in the next "
                   "release: use gradchecker, the same fixture under a name that does not "
                   "shadow the gradcheck module (def test_x(gradchecker): ...)")


@pytest.fixture
def gradcheck(request: pytest.FixtureRequest) -> GradcheckFixture:
    """Deprecated alias of :func:`gradchecker` (its name in gradcheck 0.1.0, which
    shadowed the module in tests that import it): the same fixture, with a
    :class:`pytest.PytestDeprecationWarning` that names the new one."""
    path, line, _ = request.node.reportinfo()
    # at the test that asks for it, not at this line of the plugin
    warnings.warn_explicit(FIXTURE_RENAMED, pytest.PytestDeprecationWarning,
                           filename=str(path), lineno=(line or 0) + 1,
                           module=getattr(request.module, "__name__", None))
    return GradcheckFixture(request)


# --------------------------------------------------------------------------- collector

_TOML_CASE = re.compile(r"^\s*\[\[\s*case\s*\]\]", re.MULTILINE)
_YAML_CASE = re.compile(r"^case\s*:", re.MULTILINE)


def _looks_like_case_file(path: Path) -> bool:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    pattern = _TOML_CASE if path.suffix == ".toml" else _YAML_CASE
    return bool(pattern.search(text))


def pytest_collect_file(file_path: Path, parent: pytest.Collector):
    if (file_path.suffix in _SUFFIXES and parent.config.getoption("gradcheck_collect")
            and _looks_like_case_file(file_path)):
        return CaseFile.from_parent(parent, path=file_path)
    return None


class CaseFile(pytest.File):
    """A case file collected by ``--gradcheck-collect``: one item per case and dtype."""

    def collect(self):
        from ..cases import read_file
        from ..checking.case import file_error
        from ..report.details import title
        from ..session.runner import select

        cases, errors = read_file(self.path)
        for e in errors:
            yield CaseItem.from_parent(self, name=title(file_error(e)), run=_Run(error=e),
                                       line=e.line)
        for case, dtype in select(cases):
            yield CaseItem.from_parent(self, name=f"{case.name}[{dtype}]",
                                       run=_Run(case, dtype), line=case.line)


class _CaseFailed(Exception):
    def __init__(self, result):
        super().__init__(result.status)
        self.result = result


class CaseItem(pytest.Item):
    """One case in one dtype, collected from a case file."""

    def __init__(self, *, run: _Run, line: int | None = None, **kwargs):
        super().__init__(**kwargs)
        self.run = run
        self.line = line

    def runtest(self) -> None:
        result = _located(self.config, self.run.result(self.config))
        _record(self, result)
        if result.status == "skipped":
            pytest.skip(result.message or "skipped")
        if result.status not in ("passed", "approximate"):
            raise _CaseFailed(result)
        _warn_if_approximate(result)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, _CaseFailed):
            return failure_text(excinfo.value.result)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, (self.line or 1) - 1, f"gradcheck case {self.name}"
