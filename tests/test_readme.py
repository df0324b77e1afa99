"""The README's and the docs pages' examples run as written: every fenced block of
README.md and docs/*.md (docs/design.md aside: the design's blocks are sketches of
the code, not examples to run) is run, parsed or explicitly exempted, by its
language and the markers before it.

The convention (a new block that is none of these fails
:func:`test_every_block_is_run_parsed_or_exempted`):

- ```python: executed in a fresh namespace, in a temporary copy of the project (its
  ``cases/``, ``examples/`` and ``pyproject.toml``); every ``test_*`` function it
  defines that takes no argument is then called, so a block may show a pytest test.
- ```toml: parsed; a whole case file (one with a ``[[case]]`` table) is read with
  :func:`gradcheck.cases.read_file` without errors (beside it, each ```python block of
  the same page whose first line is ``# NAME.py``, as that module), and a ``[tool.gradcheck]`` table
  is checked as ``gradcheck run`` checks the project's.
- ```yaml: parsed (tests/test_ci_recipe.py runs the CI recipe's commands).
- ```console: each ``$ gradcheck ...`` line is run (``gradcheck.cli.main.main``, in
  the copy of the project), and the lines after it, up to the next ``$``, are its
  expected stdout, compared line by line (trailing spaces ignored): a line that is
  ``...`` alone stands for any number of lines, and ``...`` inside a line for any text.
- ```sh and ```bash: each command (lines, ``&&`` and ``;`` split them; comments
  dropped) that starts with ``gradcheck`` is run so, its output not compared;
  ``pip install`` is the environment's set-up, not run (this environment has it).
- every gradcheck command is parsed by the CLI's own argparse parser first (as shown,
  and as run when a marker narrows it), and a
  command that is run must exit 0 or 1 (a verdict: passed, or the failure or finding
  the block shows), never 2 (usage), 3 (internal) or 5 (nothing selected); each report
  file it names is then written.

Markers, each an HTML comment on its own line right before the block (several may be
stacked):

- ``<!-- test: replace OLD => NEW -->``: the block's commands are run with OLD replaced
  by NEW: the narrowed form of an expensive command, which the block itself declares
  (``cases/ => cases/ops/ops.toml -k swish-sign --dtype float64``). A ``gradcheck run``
  of a folder or a ``gradcheck bench`` that is run is refused: the whole suite's docs
  test stays under a minute.
- ``<!-- test: parse -->``: the block's gradcheck commands are only parsed, not run.
- ``<!-- test: numbers -->``: every number of the output is masked on both sides (the
  last digits of a float64 rounding are the BLAS's).
- ``<!-- test: skip REASON -->``: not tested, for the REASON given (say where it is
  checked instead).
"""

from __future__ import annotations

import faulthandler
import re
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
PAGES = [ROOT / "README.md"] + sorted(p for p in (ROOT / "docs").glob("*.md")
                                      if p.name != "design.md")
#: what a block's test may take before the run is stopped with a traceback (a hang)
BLOCK_LIMIT_S = 180
MARKER = re.compile(r"<!-- test: (.*?) -->$")
FENCE = re.compile(r"^```(\w*)\s*$")
RUNS = {"python", "toml", "yaml", "console", "sh", "bash"}


@dataclass
class Block:
    page: str
    line: int                      # of the opening fence, 1-based
    lang: str
    text: str
    markers: list[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    def marker(self, kind: str) -> list[str]:
        """The arguments of this block's markers of ``kind``."""
        return [m[len(kind):].strip() for m in self.markers
                if m == kind or m.startswith(kind + " ")]


def blocks_of(path: Path) -> list[Block]:
    """The fenced blocks of one Markdown page, each with the markers right before it."""
    lines = path.read_text(encoding="utf-8").split("\n")
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        end = next(k for k in range(i + 1, len(lines)) if lines[k].startswith("```"))
        markers, k = [], i - 1
        while k >= 0 and MARKER.match(lines[k]):
            markers.insert(0, MARKER.match(lines[k]).group(1))
            k -= 1
        out.append(Block(path.relative_to(ROOT).as_posix(), i + 1, m.group(1),
                         "\n".join(lines[i + 1:end]) + "\n", markers))
        i = end + 1
    return out


BLOCKS = [b for page in PAGES for b in blocks_of(page)]


def _ids(blocks):
    return [b.where for b in blocks]


# ---------------------------------------------------------------- the classification


def test_every_block_is_run_parsed_or_exempted():
    unknown = [b.where for b in BLOCKS
               if not b.marker("skip") and b.lang not in RUNS]
    assert not unknown, f"blocks neither run nor exempted (<!-- test: skip WHY -->): {unknown}"
    unreasoned = [b.where for b in BLOCKS if "skip" in b.markers]
    assert not unreasoned, f"a skip marker says why: {unreasoned}"
    for b in BLOCKS:
        for m in b.markers:
            assert m.split(" ")[0] in ("skip", "replace", "parse", "numbers"), (b.where, m)


def test_the_markers_are_read():
    quick = [b for b in BLOCKS if b.page == "README.md" and b.lang == "sh"]
    assert quick[0].marker("replace") and quick[1].marker("skip")
    assert len(BLOCKS) > 30 and {b.lang for b in BLOCKS} >= RUNS


# ---------------------------------------------------------------- commands


def commands(block: Block) -> list[tuple[str, str, str | None]]:
    """The block's commands: each as shown, as run (the markers' replacements made) and
    with its expected output (console blocks; None: not compared)."""
    if block.lang == "console":
        found, current = [], None
        for line in block.text.rstrip("\n").split("\n"):
            if line.startswith("$ "):
                current = [line[2:], []]
                found.append(current)
            elif current is not None:
                current[1].append(line)
        pairs = [(c, "\n".join(out) if out else None) for c, out in found]
    else:
        joined = block.text.replace("\\\n", " ")
        pairs = []
        for line in joined.split("\n"):
            words = shlex.split(line, comments=True)
            command: list[str] = []
            for word in words + ["&&"]:
                if word in ("&&", ";"):
                    if command:
                        pairs.append((shlex.join(command), None))
                    command = []
                else:
                    command.append(word)
    out = []
    for shown, expected in pairs:
        run = shown
        for spec in block.marker("replace"):
            old, new = (s.strip() for s in spec.split("=>"))
            run = run.replace(old, new)
        out.append((shown, run, expected))
    return out


def _parsed(argv: list[str], where: str):
    from gradcheck.cli.main import _parser

    try:
        return _parser().parse_args(argv)
    except SystemExit:
        pytest.fail(f"{where}: the CLI's parser refuses {shlex.join(argv)!r}")


def _too_slow(args) -> str:
    if args.command == "bench":
        return "gradcheck bench takes minutes"
    if args.command == "run" and any(Path(p).is_dir() for p in args.paths):
        return "a folder runs every case under it"
    return ""


def _pattern(expected: str) -> re.Pattern:
    parts = []
    for line in expected.rstrip("\n").split("\n"):
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(".*".join(map(re.escape, line.rstrip().split("..."))) + r"\n")
    return re.compile("".join(parts))


NUMBER = re.compile(r"\d+(?:\.\d*)?(?:e[+-]?\d+)?")


def matches(expected: str, got: str, numbers: bool = False) -> bool:
    """``got`` (stdout) is what ``expected`` shows, with the ``...`` wildcards."""
    got = "\n".join(line.rstrip() for line in got.strip("\n").split("\n")) + "\n"
    if numbers:
        expected, got = NUMBER.sub("N", expected), NUMBER.sub("N", got)
    return _pattern(expected).fullmatch(got) is not None


def test_the_output_convention():
    shown = "PASS  a ...\n...\n2 passed in ...s\n"
    assert matches(shown, "PASS  a 0.1s\nPASS  b\nx\n2 passed in 3.0s\n")
    assert matches(shown, "PASS  a 0.1s\n2 passed in 3.0s")
    assert not matches(shown, "FAIL  a 0.1s\n2 passed in 3.0s\n")
    assert not matches("a\nb\n", "a\nb\nc\n")
    assert matches("t = 4.2e-16\n", "t = 3.9e-16\n", numbers=True)
    assert not matches("t = 4.2e-16\n", "t = 3.9e-16\n")


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A copy of the project's examples, in which the blocks run (their reports are
    written there, not into this checkout)."""
    root = tmp_path_factory.mktemp("project")
    for name in ("cases", "examples"):
        shutil.copytree(ROOT / name, root / name,
                        ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    return root


@pytest.fixture
def in_project(project, monkeypatch):
    monkeypatch.chdir(project)
    monkeypatch.syspath_prepend(str(project))
    for name in ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)
    faulthandler.dump_traceback_later(BLOCK_LIMIT_S, exit=True)
    yield project
    faulthandler.cancel_dump_traceback_later()


def _reports(args) -> list[str]:
    # (--report's type has split each FMT:PATH already)
    paths = [path for _, path in getattr(args, "report", None) or ()]
    return paths + ([args.output] if getattr(args, "output", None) else [])


SHELL = [b for b in BLOCKS if b.lang in ("console", "sh", "bash") and not b.marker("skip")]


@pytest.mark.parametrize("block", SHELL, ids=_ids(SHELL))
def test_commands_run_as_shown(block, in_project, capsys):
    from gradcheck.cli.main import main

    ran = 0
    for shown, command, expected in commands(block):
        argv = shlex.split(command)
        if argv[:2] == ["pip", "install"]:
            continue                        # the environment's set-up: installed here
        assert argv[0] == "gradcheck", (
            f"{block.where}: {command!r} is no gradcheck command: mark the block "
            "<!-- test: skip WHY -->")
        _parsed(shlex.split(shown)[1:], block.where)    # the command as the page shows it
        args = _parsed(argv[1:], block.where)
        if block.marker("parse"):
            continue
        assert not _too_slow(args), (f"{block.where}: {command!r}: {_too_slow(args)}; "
                                     "declare a narrowed form: <!-- test: replace A => B -->")
        capsys.readouterr()
        code = main(argv[1:])
        out = capsys.readouterr().out
        assert code in (0, 1), (block.where, command, code, out[-3000:])
        if expected is not None:
            assert matches(expected, out, bool(block.marker("numbers"))), (
                f"{block.where}: {command}\n--- shown\n{expected}\n--- got\n{out}")
        missing = [p for p in _reports(args) if not (in_project / p).is_file()]
        assert not missing, (block.where, command, missing)
        ran += 1
    assert ran or block.marker("parse"), f"{block.where}: no command ran"


# ---------------------------------------------------------------- python, toml, yaml


PYTHON = [b for b in BLOCKS if b.lang == "python" and not b.marker("skip")]


@pytest.mark.parametrize("block", PYTHON, ids=_ids(PYTHON))
def test_python_blocks_run(block, in_project):
    namespace: dict = {"__name__": f"docs_block_{block.line}"}
    # (a name that is no file: inspect, which Hypothesis asks for a test's source,
    # would read the page's own lines at the block's line numbers)
    exec(compile(block.text, f"<{block.where} python block>", "exec"), namespace)
    for name, value in list(namespace.items()):
        if name.startswith("test_") and callable(value) and not _takes_arguments(value):
            value()


def _takes_arguments(function) -> bool:
    import inspect

    try:
        return bool(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return False


TOML = [b for b in BLOCKS if b.lang == "toml" and not b.marker("skip")]


@pytest.mark.parametrize("block", TOML, ids=_ids(TOML))
def test_toml_blocks_are_valid(block, tmp_path):
    data = tomllib.loads(block.text)
    if "case" in data:
        from gradcheck.cases import read_file

        for module in BLOCKS:          # the page's modules, beside the case file
            name = re.match(r"# (\w+\.py)\n", module.text)
            if module.page == block.page and module.lang == "python" and name:
                (tmp_path / name.group(1)).write_text(module.text, encoding="utf-8")
        path = tmp_path / "case.toml"
        path.write_text(block.text, encoding="utf-8")
        cases, errors = read_file(path)
        # (a case of expr_function comes with its twin, NAME/as-written)
        assert not errors, (block.where, errors)
        assert {c["name"] for c in data["case"]} <= {c.name for c in cases}, block.where
    elif "tool" in data:
        from gradcheck.cli.settings import check
        from gradcheck.project.settings import settings

        (tmp_path / "pyproject.toml").write_text(block.text, encoding="utf-8")
        check(settings(tmp_path))       # raises SettingsError, naming the key
    else:
        pytest.fail(f"{block.where}: a TOML block is a case file or a [tool.gradcheck]")


YAML = [b for b in BLOCKS if b.lang == "yaml" and not b.marker("skip")]


@pytest.mark.parametrize("block", YAML, ids=_ids(YAML))
def test_yaml_blocks_parse(block):
    import yaml

    assert isinstance(yaml.safe_load(block.text), dict), block.where


# ---------------------------------------------------------------- the README itself


def test_quickstart_commands_match_ci():
    ci = (ROOT / ".ci" / "run").read_text()
    commands = re.findall(r"```sh\n(.*?)\n```", README, re.S)
    assert len(commands) == 2
    assert "gradcheck run cases/" in commands[0]
    assert commands[1] in ci


def test_the_readme_starts_with_the_users_job():
    """Check your op comes right after the Quickstart, and every docs page is linked
    from the README."""
    headings = re.findall(r"^## (.+)$", README, re.M)
    assert headings[:2] == ["Quickstart", "Check your op"]
    linked = set(re.findall(r"\(docs/([\w-]+\.md)", README))
    pages = {p.name for p in (ROOT / "docs").glob("*.md")}
    assert pages - linked == set(), f"docs pages the README does not link: {pages - linked}"


def _anchors(page: Path) -> set[str]:
    """The anchors GitHub makes of a page's headings."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(encoding="utf-8"), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_every_relative_link_resolves():
    """Each link between the pages names a file that exists, and a heading of it."""
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for target, anchor in re.findall(r"\]\(([^)#:]*)(?:#([^)]*))?\)", text):
            linked = page.parent / target if target else page
            assert linked.exists(), f"{page.name}: broken link {target}"
            if anchor and linked.suffix == ".md":
                assert anchor in _anchors(linked), f"{page.name}: no #{anchor} in {target}"


# ---------------------------------------------------------------- the reference pages


def _page(name: str) -> str:
    return (ROOT / "docs" / name).read_text(encoding="utf-8")


def _options() -> dict[str, set[str]]:
    """Every subcommand's option strings (``--help`` aside), ``""`` the top level's."""
    import argparse

    from gradcheck.cli.main import _parser

    out: dict[str, set[str]] = {}

    def walk(parser, name):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub, subparser in action.choices.items():
                    walk(subparser, sub)
            else:
                out.setdefault(name, set()).update(
                    o for o in action.option_strings if o not in ("-h", "--help"))
    walk(_parser(), "")
    return out


def _synopsis() -> dict[str, set[str]]:
    """docs/cli.md's synopsis: the options written under each ``gradcheck COMMAND``."""
    text = _page("cli.md")
    block = text[text.index("```\ngradcheck --help") + 4:]
    block = block[:block.index("```")]
    out: dict[str, set[str]] = {}
    name = ""
    for line in block.split("\n"):
        words = line.split()
        if words[:1] == ["gradcheck"]:
            name = "" if words[1].startswith("-") else words[1]
        # (an option named in a comment counts: "--strict-shapes ... (--no-strict-shapes)")
        out.setdefault(name, set()).update(
            re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", line))
    return {name: found - {"-h", "--help"} for name, found in out.items()}


def test_the_cli_synopsis_names_every_option():
    """Every option of the CLI's parser is in docs/cli.md's synopsis under its command,
    and every option written there is one of the parser's."""
    parser, shown = _options(), _synopsis()
    assert set(parser) == set(shown), "commands: parser vs docs/cli.md's synopsis"
    for command, options in parser.items():
        assert options - shown[command] == set(), f"gradcheck {command}: not in docs/cli.md"
        assert shown[command] - options == set(), f"gradcheck {command}: no such option"


def test_the_result_fields_are_documented():
    """Every field of the result types is named in docs/reports.md's result section."""
    import dataclasses

    from gradcheck.base import result

    text = _page("reports.md")
    section = text[text.index("## The result objects"):]
    for kind in (result.RunResult, result.CaseResult, result.WitnessResult,
                 result.Worst, result.ErrorMap):
        assert f"`{kind.__name__}`" in section
        missing = [f.name for f in dataclasses.fields(kind) if f"`{f.name}`" not in section]
        assert not missing, f"{kind.__name__} fields not in docs/reports.md: {missing}"


def test_the_json_schema_names_every_key():
    """docs/reports.md's JSON schema names every key a case's and a witness's dict holds,
    the optional ones included."""
    from gradcheck.base.result import CaseResult, RunResult, Worst, WitnessResult

    worst = Worst("x.grad", (0,), 1.0, 1.0, 0.1, 0)
    case = CaseResult("c", "f.toml", 1, "float64", "passed",
                      witnesses=(WitnessResult("torch", "passed", worst=worst),),
                      gradients=(("x.grad", "1"),), output="x", unchecked=(("op.jvp", "y"),))
    text = _page("reports.md")
    schema = text[text.index('{"version", "summary"'):]
    schema = schema[:schema.index("```")]
    data = RunResult(cases=(case,)).to_dict()
    keys = set(data) | set(data["summary"]) | set(data["cases"][0])
    keys |= set(data["cases"][0]["witnesses"]["torch"])
    missing = sorted(k for k in keys if f'"{k}"' not in schema)
    assert not missing, f"keys the JSON schema in docs/reports.md leaves out: {missing}"


def test_expensive_commands_must_be_narrowed(monkeypatch):
    """A block that would run every bundled case, or the bench, is refused unless a
    marker narrows it; the marker's form is what runs, the page's is parsed."""
    monkeypatch.chdir(ROOT)
    assert _too_slow(_parsed(["run", "cases/"], "t"))
    assert _too_slow(_parsed(["bench", "--quick"], "t"))
    assert not _too_slow(_parsed(["run", "cases/ops/ops.toml", "-k", "swish"], "t"))
    block = Block("p.md", 1, "sh", "pip install x && gradcheck run cases/  # all\n",
                  ["replace cases/ => cases/a.toml"])
    assert commands(block) == [("pip install x", "pip install x", None),
                               ("gradcheck run cases/", "gradcheck run cases/a.toml", None)]
    shown = Block("p.md", 1, "console", "$ gradcheck list a.toml\nx\n...\n$ gradcheck list b\n")
    assert commands(shown) == [("gradcheck list a.toml",) * 2 + ("x\n...",),
                               ("gradcheck list b", "gradcheck list b", None)]
