"""The path escapes of issue 31 ("Files outside the project"), as data: each one a
throwaway project that tries to make ``gradcheck run`` write, read or import outside
itself. tests/test_hostile_paths.py builds each under tmp_path, with a fake home and a
folder outside the project beside it, runs ``python -m gradcheck run`` from the project
and checks that the escape held: exit code 2, the message, and every file under
tmp_path as it was (nothing written, a link's target untouched, no case run: the
project's op leaves a file when it runs).

The layout every escape starts from (placeholders: ``{home}`` the fake home,
``{outside}`` a folder beside the project, ``{project}`` the project)::

    {home}/.bashrc              "# the user's shell start-up\\n"
    {outside}/evil.toml         a case whose op (outside_ops.py) leaves a file
    {project}/pyproject.toml    [tool.gradcheck] + the escape's own table
    {project}/.git/config, .git/hooks/pre-commit, .github/workflows/ci.yml
    {project}/cases/a.toml      a case whose op (probe_ops.py) leaves a file
    {project}/cases/spawn.toml  a case naming os:spawnl, which would leave a file

Not a test module (pytest collects test_*.py only) and no case file (measure.py reads
.toml and .yaml only).
"""

from __future__ import annotations

from dataclasses import dataclass, field

# a project op that leaves a file where it runs: a case that ran cannot hide it
PROBE_OPS = '''
from pathlib import Path


def touch(x):
    Path(__file__).with_name("case_ran").write_text("ran")
    return x
'''

CASE = '''
[[case]]
name = "probe"
op = "probe_ops:touch"
reference = "x"
inputs.x = { shape = [2] }
points = 1
extreme_points = 0
dtype = "float64"
'''

# os.spawnl running /bin/sh: live wherever a pattern lets os through
SPAWN = '''
[[case]]
name = "spawn"
op = "os:spawnl"
reference = "x"
inputs.x = { shape = [] }
args = ["/bin/sh", "sh", "-c", "echo pwned > {outside}/spawned"]
points = 1
extreme_points = 0
dtype = "float64"
'''

# a case of another project, with an op of its own that leaves a file
OUTSIDE_CASE = CASE.replace("probe_ops", "outside_ops")
NUMPY_CASE = '''
[[case]]
name = "numpy-sin"
op = "numpy:sin"
reference = "sin(x)"
inputs.x = { shape = [2] }
points = 1
extreme_points = 0
dtype = "float64"
'''

BASE_FILES = {
    "{home}/.bashrc": "# the user's shell start-up\n",
    "{outside}/evil.toml": OUTSIDE_CASE,
    "{outside}/outside_ops.py": PROBE_OPS,
    "{project}/.git/config": "[core]\n\trepositoryformatversion = 0\n",
    "{project}/.git/hooks/pre-commit": "#!/bin/sh\nexit 0\n",
    "{project}/.github/workflows/ci.yml": "on: [pull_request]\n",
    "{project}/cases/a.toml": CASE,
    "{project}/cases/spawn.toml": SPAWN,
    "{project}/probe_ops.py": PROBE_OPS,
}


@dataclass(frozen=True)
class Escape:
    """One escape: what the project holds besides the base layout, the command line
    after the command (``gradcheck run`` unless it says), and what the message must
    say."""

    name: str
    category: str              # report, link, git, paths, nested, pattern
    table: str = ""            # the [tool.gradcheck] table's lines
    argv: tuple[str, ...] = ("cases/a.toml",)
    links: dict[str, str] = field(default_factory=dict)   # link -> its target
    files: dict[str, str] = field(default_factory=dict)   # more files
    says: str = ""             # a fragment the output must hold
    command: str = "run"       # the gradcheck command


def _reports(*specs: str) -> str:
    """The table of a project whose plain ``gradcheck run`` writes ``specs``."""
    return ('paths = ["cases/a.toml"]\nreports = ['
            + ", ".join(f'"{s}"' for s in specs) + "]\n")


OUTSIDE_ROOT = "outside the project root"
UNDER_GIT, UNDER_GITHUB = "is under .git/", "is under .github/"
SOURCE = "a source file (.toml)"
NESTED = "nested inside the project"
WOULD_ADMIT = "would admit"

ESCAPES = [
    # reports to files of the home folder, absolute and ../
    Escape("reports-absolute-bashrc", "report", _reports("text:{home}/.bashrc"), (),
           says=OUTSIDE_ROOT),
    Escape("reports-dotdot-bashrc", "report", _reports("text:../home/.bashrc"), (),
           says=OUTSIDE_ROOT),
    Escape("reports-dotdot-deeper", "report",
           _reports("text:reports/../../home/.profile"), (), says=OUTSIDE_ROOT),
    Escape("reports-second-of-two", "report",
           _reports("json:reports/ok.json", "text:{home}/.bashrc"), (), says=OUTSIDE_ROOT),
    Escape("output-absolute-bashrc", "report",
           argv=("cases/a.toml", "--output", "{home}/.bashrc"), says=OUTSIDE_ROOT),
    Escape("report-absolute-new-file", "report",
           argv=("cases/a.toml", "--report", "junit:{outside}/evil.xml"),
           says=OUTSIDE_ROOT),
    Escape("report-dotdot-new-file", "report",
           argv=("cases/a.toml", "--report", "junit:../outside/evil.xml"),
           says=OUTSIDE_ROOT),
    # links: a committed link at the report path, a linked folder, a dangling link, a
    # chain of links, a link to a source file, a link into .git
    Escape("link-at-ci-report-path", "link",
           argv=("cases/a.toml", "--report", "junit:reports/gradcheck.xml"),
           links={"reports/gradcheck.xml": "{home}/.bashrc"}, says=OUTSIDE_ROOT),
    Escape("link-at-configured-report", "link", _reports("junit:reports/gradcheck.xml"),
           (), links={"reports/gradcheck.xml": "{home}/.bashrc"}, says=OUTSIDE_ROOT),
    Escape("linked-reports-folder", "link", _reports("junit:reports/gradcheck.xml"), (),
           links={"reports": "{outside}"}, says=OUTSIDE_ROOT),
    Escape("dangling-link", "link",
           argv=("cases/a.toml", "--output", "reports/new.txt"),
           links={"reports/new.txt": "{home}/.new_startup"}, says=OUTSIDE_ROOT),
    Escape("chain-of-links", "link",
           argv=("cases/a.toml", "--output", "reports/a.txt"),
           links={"reports/a.txt": "b.txt", "reports/b.txt": "{home}/.bashrc"},
           says=OUTSIDE_ROOT),
    Escape("relative-link-out", "link",
           argv=("cases/a.toml", "--output", "reports/r.txt"),
           links={"reports/r.txt": "../../home/.bashrc"}, says=OUTSIDE_ROOT),
    Escape("link-to-a-case-file", "link",
           argv=("cases/a.toml", "--report", "junit:reports/r.xml"),
           links={"reports/r.xml": "../cases/a.toml"}, says=SOURCE),
    Escape("configured-link-to-pyproject", "link", _reports("junit:reports/r.xml"), (),
           links={"reports/r.xml": "../pyproject.toml"}, says=SOURCE),
    Escape("link-into-git-hooks", "link",
           argv=("cases/a.toml", "--output", "reports/hook"),
           links={"reports/hook": "../.git/hooks/pre-commit"}, says=UNDER_GIT),
    Escape("loop-of-links", "link",
           argv=("cases/a.toml", "--output", "reports/loop"),
           links={"reports/loop": "loop2", "reports/loop2": "loop"},
           says="loop of symbolic links"),
    # .git and .github, at the top and deeper
    Escape("git-hook", "git",
           argv=("cases/a.toml", "--report", "text:.git/hooks/pre-commit"),
           says=UNDER_GIT),
    Escape("git-config", "git", _reports("text:.git/config"), (), says=UNDER_GIT),
    Escape("github-new-workflow", "git", _reports("text:.github/workflows/evil.yml"), (),
           says=UNDER_GITHUB),
    Escape("github-dotdot-in", "git", _reports("text:reports/../.github/workflows/x.yml"),
           (), says=UNDER_GITHUB),
    Escape("vendored-git-hook", "git", _reports("text:vendor/lib/.git/hooks/post-merge"),
           (), says=UNDER_GIT),
    Escape("git-other-case", "git", argv=("cases/a.toml", "--output", ".GIT/config"),
           says="is under .GIT/"),
    # the bench's --out folder
    Escape("bench-out-outside", "report", argv=("--quick", "--out", "{outside}/bench"),
           command="bench", says=OUTSIDE_ROOT),
    Escape("bench-out-linked-file", "link", argv=("--quick", "--out", "reports"),
           links={"reports/bench.md": "{home}/.bashrc"}, command="bench",
           says=OUTSIDE_ROOT),
    Escape("bench-out-git", "git", argv=("--quick", "--out", ".git/hooks"),
           command="bench", says=UNDER_GIT),
    # configured paths outside the project
    Escape("paths-root", "paths", 'paths = ["/"]\n', (), says=OUTSIDE_ROOT),
    Escape("paths-usr", "paths", 'paths = ["/usr"]\n', (), says=OUTSIDE_ROOT),
    Escape("paths-other-project", "paths", 'paths = ["../outside"]\n', (),
           says=OUTSIDE_ROOT),
    Escape("paths-absolute-case", "paths", 'paths = ["{outside}/evil.toml"]\n', (),
           says=OUTSIDE_ROOT),
    Escape("paths-linked-folder", "paths", 'paths = ["cases/theirs"]\n', (),
           links={"cases/theirs": "{outside}"}, says=OUTSIDE_ROOT),
    # a nested pyproject.toml cannot widen the root's allow-op-modules
    Escape("nested-allows-numpy", "nested", argv=("cases/sub/n.toml",),
           files={"cases/sub/pyproject.toml":
                  '[tool.gradcheck]\nallow-op-modules = ["numpy"]\n',
                  "cases/sub/n.toml": NUMPY_CASE}, says=NESTED),
    Escape("nested-allows-os", "nested", argv=("cases/sub/spawn.toml",),
           files={"cases/sub/pyproject.toml":
                  '[tool.gradcheck]\nallow-op-modules = ["os"]\n',
                  "cases/sub/spawn.toml": SPAWN}, says="is no file of this project"),
    Escape("nested-allows-everything", "nested", argv=("cases/sub/spawn.toml",),
           files={"cases/sub/pyproject.toml":
                  '[tool.gradcheck]\nallow-op-modules = ["*"]\n',
                  "cases/sub/spawn.toml": SPAWN}, says="is no file of this project"),
    # patterns that would admit the standard library
    *[Escape(f"pattern-{label}", "pattern", f'allow-op-modules = ["{pattern}"]\n',
             ("cases/spawn.toml",), says=f"allow pattern '{pattern}' {WOULD_ADMIT}")
      for label, pattern in [("star", "*"), ("o-star", "o*"), ("os", "os"),
                             ("subprocess", "subprocess"), ("sys", "sys"),
                             ("builtins", "builtins"), ("importlib-star", "importlib*"),
                             ("shutil", "shutil"), ("ctypes", "ctypes"),
                             ("pickle", "pickle"), ("any-package-os", "*.os"),
                             ("os-submodules", "os.*"), ("posix", "posix"),
                             ("gradcheck", "gradcheck*")]],
    Escape("pattern-on-the-command-line", "pattern",
           argv=("cases/spawn.toml", "--allow-op-module", "o*"),
           says=f"allow pattern 'o*' {WOULD_ADMIT}"),
]
