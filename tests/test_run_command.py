"""``gradcheck run`` in CI: several reports from one run (``--report FMT:PATH``), the
text report on stdout beside them, the job summary under GitHub Actions, ``-q``,
``--color`` against NO_COLOR and FORCE_COLOR, and the progress display's wiring.
Through ``cli.main`` in a project folder with tiny cases (one point each)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from gradcheck.cli.exit_codes import ExitCode
from gradcheck.cli.main import main
from gradcheck.cli.output import use_color

ESC = "\x1b"

CASES = """\
[[case]]
name = "fine"
expr = "sum(x**2)"
inputs.x = { shape = [3] }
points = 1
extreme_points = 0

[[case]]
name = "flagged"
expr = "sum(sin(x))"
inputs.x = { shape = [3] }
expect = "fail"
points = 1
extreme_points = 0
"""


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """A project folder, the current one, with one passing and one failing case and no
    CI around it."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n', encoding="utf-8")
    (tmp_path / "cases.toml").write_text(CASES, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    for name in ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY", "NO_COLOR", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def gc(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def usage(capsys, *argv) -> str:
    """stderr of a command line that argparse refuses (it exits 2)."""
    with pytest.raises(SystemExit) as stop:
        main([str(a) for a in argv])
    assert stop.value.code == ExitCode.USAGE
    return capsys.readouterr().err


def case_lines(text: str) -> list[str]:
    return [line for line in text.splitlines()
            if line.split(" ", 1)[0] in ("PASS", "FAIL", "ERROR", "SKIP", "APPROX", "XFAIL",
                                         "XPASS")]


# --------------------------------------------------------------------------- --report

def test_one_run_writes_every_report_and_the_text_report_to_stdout(capsys, project):
    from junitparser import JUnitXml

    code, out, _ = gc(capsys, "run", "cases.toml", "--witness", "torch",
                      "--report", "json:out/r.json", "--report", "junit:out/r.xml",
                      "--report", "markdown:out/r.md", "--report", "text:out/r.txt")
    assert code == ExitCode.MISMATCH
    data = json.loads((project / "out" / "r.json").read_text(encoding="utf-8"))
    assert [c["status"] for c in data["cases"]] == ["passed", "failed"]
    xml = JUnitXml.fromfile(str(project / "out" / "r.xml"))
    assert (xml.tests, xml.failures) == (2, 1)
    md = (project / "out" / "r.md").read_text(encoding="utf-8")
    assert md.startswith("## ❌ gradcheck: 1 passed, 0 failed, 0 errored, 0 skipped, "
                         "1 xpassed")
    text = (project / "out" / "r.txt").read_text(encoding="utf-8")
    assert len(case_lines(text)) == 2 and ESC not in text
    # the log has the text report with the failure in full, then each file written
    assert [line.split()[0] for line in case_lines(out)] == ["PASS", "XPASS"]
    assert "every witness agreed" in out
    assert out.splitlines()[-4:] == [
        "report written to out/r.json (json)", "report written to out/r.xml (junit)",
        "report written to out/r.md (markdown)", "report written to out/r.txt (text)"]
    assert sorted(p.name for p in (project / "out").iterdir()) == [
        "r.json", "r.md", "r.txt", "r.xml"]     # no temporary file left


def test_the_html_report_is_one_of_them(capsys, project):
    code, out, _ = gc(capsys, "run", "cases.toml", "-k", "fine", "--witness", "torch",
                      "--report", "html:r.html", "--report", "json:r.json")
    assert code == ExitCode.OK
    page = (project / "r.html").read_text(encoding="utf-8")
    assert "<html" in page.lower() and "fine" in page
    assert "report written to r.html (html)" in out


def test_format_without_output_keeps_stdout_the_document(capsys, project):
    from junitparser import JUnitXml

    code, out, err = gc(capsys, "run", "cases.toml", "-k", "fine", "--witness", "torch",
                        "--format", "junit", "--report", "json:r.json")
    assert code == ExitCode.OK
    (project / "doc.xml").write_text(out, encoding="utf-8")
    assert JUnitXml.fromfile(str(project / "doc.xml")).tests == 1
    assert "report written to r.json (json)" in err and "report written" not in out


def test_output_is_one_report_beside_the_others(capsys, project):
    code, out, _ = gc(capsys, "run", "cases.toml", "-k", "fine", "--witness", "torch",
                      "--format", "json", "--output", "a.json", "--report", "junit:a.xml")
    assert code == ExitCode.OK
    assert json.loads((project / "a.json").read_text())["summary"]["passed"] == 1
    assert (project / "a.xml").read_text().startswith("<?xml")
    assert case_lines(out)[0].startswith("PASS ")   # stdout: the text report
    assert out.splitlines()[-2:] == ["report written to a.json (json)",
                                     "report written to a.xml (junit)"]


@pytest.mark.parametrize("spec", ["pdf:r.pdf", "r.json", "json:"])
def test_a_bad_report_is_a_usage_error_naming_it(capsys, project, spec):
    err = usage(capsys, "run", "cases.toml", "--report", spec)
    assert "--report" in err and repr(spec) in err


def test_a_report_path_that_cannot_be_written_stops_the_run_before_it_starts(capsys,
                                                                              project):
    (project / "taken").mkdir()
    code, out, err = gc(capsys, "run", "cases.toml", "--report", "json:ok.json",
                        "--report", "junit:taken")
    assert code == ExitCode.USAGE
    assert "--report junit:" in err and "taken is a folder" in err
    assert out == "" and not (project / "ok.json").exists()


def test_two_reports_to_one_file_are_a_usage_error(capsys, project):
    code, out, err = gc(capsys, "run", "cases.toml", "--report", "json:r.out",
                        "--report", "junit:./r.out")
    assert code == ExitCode.USAGE and out == ""
    assert "two reports to the same file" in err and "json:r.out" in err


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_report_that_fails_to_write_leaves_the_others_written(capsys, project):
    code, out, err = gc(capsys, "run", "cases.toml", "-k", "fine", "--witness", "torch",
                        "--report", "json:/dev/full", "--report", "junit:r.xml")
    assert code == ExitCode.USAGE
    assert "cannot write the json report to /dev/full" in err
    assert (project / "r.xml").read_text().startswith("<?xml")
    assert "report written to r.xml (junit)" in out
    assert "report written to /dev/full" not in out


# --------------------------------------------------------------------------- job summary

@pytest.fixture
def actions(project, monkeypatch) -> Path:
    """GitHub Actions around the run, its job summary a file with another step's text."""
    summary = project / "summary.md"
    summary.write_text("# Another step\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    return summary


def test_under_actions_the_markdown_report_is_appended_to_the_job_summary(capsys, actions):
    for _ in range(2):
        code, out, _ = gc(capsys, "run", "cases.toml", "--witness", "torch")
        assert code == ExitCode.MISMATCH
        assert "::error file=cases.toml" in out          # the annotations stay
    text = actions.read_text(encoding="utf-8")
    assert text.startswith("# Another step\n")
    assert text.count("## ❌ gradcheck: 1 passed, 0 failed, 0 errored, 0 skipped, "
                      "1 xpassed") == 2


@pytest.mark.parametrize("how", ["flag", "config"])
def test_the_job_summary_can_be_turned_off(capsys, actions, how):
    if how == "config":
        (actions.parent / "pyproject.toml").write_text(
            "[tool.gradcheck]\nstep-summary = false\n", encoding="utf-8")
    code, _, _ = gc(capsys, "run", "cases.toml", "-k", "fine", "--witness", "torch",
                    *(["--no-step-summary"] if how == "flag" else []))
    assert code == ExitCode.OK
    assert actions.read_text(encoding="utf-8") == "# Another step\n"
    if how == "config":   # and the command line turns it back on
        gc(capsys, "run", "cases.toml", "-k", "fine", "--witness", "torch",
           "--step-summary")
        assert "gradcheck: 1 passed" in actions.read_text(encoding="utf-8")


def test_no_job_summary_outside_actions(capsys, actions, monkeypatch):
    monkeypatch.setenv("GITHUB_ACTIONS", "false")
    assert gc(capsys, "run", "cases.toml", "-k", "fine", "--witness", "torch")[0] == 0
    assert actions.read_text(encoding="utf-8") == "# Another step\n"


def test_the_old_recipe_of_stdout_into_the_job_summary_gets_one_summary(actions,
                                                                        monkeypatch):
    """``gradcheck run --format markdown >> "$GITHUB_STEP_SUMMARY"`` (the recipe before
    the summary was automatic): stdout is that file, so it is not appended again."""
    with open(actions, "a", encoding="utf-8") as stdout, monkeypatch.context() as patch:
        patch.setattr(sys, "stdout", stdout)
        code = main(["run", "cases.toml", "--witness", "torch", "--format", "markdown"])
    assert code == ExitCode.MISMATCH
    text = actions.read_text(encoding="utf-8")
    assert text.startswith("# Another step\n") and text.count("## ❌ gradcheck:") == 1


def test_a_job_summary_that_cannot_be_written_is_a_warning(capsys, actions, monkeypatch):
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(actions.parent))   # a folder
    code, _, err = gc(capsys, "run", "cases.toml", "-k", "fine", "--witness", "torch")
    assert code == ExitCode.OK
    assert "gradcheck: warning: cannot append the summary to $GITHUB_STEP_SUMMARY" in err


# --------------------------------------------------------------------------- -q, --color

def test_quiet_shows_only_the_failures_and_the_summary_and_no_progress(capsys, project):
    code, out, err = gc(capsys, "run", "cases.toml", "--witness", "torch", "-q")
    assert code == ExitCode.MISMATCH
    assert [line.split()[0] for line in case_lines(out)] == ["XPASS"]
    assert "every witness agreed" in out and "1 passed, 0 failed" in out
    assert err == ""
    _, loud, _ = gc(capsys, "run", "cases.toml", "--witness", "torch")
    assert [line.split()[0] for line in case_lines(loud)] == ["PASS", "XPASS"]


def test_quiet_and_verbose_exclude_each_other(capsys, project):
    assert "not allowed with" in usage(capsys, "run", "cases.toml", "-q", "-v")


@pytest.mark.parametrize("tty, env, flag, coloured", [
    (False, {}, None, False),
    (True, {}, None, True),
    (True, {"NO_COLOR": "1"}, None, False),
    (False, {"FORCE_COLOR": "1"}, None, True),
    (True, {"NO_COLOR": "1", "FORCE_COLOR": "1"}, None, False),   # NO_COLOR wins
    (False, {"FORCE_COLOR": ""}, None, False),                    # empty: not set
    (False, {}, "always", True),
    (True, {"NO_COLOR": "1"}, "always", True),                    # the flag wins
    (True, {"FORCE_COLOR": "1"}, "never", False),
    (True, {}, "never", False),
])
def test_colour_of_the_report(capsys, project, monkeypatch, tty, env, flag, coloured):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: tty)
    code, out, _ = gc(capsys, "run", "cases.toml", "-k", "fine", "--witness", "torch",
                      *(["--color", flag] if flag else []))
    assert code == ExitCode.OK
    assert (ESC in out) is coloured
    assert use_color(flag or "auto", sys.stdout) is coloured


def test_colour_never_reaches_a_report_file(capsys, project):
    code, out, _ = gc(capsys, "run", "cases.toml", "-k", "fine", "--witness", "torch",
                      "--color", "always", "--report", "text:r.txt")
    assert code == ExitCode.OK and ESC in out
    assert ESC not in (project / "r.txt").read_text(encoding="utf-8")


# --------------------------------------------------------------------------- progress

@pytest.fixture
def displays(monkeypatch) -> list[dict]:
    """Each progress display the run opens: its mode and colour, and what it was told."""
    import contextlib

    import gradcheck.cli.progress as progress

    opened = []

    @contextlib.contextmanager
    def display(stream, *, mode, color):
        seen = {"stream": stream, "mode": mode, "color": color, "done": []}
        opened.append(seen)

        class Shown:
            def __call__(self, n, total, result):
                seen["done"].append((n, total, result.name))

            def started(self, case, dtype):
                pass

        yield Shown()

    monkeypatch.setattr(progress, "display", display)
    return opened


@pytest.mark.parametrize("argv, stderr_tty, mode", [
    ([], False, "lines"), ([], True, "live"), (["-q"], True, "quiet"),
    (["-q"], False, "quiet")])
def test_the_progress_display_mode(capsys, project, monkeypatch, displays, argv,
                                   stderr_tty, mode):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: stderr_tty)
    gc(capsys, "run", "cases.toml", "--witness", "torch", *argv)
    (seen,) = displays
    assert seen["mode"] == mode and seen["stream"] is sys.stderr
    assert seen["done"] == [(1, 2, "fine"), (2, 2, "flagged")]


def test_the_colour_of_stdout_and_stderr_is_decided_apart(capsys, project, monkeypatch,
                                                          displays):
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    _, out, _ = gc(capsys, "run", "cases.toml", "-k", "fine", "--witness", "torch")
    assert ESC in out and displays[-1]["color"] is False
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    _, out, _ = gc(capsys, "run", "cases.toml", "-k", "fine", "--witness", "torch")
    assert ESC not in out and displays[-1]["color"] is True


# --------------------------------------------------------------------------- a CI step

def test_a_ci_step_end_to_end_in_a_real_process(project):
    """`gradcheck run -q` with no PATH in a real process under GitHub Actions: the
    configured cases and reports, the job summary appended, the log without progress."""
    import subprocess

    (project / "pyproject.toml").write_text(
        '[tool.gradcheck]\npaths = ["cases.toml"]\nwitnesses = ["torch"]\n'
        'reports = ["junit:reports/gradcheck.xml", "json:reports/gradcheck.json"]\n',
        encoding="utf-8")
    summary = project / "summary.md"
    summary.write_text("earlier step\n", encoding="utf-8")
    env = {**os.environ, "GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)}
    for name in ("NO_COLOR", "FORCE_COLOR"):
        env.pop(name, None)
    quiet = subprocess.run([sys.executable, "-m", "gradcheck", "run", "-q"], cwd=project,
                           env=env, capture_output=True, text=True, timeout=300)
    assert quiet.returncode == ExitCode.MISMATCH, quiet.stderr
    assert quiet.stderr == ""
    lines = quiet.stdout.splitlines()
    assert [line.split()[0] for line in case_lines(quiet.stdout)] == ["XPASS"]
    assert lines[-3].startswith("::error file=cases.toml,line=8,")
    assert lines[-2:] == ["report written to reports/gradcheck.xml (junit)",
                          "report written to reports/gradcheck.json (json)"]
    assert ESC not in quiet.stdout
    assert json.loads((project / "reports" / "gradcheck.json").read_text())[
        "summary"]["xpassed"] == 1
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("earlier step\n") and text.count("## ❌ gradcheck:") == 1


# --------------------------------------------------------------------------- no report destroys

@pytest.mark.parametrize("target", ["cases.toml", "myops.py", "pyproject.toml"])
def test_a_report_never_replaces_a_source_file(capsys, project, target):
    """junit:cases/a.toml for reports/a.xml, a one-character slip, must not cost the
    case file, an op's source or the project's settings."""
    (project / "myops.py").write_text("# an op\n", encoding="utf-8")
    before = (project / target).read_bytes()
    code, _, err = gc(capsys, "run", "cases.toml", "--report", f"json:{target}")
    assert code == ExitCode.USAGE
    assert f"--report json:{target} exists and is a source file" in err, err
    assert (project / target).read_bytes() == before
    code, _, err = gc(capsys, "run", "cases.toml", "--format", "json", "--output", target)
    assert code == ExitCode.USAGE and err.startswith(f"gradcheck: error: --output {target}")
    assert (project / target).read_bytes() == before


def test_a_report_to_the_job_summary_is_refused(capsys, project, monkeypatch):
    summary = project / "summary.md"
    summary.write_text("earlier step\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    code, _, err = gc(capsys, "run", "cases.toml", "--report", "markdown:summary.md")
    assert code == ExitCode.USAGE and "is $GITHUB_STEP_SUMMARY, the job summary" in err
    assert summary.read_text(encoding="utf-8") == "earlier step\n"


@pytest.mark.parametrize("redirect", [">", ">>"])
def test_a_report_to_dev_stdout_keeps_a_redirected_log(project, redirect):
    """/dev/stdout reopens what fd 1 is: written in append mode, it neither empties a
    log redirected with >> nor leaves a hole of NULs where the text report was."""
    import subprocess

    log = project / "log"
    log.write_text("PREVIOUS\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items()
           if k not in ("GITHUB_ACTIONS", "NO_COLOR", "FORCE_COLOR")}
    command = (f"{sys.executable} -m gradcheck run cases.toml -k fine --witness torch "
               f"--report markdown:/dev/stdout {redirect} log")
    done = subprocess.run(["sh", "-c", command], cwd=project, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == ExitCode.OK, done.stderr
    text = log.read_text(encoding="utf-8")
    assert "\x00" not in text
    assert text.startswith("PREVIOUS\n") == (redirect == ">>")
    report = text.index("PASS   fine")
    assert report < text.index("## ✅ gradcheck") < text.index(
        "report written to /dev/stdout (markdown)")


LAYER = """\
[[case]]
name = "layer"
expr = "sum(tanh(x @ W))"
inputs.x = { shape = [3, 4] }
inputs.W = { shape = [4, 2] }
points = 1
extreme_points = 0
"""


def test_a_passing_cases_gradient_formulas_are_in_the_reports_that_show_them(project,
                                                                           capsys):
    # (run in a worker, as by default: the worker is told whether to print them)
    (project / "layer.toml").write_text(LAYER, encoding="utf-8")
    code, out, _ = gc(capsys, "run", "layer.toml")
    assert code == 0 and "PASS   layer" in out and "exact:" not in out
    code, out, _ = gc(capsys, "run", "layer.toml", "-v")
    assert code == 0
    assert "exact: t1 = ḡ ⊙ (1 - tanh(x @ W)**2)" in out
    assert "exact: W.grad = xᵀ @ t1" in out
    # the JSON report holds them for every case, on stdout or in a file
    code, out, _ = gc(capsys, "run", "layer.toml", "--format", "json")
    assert json.loads(out)["cases"][0]["gradients"]["W.grad"] == "xᵀ @ t1"
    code, out, _ = gc(capsys, "run", "layer.toml", "--report", f"json:{project / 'r.json'}")
    case = json.loads((project / "r.json").read_text(encoding="utf-8"))["cases"][0]
    assert case["gradients"]["W.grad"] == "xᵀ @ t1"


def test_a_case_that_did_not_pass_keeps_its_gradient_formulas():
    from gradcheck.cases import case_from_dict
    from gradcheck.checking.case import run_case

    table = {"name": "layer", "expr": "sum(tanh(x @ W))", "points": 1,
             "extreme_points": 0, "inputs": {"x": {"shape": [3, 4]}, "W": {"shape": [4, 2]}}}
    passed = run_case(case_from_dict(table), "float64", formulas=False)
    assert passed.status == "passed" and passed.gradients == ()
    assert dict(run_case(case_from_dict(table), "float64").gradients)["W.grad"] == \
        "xᵀ @ t1"
    # expected to fail, it agreed: a failure, whose diagnosis shows the formulas
    flagged = run_case(case_from_dict(dict(table, expect="fail")), "float64",
                       formulas=False)
    assert flagged.status == "failed"
    assert dict(flagged.gradients)["W.grad"] == "xᵀ @ t1"
