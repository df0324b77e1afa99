"""Hostile ops and bad luck against a run (tests/hostile/isolation/): an op that exits,
crashes, kills its process or outlasts SIGALRM costs only its own case; SIGINT and
SIGTERM keep what finished as an incomplete report and leave no worker behind; the
report's path is checked before the run and written as a file of the user's.

The runs of the worker path are real ``gradcheck run`` subprocesses without
GRADCHECK_IN_PROCESS (which the suite's conftest sets), real signals and real crashes."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gradcheck.cli.exit_codes import ExitCode
from gradcheck.cli.main import main
from gradcheck.process.interrupts import Interrupted
from gradcheck.base.io import _in_place, write_atomic
from gradcheck.session.runner import run

HOSTILE = Path(__file__).parent / "hostile" / "isolation"
CRASHES = HOSTILE / "crashes.toml"
SLOW = HOSTILE / "slow.toml"

# What each hostile case of crashes.toml must become: (status, error_kind, cause).
EXPECTED = {
    "first-passes": ("passed", None, ""),
    "exit-zero": ("failed", "op crashed", "the op's process died (exit code 0)"),
    "exit-one": ("failed", "op crashed", "(exit code 1)"),
    "system-exit": ("failed", "op raised", "the op raised SystemExit: 0"),
    "keyboard-interrupt": ("failed", "op raised", "the op raised KeyboardInterrupt"),
    "segfault": ("failed", "op crashed", "(killed by SIGSEGV)"),
    "sigkill": ("failed", "op crashed", "(killed by SIGKILL)"),
    # the judge waits on the op's process, so its time limit holds whatever the op does
    "blocks-alarm": ("error", "timeout", "ran past its time limit of 2 s"),
    "ignores-alarm": ("error", "timeout", "ran past its time limit of 2 s"),
    "last-passes": ("passed", None, ""),
}


def worker_env(**extra: str) -> dict:
    """The environment of a default `gradcheck run`: cases in worker processes."""
    env = {k: v for k, v in os.environ.items() if k != "GRADCHECK_IN_PROCESS"}
    return {**env, **extra}


def gradcheck(*args: str) -> list[str]:
    return [sys.executable, "-m", "gradcheck", "run", *args]


def test_each_hostile_op_costs_only_its_case(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)   # a run writes only inside its project
    out = tmp_path / "report.json"
    done = subprocess.run(gradcheck(str(CRASHES), "--timeout", "2", "--format", "json",
                                    "--output", str(out)),
                          env=worker_env(), capture_output=True, text=True, timeout=240)
    assert done.returncode == ExitCode.MISMATCH, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert "2 passed, 6 failed, 2 errored" in done.stdout
    report = json.loads(out.read_text())
    assert [c["name"] for c in report["cases"]] == list(EXPECTED)
    for case in report["cases"]:
        status, kind, cause = EXPECTED[case["name"]]
        assert (case["status"], case["error_kind"]) == (status, kind), case
        assert cause in case["message"], case["message"]
    assert "incomplete" not in report["summary"]


def test_in_process_an_op_raising_systemexit_or_keyboardinterrupt_is_its_case(tmp_path,
                                                                            monkeypatch):
    # no worker here: the run itself must not end (exit 0, no report) or stop
    monkeypatch.chdir(tmp_path)   # a run writes only inside its project
    for name in ("system-exit", "keyboard-interrupt", "first-passes"):
        out = tmp_path / f"{name}.json"
        code = main(["run", str(CRASHES), "-k", name, "--in-process", "--format", "json",
                     "--output", str(out)])
        (case,) = json.loads(out.read_text())["cases"]
        status, kind, cause = EXPECTED[name]
        assert (case["status"], case["error_kind"]) == (status, kind)
        assert cause in case["message"]
        assert code == (ExitCode.OK if status == "passed" else ExitCode.MISMATCH)


def test_in_process_a_real_sigint_stops_the_run_and_keeps_what_finished(tmp_path, capsys,
                                                                        monkeypatch):
    # the second case's op sends SIGINT to this very process, as a Ctrl-C would
    monkeypatch.chdir(tmp_path)   # a run writes only inside its project
    out = tmp_path / "report.json"
    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    code = main(["run", str(HOSTILE / "self_interrupt.toml"), "--in-process",
                 "--format", "json", "--output", str(out)])
    assert code == 130
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == handlers
    report = json.loads(out.read_text())
    assert [c["name"] for c in report["cases"]] == ["before"]
    assert report["cases"][0]["status"] == "passed"
    assert report["summary"] | {"seconds": 0} == {
        "passed": 1, "approximate": 0, "failed": 0, "errored": 0, "skipped": 0,
        "xfailed": 0, "xpassed": 0, "seconds": 0,
        "incomplete": True, "interrupted": "SIGINT", "not_run": 2}
    assert "interrupted by SIGINT" in capsys.readouterr().err


def test_the_library_raises_keyboardinterrupt_with_the_partial_result():
    # as in a plain script: Python's own SIGINT handler (a test runner may set another)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt) as raised:
            run([HOSTILE / "self_interrupt.toml"])
    finally:
        signal.signal(signal.SIGINT, before)
    assert isinstance(raised.value, Interrupted)
    partial = raised.value.result
    assert partial.incomplete and partial.interrupted == "SIGINT" and partial.not_run == 2
    assert [c.name for c in partial.cases] == ["before"]


def test_a_keyboardinterrupt_of_the_op_is_the_ops_under_any_handler():
    # raised in the op's own process, it cannot be a Ctrl-C of the run's: the op's
    # failure under Python's own SIGINT handler and under someone else's (a notebook's)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        for handler in (signal.default_int_handler, lambda signum, frame: None):
            signal.signal(signal.SIGINT, handler)
            (case,) = run([CRASHES], keyword="keyboard-interrupt").cases
            assert (case.status, case.error_kind) == ("failed", "op raised")
    finally:
        signal.signal(signal.SIGINT, before)


# --------------------------------------------------------------------------- interrupts

def _processes() -> dict[int, tuple[int, str]]:
    """``pid -> (parent pid, start time)`` of every process, from /proc."""
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            out[int(entry)] = (int(fields[1]), fields[19])   # ppid, starttime
    return out


def _descendants(root: int) -> dict[int, str]:
    """``pid -> start time`` of every process under ``root``."""
    table = _processes()
    found, frontier = {}, [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, start) in table.items():
            if ppid == parent and pid not in found:
                found[pid] = start
                frontier.append(pid)
    return found


def _alive(pid: int, start: str) -> bool:
    """Whether the process ``pid`` that started at ``start`` still runs (a zombie is
    dead: this container's init may be slow to reap what it inherits)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            head, tail = f.read().rsplit(")", 1)
    except OSError:
        return False
    fields = tail.split()
    return fields[19] == start and fields[0] != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("signum, jobs", [(signal.SIGINT, "1"), (signal.SIGTERM, "2")])
def test_a_signal_half_way_leaves_an_incomplete_report_and_no_worker(tmp_path, signum,
                                                                    jobs, monkeypatch):
    monkeypatch.chdir(tmp_path)   # a run writes only inside its project
    marks = tmp_path / "marks"
    marks.mkdir()
    out = tmp_path / "report.json"
    process = subprocess.Popen(
        gradcheck(str(SLOW), "--jobs", jobs, "--format", "json", "--output", str(out)),
        env=worker_env(HOSTILE_MARKS=str(marks), HOSTILE_SLOW_SECONDS="0.3"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # half-way: three of the eight cases begun (each leaves a mark as it starts, by
        # its op's process: one more at the point of op.layout's expanded inputs)
        end = time.monotonic() + 180   # a safety net only
        while (len({m.name.split("-")[0] for m in marks.iterdir()}) < 3
               and process.poll() is None):
            assert time.monotonic() < end, "the cases never began"
            time.sleep(0.05)
        workers = _descendants(process.pid)
        case_processes = {int(m.name.split("-")[0]) for m in marks.iterdir()}
        # the op's process of a case running now is found too (each case's op has a
        # process of its own, ended with the case)
        assert case_processes & set(workers)
        process.send_signal(signum)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 128 + signum, stderr
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr
    name = signal.Signals(signum).name
    assert f"interrupted by {name}" in stderr
    report = json.loads(out.read_text())
    summary, cases = report["summary"], report["cases"]
    assert summary["incomplete"] is True and summary["interrupted"] == name
    assert 0 < len(cases) < 8 and summary["not_run"] == 8 - len(cases)
    # only cases that finished, each whole; none made up for the others
    assert all(c["status"] == "passed" for c in cases)
    assert [c["name"] for c in cases] == [f"slow-{i}" for i in range(1, 9)
                                          if f"slow-{i}" in {c["name"] for c in cases}]
    time.sleep(0.2)   # the kernel's SIGKILL of a worker's own children is asynchronous
    left = [pid for pid, start in workers.items() if _alive(pid, start)]
    assert not left, f"worker processes left running: {left}"


# --------------------------------------------------------------------------- --output

def test_a_bad_output_is_a_usage_error_before_any_case_runs(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)   # a run writes only inside its project
    marks = tmp_path / "marks"
    marks.mkdir()
    (tmp_path / "file").write_text("x")
    os.environ["HOSTILE_MARKS"] = str(marks)
    try:
        under_a_file = tmp_path / "file" / "report.json"
        for output, words in [(tmp_path, "is a folder"),
                              (under_a_file, "is a file, not a folder"),
                              (Path("/proc/report.json"), "outside the project root")]:
            assert main(["run", str(SLOW), "-k", "slow-1", "--output", str(output)]) == \
                ExitCode.USAGE
            assert words in capsys.readouterr().err
    finally:
        del os.environ["HOSTILE_MARKS"]
    assert not list(marks.iterdir())   # no case began
    assert (tmp_path / "file").read_text() == "x"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes in any folder")
def test_a_folder_that_cannot_be_written_is_a_usage_error(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)   # a run writes only inside its project
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    assert main(["run", str(SLOW), "-k", "slow-1", "--output",
                 str(locked / "report.json")]) == ExitCode.USAGE
    assert "cannot write in" in capsys.readouterr().err


def test_reports_get_the_umask_mode(tmp_path):
    before = os.umask(0o027)
    try:
        write_atomic(tmp_path / "new.json", "{}")
        (tmp_path / "old.json").write_text("old")
        write_atomic(tmp_path / "old.json", "new")
    finally:
        os.umask(before)
    for name in ("new.json", "old.json"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o640
    assert (tmp_path / "old.json").read_text() == "new"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_devices_fifos_and_stream_names_are_written_to_not_replaced(tmp_path, capfd):
    assert _in_place(Path("/dev/stdout")) and _in_place(Path("/dev/null"))
    assert not _in_place(tmp_path / "absent.json")
    # a link to /dev/null: written through, both kept
    null = tmp_path / "null"
    null.symlink_to("/dev/null")
    write_atomic(null, "gone")
    assert null.is_symlink() and stat.S_ISCHR(os.stat("/dev/null").st_mode)
    # a link to /dev/stdout, here fd 1 captured by pytest (a regular file)
    out = tmp_path / "stdout"
    out.symlink_to("/dev/stdout")
    write_atomic(out, "to stdout\n")
    assert out.is_symlink() and capfd.readouterr().out == "to stdout\n"
    # a FIFO: its reader gets the report
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    write_atomic(fifo, "through the pipe")
    reader.join(timeout=30)
    assert got == ["through the pipe"] and stat.S_ISFIFO(fifo.lstat().st_mode)
    # a link to a regular file: its target replaced, the link kept
    target = tmp_path / "target.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    write_atomic(link, "new")
    assert link.is_symlink() and target.read_text() == "new"


def test_a_full_device_is_an_error_and_stays_a_device(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)   # a run writes only inside its project
    full = tmp_path / "full"
    full.symlink_to("/dev/full")
    code = main(["run", str(HOSTILE / "self_interrupt.toml"), "-k", "before",
                 "--output", str(full)])
    assert code == ExitCode.USAGE
    assert "No space left on device" in capsys.readouterr().err
    assert full.is_symlink() and stat.S_ISCHR(os.stat("/dev/full").st_mode)


# --------------------------------------------------------------------------- the mark

def test_every_report_marks_an_incomplete_run():
    import xml.etree.ElementTree as ET

    from gradcheck.report import render
    from gradcheck.base.result import CaseResult, RunResult

    done = CaseResult(name="done", file="f.toml", line=1, dtype="float64", status="passed")
    partial = RunResult((done,), 1.0, interrupted="SIGTERM", not_run=3)
    line = ("INCOMPLETE: the run was interrupted by SIGTERM; 3 case run(s) did not "
            "finish and are not in this report")
    assert line in " ".join(render(partial, "text").split())   # (wrapped at spaces)
    markdown = render(partial, "markdown")
    assert f"**{line}**" in markdown.splitlines() and "✅" not in markdown.splitlines()[0]
    suite = ET.fromstring(render(partial, "junit")).find("testsuite")
    assert {p.get("name"): p.get("value") for p in suite.find("properties")} == {
        "incomplete": "true", "interrupted": "SIGTERM", "not_run": "3"}
    assert suite.find("system-err").text == line
    data = json.loads(render(partial, "json"))
    assert data["summary"]["incomplete"] is True and data["summary"]["not_run"] == 3
    assert RunResult.from_dict(data) == partial
    # a complete run says nothing of the kind, in any format
    whole = RunResult((done,), 1.0)
    for fmt in ("text", "markdown", "junit", "json"):
        assert "INCOMPLETE" not in render(whole, fmt) and "incomplete" not in \
            render(whole, fmt)


def test_in_process_excludes_jobs_and_scheduler(capsys):
    for extra in (["--jobs", "2"], ["--scheduler", "tcp://h:1"]):
        assert main(["run", str(SLOW), "--in-process", *extra]) == ExitCode.USAGE
        assert "--in-process runs the cases in this process" in capsys.readouterr().err
