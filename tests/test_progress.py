"""The progress display (gradcheck.cli.progress) and the start events the runner gives it:
"lines" for a log (a line per finished run, "still running" for a slow one), "live"
for a terminal (a line redrawn with a carriage return, erased at the end), "quiet";
names printed literally; ``started`` called for every run, in this process and in
worker processes."""

from __future__ import annotations

import io
import re
import textwrap

import pytest

from gradcheck.cli import progress
from gradcheck.cases import case_from_dict
from gradcheck.base.result import ERROR, FAILED, PASSED, CaseResult
from gradcheck.session.runner import run

ESC = "\x1b"


def tiny(*names: str, dtype: str = '["float64"]') -> str:
    """A case file of one tiny expression case per name."""
    return "".join(textwrap.dedent(f"""
        [[case]]
        name = "{name}"
        expr = "sum(x**2)"
        inputs.x.shape = [3]
        points = 1
        extreme_points = 0
        dtype = {dtype}
        """) for name in names)


SLOW_OP = textwrap.dedent("""
    import time

    _SLEPT = []


    def slow_square(x):
        if not _SLEPT:   # once: the case is slow, not each of its calls
            _SLEPT.append(True)
            time.sleep(1.5)
        return x * x
    """)


class Recorder:
    """A progress object that keeps what it is told."""

    def __init__(self):
        self.events = []

    def __call__(self, n, total, result):
        self.events.append(("done", result.name, result.dtype))

    def started(self, case, dtype):
        self.events.append(("start", case.name, dtype))


def screen(text: str) -> list[str]:
    """What a terminal shows after ``text``: each line as the carriage returns in it
    left it (a return goes back to the line's start; what follows overwrites), colours
    left out."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    shown = []
    for line in text.split("\n"):
        cells: list[str] = []
        at = 0
        for part in re.split(r"(\r)", line):
            if part == "\r":
                at = 0
                continue
            for ch in part:
                if at < len(cells):
                    cells[at] = ch
                else:
                    cells.append(ch)
                at += 1
        shown.append("".join(cells))
    return shown


def result(name: str, status: str, dtype: str = "float64", seconds: float = 0.5):
    return CaseResult(name=name, file="cases.toml", line=1, dtype=dtype, status=status,
                      seconds=seconds)


def a_case(name: str):
    return case_from_dict({"name": name, "expr": "sum(x**2)",
                           "inputs": {"x": {"shape": [3]}}}, file="cases.toml")


# --------------------------------------------------------------------------- lines

def test_lines_mode_writes_a_line_per_finished_run(tmp_path, monkeypatch):
    monkeypatch.setattr(progress, "STILL_RUNNING_AFTER", 1e6)   # a loaded machine
    (tmp_path / "cases.toml").write_text(tiny("first", "second",
                                              dtype='["float64", "float32"]'))
    out = io.StringIO()
    with progress.display(out, mode="lines", color=False) as p:
        done = run([tmp_path], progress=p)
    lines = out.getvalue().splitlines()
    assert [c.status for c in done.cases] == [PASSED] * 4
    expected = [("1/4", "first", "float64"), ("2/4", "first", "float32"),
                ("3/4", "second", "float64"), ("4/4", "second", "float32")]
    assert len(lines) == 4
    for line, (count, name, dtype) in zip(lines, expected):
        assert re.fullmatch(rf"\[{count}\] PASS {name} \({dtype}\) \d+\.\d\ds", line), line
    assert ESC not in out.getvalue() and "\r" not in out.getvalue()


def test_a_slow_run_gets_a_still_running_line_before_its_end(tmp_path, monkeypatch):
    monkeypatch.setattr(progress, "STILL_RUNNING_AFTER", 0.3)
    monkeypatch.setattr(progress, "STILL_RUNNING_EVERY", 60.0)
    (tmp_path / "progress_slow_op.py").write_text(SLOW_OP)
    (tmp_path / "slow.toml").write_text(textwrap.dedent("""
        [[case]]
        name = "slow"
        op = "progress_slow_op:slow_square"
        reference = "x ** 2"
        inputs.x.shape = [3]
        points = 1
        extreme_points = 0
        dtype = ["float64"]
        """) + tiny("quick"))
    out = io.StringIO()
    with progress.display(out, mode="lines", color=False) as p:
        done = run([tmp_path / "slow.toml"], progress=p)
    assert [c.status for c in done.cases] == [PASSED, PASSED]
    lines = [line for line in out.getvalue().splitlines()
             if not line.startswith("still running: quick")]   # on a loaded machine
    assert re.fullmatch(r"still running: slow \(float64\) \d+s", lines[0]), lines
    assert lines[1].startswith("[1/2] PASS slow (float64) ")
    assert lines[2].startswith("[2/2] PASS quick (float64) ")
    assert len(lines) == 3   # said once: the next time would be a minute later


def test_the_clock_stops_with_the_display(monkeypatch):
    monkeypatch.setattr(progress, "STILL_RUNNING_AFTER", 0.05)
    out = io.StringIO()
    with progress.display(out, mode="lines", color=False) as p:
        p.started(a_case("never-ends"), "float64")
        clock = p._thread
    assert not clock.is_alive() and clock.daemon
    said = out.getvalue()
    assert said in ("", "still running: never-ends (float64) 0s\n")


def test_quiet_prints_nothing(tmp_path):
    (tmp_path / "cases.toml").write_text(tiny("one"))
    out = io.StringIO()
    with progress.display(out, mode="quiet", color=True) as p:
        p.started(a_case("one"), "float64")
        done = run([tmp_path], progress=p)
    assert done.cases[0].status == PASSED
    assert out.getvalue() == ""


def test_an_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="live, lines, quiet"):
        with progress.display(io.StringIO(), mode="fancy", color=False):
            pass


# --------------------------------------------------------------------------- live

def test_live_mode_shows_the_running_case_and_erases_at_the_end():
    out = io.StringIO()
    with progress.display(out, mode="live", color=False) as p:
        p.started(a_case("softplus"), "float64")
        during = screen(out.getvalue())[-1]
        p(1, 3, result("softplus", PASSED))
        p.started(a_case("gelu"), "float32")
        p(2, 3, result("gelu", FAILED, dtype="float32"))
        p.started(a_case("tanh"), "float64")
        p.started(a_case("relu"), "float16")
        both = screen(out.getvalue())[-1]
        p(3, 3, result("tanh", ERROR))
    text = out.getvalue()
    assert ESC not in text
    assert re.fullmatch(r"softplus \(float64\) \d+\.\ds", during), during
    shown = screen(text)
    # the failed and errored runs stay, each on a line of its own; the live line is gone
    assert [line.rstrip() for line in shown[:-1]] == [
        "[2/3] FAIL gelu (float32) 0.50s", "[3/3] ERROR tanh (float64) 0.50s"]
    assert shown[-1].strip() == ""
    assert "[1/3] gelu (float32)" in text   # the count, then what runs
    assert re.fullmatch(r"\[2/3\] tanh \(float64\) \d\.\ds, relu \(float16\) \d\.\ds *",
                        both), both


def test_live_mode_in_colour_writes_colour_and_a_real_run_works(tmp_path):
    (tmp_path / "cases.toml").write_text(tiny("one", "two"))
    out = io.StringIO()
    with progress.display(out, mode="live", color=True) as p:
        done = run([tmp_path], progress=p)
    assert [c.status for c in done.cases] == [PASSED, PASSED]
    text = out.getvalue()
    assert ESC in text and "one (float64)" in text and "two (float64)" in text
    assert screen(text)[-1].strip() == ""
    assert "\n" not in text   # nothing failed: nothing stays


def test_the_count_shows_before_the_first_run_starts(tmp_path):
    """A run's workers take seconds to start: the count is on the line meanwhile."""
    out = io.StringIO()
    with progress.display(out, mode="live", color=False) as p:
        p.planned(17)
        first = screen(out.getvalue())[-1]
    assert first.strip() == "[0/17]"
    (tmp_path / "cases.toml").write_text(tiny("one", "two"))
    out = io.StringIO()
    with progress.display(out, mode="live", color=False) as p:
        run([tmp_path], progress=p)
    assert out.getvalue().split("\r")[1].startswith("[0/2]")   # the first line drawn


def test_the_live_line_fits_the_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    out = io.StringIO()
    with progress.display(out, mode="live", color=False) as p:
        p(1, 9, result("done-already", PASSED))
        for name in ("a-rather-long-name", "another-long-name", "and-more"):
            p.started(a_case(name), "float64")
        drawn = out.getvalue().split("\r")
    assert max(len(d) for d in drawn) <= 39   # one short: no wrap at the last column
    # the first run, its name cut (and said so), its dtype and time kept, the rest counted
    assert re.fullmatch(r"\[1/9\] a-rather-\S*\u2026 \(float64\) \d\.\ds \+2 more",
                        drawn[-1].rstrip()), drawn[-1]


@pytest.mark.parametrize("mode", ["live", "lines"])
def test_names_print_literally(mode):
    hostile = "[bold red]x[/] :smile: \x1b[31m\x07"
    out = io.StringIO()
    with progress.display(out, mode=mode, color=False) as p:
        p.started(a_case("safe"), "[i]f64")
        p(1, 1, result(hostile, FAILED, dtype="[i]f64"))
    text = out.getvalue()
    assert ESC not in text and "\x07" not in text and "\U0001f604" not in text
    assert "[bold red]x[/] :smile: \\x1b[31m\\x07 ([i]f64)" in text


# --------------------------------------------------------------------------- started

def test_started_comes_before_each_run_in_this_process(tmp_path):
    (tmp_path / "cases.toml").write_text(tiny("a", "b", dtype='["float64", "float32"]'))
    seen = Recorder()
    run([tmp_path], progress=seen)
    runs = [("a", "float64"), ("a", "float32"), ("b", "float64"), ("b", "float32")]
    assert seen.events == [(kind, *r) for r in runs for kind in ("start", "done")]


def test_a_plain_function_is_still_a_progress(tmp_path):
    (tmp_path / "cases.toml").write_text(tiny("a"))
    calls = []
    run([tmp_path], progress=lambda n, total, r: calls.append((n, total, r.name)))
    assert calls == [(1, 1, "a")]


@pytest.mark.parametrize("jobs", [1, 2])
def test_started_comes_when_a_worker_takes_the_run(tmp_path, monkeypatch, jobs):
    monkeypatch.delenv("GRADCHECK_IN_PROCESS", raising=False)
    (tmp_path / "cases.toml").write_text(tiny("a", "b", "c"))
    seen = Recorder()
    done = run([tmp_path], progress=seen, jobs=jobs, isolate=True)
    assert [c.status for c in done.cases] == [PASSED] * 3
    assert [c.name for c in done.cases] == ["a", "b", "c"]   # a serial run's order
    starts = [e[1:] for e in seen.events if e[0] == "start"]
    assert sorted(starts) == [("a", "float64"), ("b", "float64"), ("c", "float64")]
    for name in "abc":   # each began before it finished
        assert seen.events.index(("start", name, "float64")) < seen.events.index(
            ("done", name, "float64"))
    if jobs == 1:   # one worker, one task in flight: they alternate
        assert [e[0] for e in seen.events] == ["start", "done"] * 3


def test_colour_asked_for_is_colour_whatever_no_color_says(monkeypatch):
    """--color always beats NO_COLOR: the caller decided, rich must not read it again."""
    monkeypatch.setenv("NO_COLOR", "1")
    out = io.StringIO()
    with progress.display(out, mode="lines", color=True) as p:
        p(1, 1, result("softplus", FAILED))
    assert "\x1b[" in out.getvalue() and "FAIL" in out.getvalue()


def test_a_narrow_live_line_keeps_each_runs_time(monkeypatch):
    """Too many runs: the ones that fit, whole, and a count of the others; one name too
    long: the name is cut, its dtype and its time stay."""
    monkeypatch.setenv("COLUMNS", "60")
    out = io.StringIO()
    with progress.display(out, mode="live", color=False) as p:
        for name in ("first-run", "second-run", "third-run", "fourth-run"):
            p.started(a_case(name), "float64")
        many = screen(out.getvalue())[-1].rstrip()
        p(1, 5, result("first-run", PASSED))
        p(2, 5, result("second-run", PASSED))
        p(3, 5, result("third-run", PASSED))
        p(4, 5, result("fourth-run", PASSED))
        p.started(a_case("a-name-far-too-long-for-a-line-of-sixty-columns-or-so-really"),
                  "bfloat16")
        one = screen(out.getvalue())[-1].rstrip()
    assert re.fullmatch(r"first-run \(float64\) \d\.\ds, second-run \(float64\) \d\.\ds "
                        r"\+2 more", many), many
    assert len(one) <= 59 and re.fullmatch(r"\[4/5\] a-name-far-too-long-for-a\S*… "
                                           r"\(bfloat16\) \d\.\ds", one), one
