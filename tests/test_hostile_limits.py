"""Limits that hold (issue 31, item 6), each against the probes of tests/hostile/limits/:
``jobs`` lowered to what the machine runs at once (a note), or refused past 1024;
``timeout`` and ``max-memory`` out of range refused from the command line and from
``[tool.gradcheck]``; the memory estimate counting the formula's intermediates; each
worker limited by default to a share of the available memory; a deeply nested argument
a usage error, never a traceback; the Markdown report with no link GitHub would make;
the JSON report valid UTF-8 with lone surrogates in it. tests/hostile/limits/
measure_limits.py measures what each rejection costs."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gradcheck.cases import memory
from gradcheck.process import budgets, limits
from gradcheck.session import executors as parallel
from gradcheck.cli.main import main
from gradcheck.cli.exit_codes import ExitCode

HERE = Path(__file__).parent
PROBES = HERE / "hostile" / "limits"
CASES = PROBES / "cases.toml"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"limits_{name}", PROBES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RANGES = _load("ranges")
NESTING = _load("nesting")


@pytest.fixture
def project(tmp_path, monkeypatch):
    """An empty project (its own pyproject.toml) as the current folder, the probes'
    cases copied in."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    shutil.copy(CASES, tmp_path / "cases.toml")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def spawned(monkeypatch):
    """The worker processes a run starts, counted (each still starts for real)."""
    from gradcheck.session import pool
    from gradcheck.process import spawn

    started = []
    real = spawn.spawn

    def counted(*args, **kwargs):
        started.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(spawn, "spawn", counted)
    monkeypatch.setattr(pool, "spawn", counted)
    return started


# --------------------------------------------------------------------------- ranges

@pytest.mark.parametrize("name", RANGES.COMMAND_LINE)
def test_a_setting_out_of_range_on_the_command_line_is_exit_2(name, project, capsys,
                                                              spawned):
    argv, words = RANGES.COMMAND_LINE[name]
    try:
        code = main(["run", "cases.toml", *argv])
    except SystemExit as stop:   # argparse's own usage error
        code = stop.code
    err = capsys.readouterr().err
    assert code == ExitCode.USAGE, err
    for word in words:
        assert word in err
    assert "Traceback" not in err and spawned == []


@pytest.mark.parametrize("name", RANGES.TABLE)
def test_a_setting_out_of_range_in_the_table_is_exit_2(name, project, capsys, spawned):
    table, words = RANGES.TABLE[name]
    (project / "pyproject.toml").write_text(f"[tool.gradcheck]\n{table}\n")
    code = main(["run", "cases.toml"])
    err = capsys.readouterr().err
    assert code == ExitCode.USAGE, err
    assert re.search(r"pyproject\.toml:\d+: \[tool\.gradcheck\]", err), err   # at its line
    for word in words:
        assert word in err
    assert spawned == []


def test_the_ranges_ends_are_accepted():
    for seconds in (1e-3, 1, 86_400.0):
        assert limits.timeout_problem(seconds) == ""
    for size in ("1M", "1P", 2**20, 2**50, "4G"):
        assert limits.max_memory_problem(size) == ""
    for jobs in (0, 1, 1024):
        assert limits.jobs_problem(jobs) == ""
    assert limits.jobs_problem(1025) and limits.max_memory_problem(2**50 + 1)


# --------------------------------------------------------------------------- jobs

@pytest.mark.parametrize("where", ["command line", "table"])
def test_jobs_above_the_machine_are_lowered_with_a_note(where, project, capsys, spawned):
    """1,000 jobs never start 1,000 processes: at most what the machine runs at once
    (and no more than the three cases want), and stderr says so."""
    argv = ["run", "cases.toml", "-q"]
    if where == "table":
        (project / "pyproject.toml").write_text("[tool.gradcheck]\njobs = 1000\n")
    else:
        argv += ["-j", "1000"]
    assert main(argv) == ExitCode.OK
    err = capsys.readouterr().err
    cap, why = limits.jobs_cap()
    assert f"gradcheck: note: jobs = 1000 lowered to {cap}, the most this machine runs " \
           f"at once ({why})" in err
    assert 1 <= len(spawned) <= min(cap, 3)


def test_the_cap_follows_memory_where_it_is_short(monkeypatch):
    monkeypatch.setattr(limits, "cores", lambda: 64)
    monkeypatch.setattr(limits, "available_memory", lambda: 5 * limits.WORKER_BYTES)
    assert limits.cap_jobs(1000) == (2, "jobs = 1000 lowered to 2, the most this machine "
                                        "runs at once (1.2 GiB of available memory at "
                                        "256 MiB a worker)")
    assert limits.cap_jobs(0) == (2, "")      # one per core, within memory too
    assert limits.cap_jobs(2) == (2, "")
    monkeypatch.setattr(limits, "available_memory", lambda: None)   # not Linux
    assert limits.jobs_cap() == (64, "64 CPU cores")


def test_the_library_lowers_jobs_with_a_warning():
    cap = limits.jobs_cap()[0]
    with pytest.warns(RuntimeWarning, match=f"jobs = 1000 lowered to {cap}"):
        assert parallel.executor(1000).jobs == cap
    with pytest.raises(ValueError, match="to 1024, got 5000"):
        parallel.executor(5000)


# --------------------------------------------------------------------------- the estimate

def test_the_estimate_counts_the_largest_intermediate():
    """sum(exp(x * ones([10**7]))) over a scalar x took 230 MB a term and was estimated
    at 288 bytes; now at hundreds of MB from the parsed shapes, and 16 terms are refused
    under the default 2 GiB with the estimate in the message."""
    from gradcheck.cases import case_from_dict, read_file
    from gradcheck.checking.case import run_case

    term = "sum(exp(x * ones([10000000])))"
    one = case_from_dict({"name": "one", "expr": term, "inputs": {"x": {"shape": []}}})
    assert memory.intermediates(one) == (10**7, 3 * 10**7 + 1)
    assert 100 * 2**20 < memory.estimate(one)[0] < 2**30
    memory.check_case(one)   # within the default budget
    (sixteen,), errors = read_file(PROBES / "intermediates.toml")
    assert errors == []
    result = run_case(sixteen, "float64", timeout=None)
    assert result.status == "error" and result.error_kind == "case"
    assert "needs an estimated 4.2 GiB" in result.message
    assert "480,000,031 elements in its intermediates" in result.message
    assert "over the budget of 2.0 GiB" in result.message


# --------------------------------------------------------------------------- workers

def test_each_worker_gets_a_share_of_memory_by_default(monkeypatch):
    monkeypatch.delenv(budgets.ENV, raising=False)
    monkeypatch.setattr(limits, "available_memory", lambda: 8 * 2**30)
    share = 2 * 2**30 - limits.WORKER_BYTES   # half of 8 GiB for two, less start-up
    assert limits.worker_env(2) == {budgets.WORKER_ENV: str(share)}
    with budgets.memory_budget("1G"):   # --max-memory limits each worker instead
        assert limits.worker_env(2) == {}
    monkeypatch.setattr(limits, "available_memory", lambda: None)
    assert limits.worker_env(1) == {}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and "
                    "/proc/meminfo are Linux's")
def test_a_worker_without_max_memory_is_limited(project, capsys, monkeypatch):
    """The op maps nine tenths of the available memory (untouched, so nothing is used
    where no limit stops it): its worker's default limit refuses it, and the case is
    its own clear error."""
    from gradcheck.cli.run import IN_PROCESS

    monkeypatch.delenv(IN_PROCESS, raising=False)   # a worker process, as by default
    monkeypatch.delenv(budgets.ENV, raising=False)
    shutil.copy(PROBES / "address-hog.toml", project)
    shutil.copy(PROBES / "limit_ops.py", project)
    code = main(["run", "address-hog.toml", "--format", "json", "--timeout", "120"])
    out = json.loads(capsys.readouterr().out)
    (hog,) = out["cases"]
    assert code != ExitCode.OK and hog["error_kind"] == "case"
    assert hog["status"] == "error" and "the case ran out of memory" in hog["message"]
    assert "a worker's default limit of" in hog["message"]


# --------------------------------------------------------------------------- nesting

@pytest.mark.parametrize("name", NESTING.probes())
def test_a_deeply_nested_argument_is_a_usage_error(name, project, capsys):
    try:
        code = main(NESTING.probes()[name])
    except SystemExit as stop:
        code = stop.code
    err = capsys.readouterr().err
    assert code == ExitCode.USAGE, err
    assert "Traceback" not in err and "error" in err


@pytest.mark.parametrize("name", NESTING.settings())
def test_a_deeply_nested_table_is_a_usage_error(name, project, capsys):
    (project / "pyproject.toml").write_text(NESTING.settings()[name])
    code = main(["run", "cases.toml"])
    err = capsys.readouterr().err
    assert code == ExitCode.USAGE and "Traceback" not in err and "pyproject.toml" in err


def test_a_gradient_nested_within_the_limit_is_read():
    from gradcheck.project.arguments import gradient_argument

    assert gradient_argument("[[1.5, 2], [3, 4]]") == [[1.5, 2], [3, 4]]
    assert gradient_argument("[" * 32 + "]" * 32) is not None


# --------------------------------------------------------------------------- reports

@pytest.fixture(scope="module")
def hostile_run():
    from gradcheck.session.runner import run

    sys.path.insert(0, str(PROBES))
    try:
        return run([PROBES / "links.toml", PROBES / "surrogates.yaml"], timeout=120)
    finally:
        sys.path.remove(str(PROBES))


# what GitHub's Markdown would link, unbroken: a scheme before "://", "www." and an
# e-mail address (a local part right before "@"), mailto: and xmpp:
_LINKABLE = re.compile(r"(?i)(https?|ftp)://|\bwww\.|[a-z0-9.+_-]@|\b(mailto|xmpp):")


def test_the_markdown_report_breaks_every_autolink(hostile_run):
    from gradcheck.report.markdown import render_markdown

    md = render_markdown(hostile_run)
    assert "http&#8203;://evil.example/name" in md and "www&#8203;.evil.example" in md
    assert "a&#8203;@evil.example" in md and "javascript&#8203;:alert" in md
    assert not _LINKABLE.search(md), _LINKABLE.search(md)


def test_github_renders_no_link_from_the_markdown_report(hostile_run):
    """With cmark-gfm, the renderer GitHub uses (its Python binding, where installed):
    the same text links without the escapes, and links nothing with them."""
    cmarkgfm = pytest.importorskip("cmarkgfm")
    from gradcheck.report import markdown

    def links(text: str) -> int:
        return cmarkgfm.github_flavored_markdown_to_html(text).count("<a ")

    assert links(markdown.render_markdown(hostile_run)) == 0
    assert links("<code>http://evil.example www.evil.example a@evil.example</code>") == 3


def test_the_json_report_is_utf8_with_lone_surrogates(hostile_run, tmp_path):
    from gradcheck.report.json import render_json

    data = render_json(hostile_run).encode("utf-8")   # strict: a surrogate would raise
    message = json.loads(data.decode("utf-8", errors="strict"))["cases"][-1]["message"]
    assert "lone \ufffd high and \ufffd low surrogates, and a pair \U0001f600" in message
    jq = shutil.which("jq")
    if jq:
        (tmp_path / "r.json").write_bytes(data)
        done = subprocess.run([jq, "-r", ".cases[-1].message", str(tmp_path / "r.json")],
                              capture_output=True, text=True)
        assert done.returncode == 0 and "lone \ufffd high" in done.stdout
