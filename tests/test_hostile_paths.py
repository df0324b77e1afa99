"""Writes stay in the project (issue 31, item 4): every escape of tests/hostile/paths/
(reports to the home folder, absolute or ../; a committed link at the report path, a
linked folder, a dangling link, a chain, a link to a source file; .git/ and .github/;
configured paths outside the project; a nested pyproject.toml widening allow-op-modules;
patterns that admit the standard library) is run as ``python -m gradcheck ...`` from a
throwaway project under tmp_path, with a fake HOME beside it, and must hold: exit code 2,
a message naming the path, where it resolves and why, and every file under tmp_path as
it was (nothing written, no link's target touched, no case run). What stays allowed is
checked too: /dev/stdout, /dev/stderr, a link to /dev/null, reports inside the project,
a case file named on the command line wherever it lies, torch/numpy/mypkg.* patterns."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gradcheck.project.confine import write_problem
from gradcheck.project.op_patterns import problem

HERE = Path(__file__).resolve().parent / "hostile" / "paths"
_spec = importlib.util.spec_from_file_location("hostile_paths_escapes", HERE / "escapes.py")
escapes = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = escapes   # dataclasses look their module up there
_spec.loader.exec_module(escapes)
ROOT = Path(__file__).resolve().parents[1]


def layout(tmp_path: Path, escape=None) -> dict[str, Path]:
    """The base layout of escapes.py (and ``escape``'s own files, links and table)
    under ``tmp_path``; the placeholders' folders."""
    places = {"home": tmp_path / "home", "outside": tmp_path / "outside",
              "project": tmp_path / "project"}
    fill = {k: str(v) for k, v in places.items()}
    for name, text in escapes.BASE_FILES.items():
        path = Path(name.format(**fill))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.replace("{outside}", fill["outside"]), encoding="utf-8")
    table = escape.table.format(**fill) if escape else ""
    (places["project"] / "pyproject.toml").write_text(
        '[project]\nname = "probe"\n\n[tool.gradcheck]\n' + table, encoding="utf-8")
    for name, text in (escape.files if escape else {}).items():
        path = places["project"] / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.replace("{outside}", fill["outside"]), encoding="utf-8")
    for name, target in (escape.links if escape else {}).items():
        link = places["project"] / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target.format(**fill))
    return places


def snapshot(folder: Path) -> dict[str, object]:
    """Every entry under ``folder``: a file's bytes, a link's target, a folder."""
    found: dict[str, object] = {}
    for top, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(top) / name
            key = str(path.relative_to(folder))
            if path.is_symlink():
                found[key] = ("link", os.readlink(path))
            elif path.is_dir():
                found[key] = "folder"
            else:
                found[key] = path.read_bytes()
    return found


def gradcheck(places: dict[str, Path], command: str, *argv: str,
              timeout: float = 240) -> subprocess.CompletedProcess:
    """``python -m gradcheck COMMAND ARGV`` from the project, HOME the fake home."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    env.update(HOME=str(places["home"]), PYTHONPATH=str(ROOT), GRADCHECK_NO_CACHE="1")
    return subprocess.run([sys.executable, "-m", "gradcheck", command, *argv],
                          cwd=places["project"], env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("escape", escapes.ESCAPES, ids=lambda e: e.name)
def test_each_escape_is_refused_and_writes_nothing(tmp_path, escape):
    places = layout(tmp_path, escape)
    before = snapshot(tmp_path)
    fill = {k: str(v) for k, v in places.items()}
    done = gradcheck(places, escape.command, *(a.format(**fill) for a in escape.argv))
    said = done.stdout + done.stderr
    assert done.returncode == 2, said
    assert escape.says in " ".join(said.split()), said   # (a report line wraps at spaces)
    assert "Traceback" not in said, said
    assert snapshot(tmp_path) == before   # nothing written, no link touched, no case ran


def test_the_messages_name_the_path_where_it_resolves_and_why(tmp_path):
    places = layout(tmp_path)
    project, home = places["project"], places["home"]
    (project / "reports").mkdir()
    (project / "reports" / "gradcheck.xml").symlink_to(home / ".bashrc")
    said = gradcheck(places, "run", "cases/a.toml", "--report",
                     "junit:reports/gradcheck.xml").stderr
    assert (f"--report junit:reports/gradcheck.xml resolves to {home / '.bashrc'}, which "
            f"is outside the project root {project}: gradcheck writes only inside the "
            "project it runs in") in said, said
    (project / "pyproject.toml").write_text('[tool.gradcheck]\npaths = ["/usr"]\n')
    said = gradcheck(places, "run").stderr
    assert f"{project / 'pyproject.toml'}: [tool.gradcheck] paths: /usr is outside the " \
           f"project root {project}: the configured paths stay in the project" in said, said


def test_an_escape_counts_by_category():
    # the corpus covers each escape of the paragraph
    counts: dict[str, int] = {}
    for e in escapes.ESCAPES:
        counts[e.category] = counts.get(e.category, 0) + 1
    assert set(counts) == {"report", "link", "git", "paths", "nested", "pattern"}
    assert len({e.name for e in escapes.ESCAPES}) == len(escapes.ESCAPES)


def test_streams_sinks_and_the_project_stay_writable(tmp_path):
    places = layout(tmp_path)
    project = places["project"]
    (project / "reports").mkdir()
    (project / "reports" / "null").symlink_to("/dev/null")
    done = gradcheck(places, "run", "cases/a.toml", "-q", "--output", "/dev/stdout",
                     "--report", "json:/dev/stderr", "--report", "junit:reports/r.xml",
                     "--report", "text:reports/null")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout and '"cases"' in done.stderr
    assert (project / "reports" / "r.xml").read_text().startswith("<?xml")
    assert (project / "reports" / "null").is_symlink()
    assert (project / "case_ran").is_file()   # the probe's op did run, this time


def test_a_case_file_named_on_the_command_line_is_read_wherever_it_lies(tmp_path):
    # the user's choice, unlike the pyproject's paths: its op is a file of its project
    places = layout(tmp_path)
    done = gradcheck(places, "run", str(places["outside"] / "evil.toml"), "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (places["outside"] / "case_ran").is_file()


def test_the_root_pyprojects_patterns_count_and_a_nested_ones_do_not(tmp_path):
    places = layout(tmp_path)
    project = places["project"]
    (project / "cases" / "sub").mkdir()
    (project / "cases" / "sub" / "n.toml").write_text(escapes.NUMPY_CASE)
    (project / "cases" / "sub" / "pyproject.toml").write_text(
        '[tool.gradcheck]\nallow-op-modules = ["numpy"]\n')
    refused = gradcheck(places, "run", "cases/sub/n.toml")
    assert refused.returncode == 2
    nested = project / "cases" / "sub" / "pyproject.toml"
    said = " ".join(refused.stdout.split())   # (a report line wraps at spaces)
    assert f"({nested} allows it, but that pyproject.toml is nested inside the project" \
        in said, refused.stdout
    assert f"add allow-op-modules = [\"numpy\"] under [tool.gradcheck] in " \
           f"{project / 'pyproject.toml'}" in said
    # the same pattern in the root's pyproject lets the module through
    (project / "pyproject.toml").write_text(
        '[tool.gradcheck]\nallow-op-modules = ["numpy"]\n')
    allowed = gradcheck(places, "run", "cases/sub/n.toml")
    assert "refused" not in allowed.stdout, allowed.stdout


@pytest.mark.parametrize("pattern", ["torch", "tor*", "torch.*", "numpy", "numpy.*",
                                     "mypkg.*", "mypkg", "scipy.special", "triton*"])
def test_patterns_of_a_package_stay_allowed(pattern):
    assert problem(pattern) == ""


@pytest.mark.parametrize("pattern, admits", [
    ("*", "'os'"), ("o*", "'os'"), ("subprocess", "'subprocess'"),
    ("*process", "'subprocess'"),
    ("importlib*", "'importlib'"), ("*.os", "any package's module 'os'"),
    ("os.*", "'os.path'"), ("*.path", "'os.path'"), ("dill", "'dill'"),
    ("t*", "'tempfile'")])
def test_patterns_that_admit_the_standard_library_are_refused(pattern, admits):
    assert f"would admit {admits}" in problem(pattern) or \
        f"would admit the standard library's {admits}" in problem(pattern) or \
        f"would admit the installed module {admits}" in problem(pattern), problem(pattern)


def test_a_link_replaced_after_the_check_is_judged_again_before_writing(tmp_path,
                                                                        monkeypatch):
    # a report path made a link out of the project while the cases ran is not written
    from types import SimpleNamespace

    from gradcheck.base.result import RunResult
    from gradcheck.cli.settings import Report
    from gradcheck.cli.output import publish

    places = layout(tmp_path)
    project = places["project"]
    monkeypatch.chdir(project)
    (project / "reports").mkdir()
    (project / "reports" / "r.txt").symlink_to(places["home"] / ".bashrc")
    args = SimpleNamespace(verbose=False, output=None, format="text", color="never",
                           quiet=True, step_summary=False,
                           reports=[Report("text", "reports/r.txt", "--report")])
    unwritten = publish(args, RunResult(cases=(), seconds=0.0))
    assert unwritten and "outside the project root" in unwritten[0]
    assert (places["home"] / ".bashrc").read_text() == escapes.BASE_FILES["{home}/.bashrc"]


def test_write_problem_judges_the_resolved_path(tmp_path):
    root = tmp_path / "p"
    (root / "sub").mkdir(parents=True)
    assert write_problem(root / "sub" / "r.xml", root) == ""
    for stream in ("/dev/stdout", "/dev/stderr", "/dev/null"):
        assert write_problem(stream, root) == ""
    assert "outside the project root" in write_problem(root / ".." / "x", root)
    assert "outside the project root" in write_problem("/dev/sda", root)
    assert "is under .git/" in write_problem(root / "sub" / ".git" / "x", root)


def test_the_pytest_plugins_report_stays_in_the_project(tmp_path):
    # addopts in a pull request's pyproject.toml can set --gradcheck-report
    places = layout(tmp_path)
    project, bashrc = places["project"], places["home"] / ".bashrc"
    (project / "test_nothing.py").write_text("def test_nothing():\n    pass\n")
    before = snapshot(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    env.update(HOME=str(places["home"]), PYTHONPATH=str(ROOT))
    # the plugin comes in by its entry point, as in any project that installs gradcheck
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           f"--gradcheck-report={bashrc}", "test_nothing.py"],
                          cwd=project, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout + done.stderr
    assert f"--gradcheck-report: {bashrc} is outside the project root" in done.stderr
    assert snapshot(tmp_path) == before
