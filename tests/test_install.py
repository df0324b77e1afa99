"""gradcheck works installed, not only in its checkout: the sdist holds every file of
the repository (what the tests read, and ``cases/``), the wheel built from that sdist
carries the bundled cases as package data (identical to ``cases/``), and, installed
into a bare folder, ``gradcheck bench`` finds its case files and ``gradcheck run``
checks a bundled case, and ``gradcheck init`` writes its files, from a working folder
outside the repository.

Everything is built offline, without build isolation, from a copy of the checkout (a
build writes build/ and *.egg-info beside its sources). The bench's section is
``opchecks``, the cheapest that reads bundled files (an op case file and its module);
the whole test takes about half a minute, mostly that section's op checks.
"""

from __future__ import annotations

import filecmp
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

#: what the sdist must hold whatever git says: the bundled cases, and what tests read
NEEDED = ("cases/layers.toml", "cases/ops/paths.toml", "cases/ops/paths.py",
          "examples/test_using_gradcheck.py", "tests/fixtures", "tests/conftest.py",
          "constraints.txt", "README.md", "docs/design.md", "setup.py", "pyproject.toml")


def _ignored(folder: str, names: list[str]) -> set[str]:
    """The checkout's files that are not sources (as .gitignore has them)."""
    out = {n for n in names if n in (".git", ".venv", "build", "dist", "__pycache__",
                                     ".pytest_cache", ".hypothesis")
           or n.endswith((".egg-info", ".pyc"))}
    if Path(folder) == REPO / "reports":
        out |= {n for n in names if n != "README.md"}
    return out


def _tracked() -> list[str]:
    """The checkout's files by git, or [] where it is no git checkout (an sdist)."""
    try:
        done = subprocess.run(["git", "-C", str(REPO), "ls-files"], capture_output=True,
                              text=True, timeout=60)
    except OSError:
        return []
    return done.stdout.split() if done.returncode == 0 else []


def _python(args: list[str], cwd: Path, env: dict | None = None) -> str:
    done = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, (args, done.stdout[-3000:], done.stderr[-3000:])
    return done.stdout + done.stderr


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    """The sdist, the wheel built from it, and that wheel installed into a bare folder."""
    tmp = tmp_path_factory.mktemp("install")
    source = tmp / "checkout"
    shutil.copytree(REPO, source, ignore=_ignored)
    _python(["-c", "from setuptools import build_meta as b; "
                   f"b.build_sdist({str(tmp / 'sdist')!r})"], cwd=source)
    (sdist,) = (tmp / "sdist").glob("*.tar.gz")
    with tarfile.open(sdist) as tar:
        # the "data" filter where this Python has it (3.10.12, 3.11.4 and later)
        tar.extractall(tmp / "unpacked", **({"filter": "data"}
                                            if hasattr(tarfile, "data_filter") else {}))
    (unpacked,) = (tmp / "unpacked").iterdir()
    _python(["-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
             str(tmp / "wheel"), str(unpacked)], cwd=tmp)
    (wheel,) = (tmp / "wheel").glob("*.whl")
    _python(["-m", "pip", "install", "-q", "--no-deps", "--target", str(tmp / "site"),
             str(wheel)], cwd=tmp)
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    return {"unpacked": unpacked, "site": tmp / "site", "cwd": elsewhere}


def _installed_env(site: Path) -> dict[str, str]:
    """The installed copy first on the path, none of this test session's settings."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GRADCHECK_", "PYTEST_", "GITHUB_"))}
    env["PYTHONPATH"] = str(site)
    return env


def test_the_sdist_holds_every_file_of_the_repository(built):
    unpacked = built["unpacked"]
    missing = [f for f in (*NEEDED, *_tracked()) if not (unpacked / f).exists()]
    assert missing == []


def test_the_wheel_carries_the_bundled_cases_as_they_are(built):
    shipped = built["site"] / "gradcheck" / "bundled_cases"
    ours = sorted(p.relative_to(REPO / "cases") for p in (REPO / "cases").rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts)
    theirs = sorted(p.relative_to(shipped) for p in shipped.rglob("*")
                    if p.is_file() and "__pycache__" not in p.parts)
    assert ours and theirs == ours
    _, differ, errors = filecmp.cmpfiles(REPO / "cases", shipped, map(str, ours),
                                         shallow=False)
    assert differ == errors == []


def test_the_installed_bench_and_run_find_their_case_files(built):
    env, cwd = _installed_env(built["site"]), built["cwd"]
    where = _python(["-c", "import gradcheck.cli.bench.config as c, gradcheck; "
                           "print(gradcheck.__file__); print(c.BUNDLED)"], cwd, env)
    module, bundled = where.split()
    assert Path(module).is_relative_to(built["site"])
    assert Path(bundled) == built["site"] / "gradcheck" / "bundled_cases"

    out = _python(["-m", "gradcheck", "bench", "--quick", "--section", "opchecks",
                   "--out", "reports"], cwd, env)
    assert "no such file" not in out and "FAILED" not in out, out[-3000:]
    report = json.loads((cwd / "reports" / "bench.json").read_text(encoding="utf-8"))
    (section,) = report["sections"]
    assert section["id"] == "opchecks" and section["absent"] == []
    assert [r for r in report["rows"] if r["section"] == "opchecks"]

    # init's templates are the package's own (the workflow, the test), no repository file
    (cwd / "cube_ops.py").write_text("class Cube:\n    def forward(ctx, x):\n"
                                     "        return x ** 3\n")
    out = _python(["-m", "gradcheck", "init", "cube_ops:Cube"], cwd, env)
    assert "gradcheck run cases/cube.toml" in out
    assert (cwd / ".github" / "workflows" / "gradcheck.yml").is_file()

    case = built["site"] / "gradcheck" / "bundled_cases" / "activations.toml"
    out = _python(["-m", "gradcheck", "run", str(case), "-k", "tanh", "--points", "1"],
                  cwd, env)
    summary = re.search(r"(\d+) passed, 0 failed, 0 errored, 0 skipped", out)
    assert summary and int(summary.group(1)) >= 1, out[-3000:]
