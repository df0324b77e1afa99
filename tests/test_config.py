"""``[tool.gradcheck]`` in the nearest pyproject.toml as ``gradcheck run``'s settings:
every key applied, the command line over it, paths and reports relative to the
pyproject's folder, unknown keys and wrong types refused (exit 2) with the file, and
``gradcheck run`` without PATH."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from gradcheck.cli.exit_codes import ExitCode
from gradcheck.cli.main import main
from gradcheck.base.result import CaseResult, RunResult

CASE = """\
[[case]]
name = "square"
expr = "sum(x**2)"
inputs.x = { shape = [3] }
points = 2
"""


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """A project with its cases under cases/, the current folder, no CI around it."""
    (tmp_path / "cases").mkdir()
    (tmp_path / "cases" / "square.toml").write_text(CASE, encoding="utf-8")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    for name in ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY", "NO_COLOR", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def configure(project: Path, table: str) -> Path:
    path = project / "pyproject.toml"
    path.write_text('[project]\nname = "demo"\n\n[tool.gradcheck]\n' + table,
                    encoding="utf-8")
    return path


def gc(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def only_case(report: Path) -> dict:
    (case,) = json.loads(report.read_text(encoding="utf-8"))["cases"]
    return case


# --------------------------------------------------------------------------- applied

def test_the_table_sets_the_run_and_its_reports(capsys, project):
    configure(project, 'paths = ["cases"]\nseed = 7\npoints = 1\nextreme-points = 0\n'
                       'dtype = "float32"\nwitnesses = ["torch"]\n'
                       'reports = ["json:out/r.json", "junit:out/r.xml"]\n')
    code, out, _ = gc(capsys, "run")
    assert code == ExitCode.OK
    case = only_case(project / "out" / "r.json")
    assert (case["seed"], case["points"], case["dtype"]) == (7, 1, "float32")
    assert list(case["witnesses"]) == ["torch"]
    assert not any("extreme point" in n for n in case["notes"])
    assert (project / "out" / "r.xml").is_file()
    assert "report written to out/r.json (json)" in out


def test_the_command_line_overrides_the_table(capsys, project):
    configure(project, 'paths = ["nowhere"]\nseed = 7\ndtype = "float32"\n'
                       'extreme-points = 0\nreports = ["json:configured.json"]\n')
    code, _, _ = gc(capsys, "run", "cases", "--seed", "3", "--dtype", "float64",
                    "--extreme-points", "1", "--report", "json:given.json")
    assert code == ExitCode.OK
    assert not (project / "configured.json").exists()   # --report replaces reports
    case = only_case(project / "given.json")
    assert (case["seed"], case["dtype"]) == (3, "float64")
    assert any("extreme point" in n for n in case["notes"])


def test_paths_and_reports_are_relative_to_the_pyproject(capsys, project, monkeypatch):
    configure(project, 'paths = ["cases"]\npoints = 1\nreports = ["json:out/r.json"]\n')
    monkeypatch.chdir(project / "sub")
    code, out, _ = gc(capsys, "run")
    assert code == ExitCode.OK
    assert only_case(project / "out" / "r.json")["name"] == "square"
    assert not (project / "sub" / "out").exists()
    assert f"report written to {project / 'out' / 'r.json'} (json)" in out


@pytest.fixture
def calls(monkeypatch) -> list[dict]:
    """What the runner is asked, and the memory budget it runs under (one passing case
    comes back)."""
    import gradcheck.session.runner

    seen = []

    def run(paths, options, *, progress=None):
        seen.append({"paths": list(paths), **dataclasses.asdict(options),
                     "budget": os.environ.get("GRADCHECK_MAX_MEMORY")})
        return RunResult((CaseResult("c", "f.toml", 1, "float64", "passed"),))

    monkeypatch.setattr(gradcheck.session.runner, "run", run)
    return seen


def test_every_run_key_reaches_the_runner(capsys, project, calls):
    (project / "more").mkdir(exist_ok=True)
    configure(project, 'paths = ["cases", "more"]\ndtype = "float16"\nseed = 1\n'
                       'points = 4\nextreme-points = 3\ntimeout = 12.5\njobs = 2\n'
                       'witnesses = ["engine", "torch"]\nstrict-shapes = true\n'
                       'strict = true\n'
                       'allow-op-modules = ["mypkg.*"]\nmax-memory = "64M"\n')
    assert gc(capsys, "run")[0] == ExitCode.OK
    (got,) = calls
    assert got["paths"] == ["cases", "more"]
    assert {k: got[k] for k in ("dtype", "seed", "points", "extreme_points", "timeout",
                                "jobs", "witnesses", "strict_shapes", "strict")} == {
        "dtype": "float16", "seed": 1, "points": 4, "extreme_points": 3, "timeout": 12.5,
        "jobs": 2, "witnesses": ("engine", "torch"), "strict_shapes": True, "strict": True}
    assert got["budget"] == str(64 * 2**20)
    assert gc(capsys, "run", "-j", "1", "--timeout", "3", "--max-memory", "1G",
              "--no-strict-shapes", "--no-strict", "--witness", "numeric")[0] == ExitCode.OK
    assert (calls[1]["jobs"], calls[1]["timeout"], calls[1]["budget"],
            calls[1]["strict_shapes"], calls[1]["strict"], calls[1]["witnesses"]) == (
        1, 3.0, str(2**30), False, False, ("numeric",))


def test_the_defaults_without_a_table(capsys, project, calls):
    assert gc(capsys, "run", "cases")[0] == ExitCode.OK
    (got,) = calls
    assert (got["jobs"], got["timeout"], got["strict_shapes"], got["strict"],
            got["budget"]) == (1, 300.0, False, False, None)


def test_a_configured_jobs_meets_the_command_lines_exclusions(capsys, project):
    configure(project, "jobs = 2\n")
    code, _, err = gc(capsys, "run", "cases", "--in-process")
    assert code == ExitCode.USAGE and "excludes --jobs" in err


def test_color_in_the_table_and_the_flag_over_it(capsys, project):
    configure(project, 'color = "always"\npoints = 1\nwitnesses = ["torch"]\n')
    assert "\x1b[" in gc(capsys, "run", "cases")[1]
    assert "\x1b[" not in gc(capsys, "run", "cases", "--color", "never")[1]


# --------------------------------------------------------------------------- refused

@pytest.mark.parametrize("table, words", [
    ("seeds = 3\n", ["no key 'seeds'", "did you mean 'seed'?"]),
    ("extreme_points = 1\n", ["no key 'extreme_points'", "'extreme-points'"]),
    ('seed = "7"\n', ["seed must be an integer, got '7'"]),
    ("points = 0\n", ["points must be an integer from 1 to 1000, got 0"]),
    ("jobs = -1\n", ["jobs must be an integer from 0 (one per CPU core) to 1024"]),
    ("timeout = true\n", ["timeout must be a number of seconds above 0 and at most"]),
    ('paths = "cases"\n', ["paths must be a list of case files or folders"]),
    ('dtype = "float8"\n', ["dtype must be a dtype name (float64, "]),
    ('witnesses = ["nope"]\n', ["witnesses must be a list of witness names (", "torch"]),
    ('reports = ["pdf:r.pdf"]\n', ['reports must be a list of "FMT:PATH" strings']),
    ('strict-shapes = "yes"\n', ["strict-shapes must be true or false"]),
    ('step-summary = 1\n', ["step-summary must be true or false"]),
    ('max-memory = "lots"\n', ["max-memory must be a size from 1M to 1P, such as"]),
    ('color = "sometimes"\n', ["color must be a colour mode (auto, always, never)"]),
    ('allow-op-modules = "torch"\n', ["allow-op-modules must be a list of module name"]),
])
def test_a_bad_table_is_a_usage_error_naming_the_file_and_the_key(capsys, project,
                                                                   table, words):
    path = configure(project, table)
    code, out, err = gc(capsys, "run", "cases")
    assert code == ExitCode.USAGE and out == ""
    # (the key's line: the table's first, under [project] and [tool.gradcheck])
    assert err.startswith(f"gradcheck: error: {path}:5: [tool.gradcheck]"), err
    for word in words:
        assert word in err


def test_a_configured_report_that_cannot_be_written_names_the_pyproject(capsys, project):
    (project / "taken").mkdir()
    path = configure(project, 'reports = ["json:taken"]\n')
    code, _, err = gc(capsys, "run", "cases")
    assert code == ExitCode.USAGE
    assert f"{path}: [tool.gradcheck] reports json:taken is a folder" in err


# --------------------------------------------------------------------------- no PATH

def test_no_path_and_no_configured_paths_is_a_usage_error(capsys, project):
    code, out, err = gc(capsys, "run")
    assert code == ExitCode.USAGE and out == ""
    assert "give a PATH, or set paths = [...] under [tool.gradcheck]" in err
    configure(project, "seed = 1\n")
    assert gc(capsys, "run")[0] == ExitCode.USAGE


def test_a_configured_path_selecting_no_case_exits_5(capsys, project):
    (project / "empty").mkdir()
    configure(project, 'paths = ["empty"]\n')
    code, _, err = gc(capsys, "run")
    assert code == ExitCode.NO_CASES and "no cases under empty" in err
    configure(project, 'paths = ["cases"]\n')
    code, _, err = gc(capsys, "run", "-k", "nothing-like-it")
    assert code == ExitCode.NO_CASES and "contains 'nothing-like-it'" in err


def test_the_help_mentions_the_table(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "[tool.gradcheck]" in out and "pyproject.toml" in out
    assert "Without PATH, the configured paths are run" in out


def test_a_configured_path_that_is_not_there_is_named_as_the_tables(tmp_path, monkeypatch,
                                                                    capsys):
    from gradcheck.cli.exit_codes import ExitCode
    from gradcheck.cli.main import main

    (tmp_path / "pyproject.toml").write_text('[tool.gradcheck]\npaths = ["nope"]\n')
    monkeypatch.chdir(tmp_path)
    assert main(["run"]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert "pyproject.toml" in err and "[tool.gradcheck] paths: nope does not exist" in err
