"""The CI recipe (docs/ci.md) works as written: its GitHub Actions workflow's ``run:`` steps,
in order up to and including ``gradcheck run``, run in a fresh virtualenv on a small
project and write every report, and the GitLab CI example runs the same commands.

What differs from docs/ci.md is :data:`SUBSTITUTIONS`, and nothing else: the tests run
without a network, so the package comes from this project's path instead of its
``git+https`` URL, and torch's CPU build from the local package store under
``constraints.txt``'s pin instead of PyTorch's CPU index. The workflow's ``uses:`` steps
are what the test sets up itself: ``actions/checkout`` is the small project copied into
a temporary folder, ``actions/setup-python`` the virtualenv (this interpreter's Python,
no system site-packages), whose ``bin`` comes first on ``PATH``, as on a runner.

A fresh virtualenv and a real install of torch and gradcheck's other dependencies take
about a minute (pip's cache makes a second run faster); no dependency is skipped.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import venv
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
CI_PAGE = (REPO / "docs" / "ci.md").read_text(encoding="utf-8")

#: docs/ci.md's text -> what the test runs instead (each must occur in the workflow's steps)
SUBSTITUTIONS = {
    # PyTorch's CPU index needs the network: the same CPU build, pinned, from the
    # machine's package store
    "pip install torch --index-url https://download.pytorch.org/whl/cpu":
        f"pip install -c {REPO / 'constraints.txt'} torch==2.13.0",
    # the repository: a copy of this project's files (pip's in-tree build writes build/
    # and *.egg-info beside the sources, so not into this checkout)
    "git+https://github.com/OWNER/gradcheck": "file://{source}",
}

#: what the copy of the project leaves out: environments, caches, build outputs
_NOT_SOURCES = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info",
                                      "__pycache__", ".pytest_cache", ".hypothesis",
                                      "reports")

CASES = """\
[defaults]
points = 2

[[case]]
name = "tanh-square"
expr = "sum(tanh(x) ** 2)"
inputs.x = { shape = [3] }

[[case]]
name = "softplus"
expr = "sum(log(1 + exp(x)))"
inputs.x = { shape = [2, 2], domain = [-3, 3] }
dtype = ["float64", "float32"]
"""


def _yaml_block(first_line: str) -> dict:
    """docs/ci.md's ```yaml block whose first line is ``first_line``, parsed."""
    blocks = re.findall(r"```yaml\n(.*?)```", CI_PAGE, re.S)
    (block,) = [b for b in blocks if b.splitlines()[0].strip() == first_line]
    return yaml.safe_load(block)


def workflow_commands() -> list[str]:
    """The GitHub Actions workflow's ``run:`` steps, in order, up to and including the
    one that runs ``gradcheck run``."""
    doc = _yaml_block("# .github/workflows/gradcheck.yml")
    (job,) = doc["jobs"].values()
    commands = [step["run"].strip() for step in job["steps"] if "run" in step]
    last = next(i for i, c in enumerate(commands) if c.startswith("gradcheck run"))
    return commands[:last + 1]


def substituted(commands: list[str], source: Path) -> list[str]:
    """``commands`` with :data:`SUBSTITUTIONS` made (each one used)."""
    text = "\n".join(commands)
    for readme, ours in SUBSTITUTIONS.items():
        assert readme in text, f"docs/ci.md's workflow no longer says {readme!r}"
        text = text.replace(readme, ours.format(source=source))
    return text.split("\n")


def test_the_gitlab_example_runs_the_same_commands():
    doc = _yaml_block("# .gitlab-ci.yml")
    (job,) = doc.values()
    assert [c.strip() for c in job["script"]] == workflow_commands()
    junit = re.search(r"--report junit:(\S+)", workflow_commands()[-1]).group(1)
    assert job["artifacts"]["reports"]["junit"] == junit
    assert job["artifacts"]["when"] == "always"


def test_the_dry_run_is_the_workflows_commands():
    """docs/ci.md's local dry run is a fresh virtualenv, then the workflow's ``run:``
    steps as they are (the folded ``>-`` step on one line)."""
    dry = CI_PAGE[CI_PAGE.index("## A local dry run"):]
    (block,) = re.findall(r"```sh\n(.*?)```", dry[:dry.index("\n## ")], re.S)
    first, *steps = block.strip().split("\n")
    assert first.startswith("python3 -m venv ") and "/bin/activate" in first
    assert steps == workflow_commands()


def test_the_cpu_index_fails_fast():
    """The CPU index's step bounds pip's retries and socket timeout."""
    (torch_step,) = [c for c in workflow_commands() if "download.pytorch.org" in c]
    assert re.search(r"--retries \d+", torch_step) and re.search(r"--timeout \d+", torch_step)


def test_the_workflow_keeps_its_reports_when_cases_fail():
    doc = _yaml_block("# .github/workflows/gradcheck.yml")
    (job,) = doc["jobs"].values()
    uses = {step["uses"].split("@")[0]: step for step in job["steps"] if "uses" in step}
    upload, publish = uses["actions/upload-artifact"], uses["mikepenz/action-junit-report"]
    assert upload["if"] == "always()" and publish["if"] == "always()"
    assert upload["with"]["path"] == "reports/"
    reports = dict(re.findall(r"--report (\w+):(\S+)", workflow_commands()[-1]))
    assert set(reports) == {"junit", "markdown", "json", "html"}
    assert all(path.startswith("reports/") for path in reports.values())
    assert publish["with"]["report_paths"] == reports["junit"]


def _environment(env_dir: Path) -> dict[str, str]:
    """A runner's environment: the virtualenv first on PATH, nothing of this test
    session's (its in-process switch, its Python path, CI variables of the machine that
    runs the tests, which would send the Markdown report to its job summary)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GITHUB_", "GRADCHECK_", "PYTEST_", "VIRTUAL_ENV"))
           and k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(env_dir)
    return env


@pytest.mark.skipif(sys.platform == "win32", reason="the workflow runs on ubuntu-latest")
def test_the_readmes_workflow_installs_and_runs_in_a_fresh_virtualenv(tmp_path):
    source = tmp_path / "gradcheck-source"
    shutil.copytree(REPO, source, ignore=_NOT_SOURCES)
    project = tmp_path / "project"                    # the user's repository, checked out
    (project / "cases").mkdir(parents=True)
    (project / "pyproject.toml").write_text(textwrap.dedent("""\
        [project]
        name = "uses-gradcheck"
        version = "0"
    """))
    (project / "cases" / "small.toml").write_text(CASES)
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, system_site_packages=False).create(env_dir)
    env = _environment(env_dir)
    for command in substituted(workflow_commands(), source):
        # as Actions runs a step: bash -e, pipefail, in the checkout
        done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c",
                               command], cwd=project, env=env, capture_output=True,
                              text=True, timeout=900)
        assert done.returncode == 0, (command, done.stdout[-3000:], done.stderr[-3000:])
    # the gradcheck that ran is the virtualenv's, not this checkout's
    where = subprocess.run([str(env_dir / "bin" / "python"), "-c",
                            "import gradcheck, torch; print(gradcheck.__file__); "
                            "print(torch.__version__)"], cwd=project, env=env,
                           capture_output=True, text=True, check=True).stdout.split()
    assert Path(where[0]).is_relative_to(env_dir) and where[1].startswith("2.13.0")
    assert "3 passed, 0 failed" in done.stdout       # the text report, in the log
    reports = project / "reports"
    suite = ET.parse(reports / "gradcheck.xml").getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "0", "0")
    assert (reports / "gradcheck.md").read_text(encoding="utf-8").startswith("## ✅ gradcheck")
    data = json.loads((reports / "gradcheck.json").read_text(encoding="utf-8"))
    assert data["summary"]["passed"] == 3
    html = (reports / "gradcheck.html").read_text(encoding="utf-8")
    assert "<html" in html.lower() and "softplus" in html
