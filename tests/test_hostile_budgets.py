"""Budgets against hostile input (issue 14, item 4): every file of tests/hostile/budgets/
(and the big ones its generate.py writes) is refused with a clear error, in bounded
work and memory; reading and running never let a RecursionError or MemoryError out as
an internal error; and a fuzz test over the loader finds nothing but cases and
CaseFileErrors. tests/fuzz_loader.py fuzzes the loader for longer, outside CI."""

from __future__ import annotations

import atexit
import importlib.util
import os
import shutil
import string
import tempfile
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import bounded_work
from gradcheck.cases import memory
from gradcheck.process import budgets
from gradcheck.cases import Case, read_file, read_paths
from gradcheck.checking.case import run_case
from gradcheck.base.errors import CaseFileError

HERE = Path(__file__).parent
CORPUS = HERE / "hostile" / "budgets"
ROOT = HERE.parent
#: what reading or refusing one hostile input may take (the largest, a YAML file cut
#: off at its 100,001st value, makes about 6e5 Python calls and 3 MB)
MEGABYTES = 64


def _generator():
    spec = importlib.util.spec_from_file_location("budgets_generate", CORPUS / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GENERATE = _generator()
COMMITTED = sorted(p for p in CORPUS.iterdir() if p.suffix in (".toml", ".yaml"))


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    return {p.name: p for p in GENERATE.generate(tmp_path_factory.mktemp("hostile"))}


def _bounded_read(path: Path):
    """read_file(path) within the work and memory bounds."""
    tracemalloc.start()
    try:
        with bounded_work():
            cases, errors = read_file(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < MEGABYTES * 2**20, f"{peak / 2**20:.0f} MB traced reading {path.name}"
    return cases, errors


def _check_refused(path: Path) -> None:
    kind, text = GENERATE.expectation(path)
    assert kind == "expect" and text
    cases, errors = _bounded_read(path)
    assert cases == [] and len(errors) == 1, [str(e) for e in errors]
    assert isinstance(errors[0], CaseFileError)
    assert text in str(errors[0]) and str(errors[0]).startswith(str(path))


@pytest.mark.parametrize("path", [p for p in COMMITTED
                                  if GENERATE.expectation(p)[0] == "expect"],
                         ids=lambda p: p.name)
def test_a_committed_hostile_file_is_refused_while_reading(path):
    _check_refused(path)


GENERATED = ["long-key.toml", "big.yaml", "long-expr.toml", "long-string.yaml",
             "many-nodes.yaml", "many-cases.toml", "big-value.toml", "symlink-out.toml"]


@pytest.mark.parametrize("name", GENERATED)
def test_a_generated_hostile_file_is_refused_while_reading(generated, name):
    _check_refused(generated[name])


def test_every_generated_file_is_tested(generated):
    assert sorted(GENERATED) == sorted(generated)


def test_a_link_out_of_the_project_is_not_read_nor_quoted(generated):
    _, errors = read_file(generated["symlink-out.toml"])
    assert GENERATE.SECRET not in str(errors[0])
    assert "outside the project" in str(errors[0]) and errors[0].line is None


def test_links_inside_the_project_are_read(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "real").mkdir()
    real = tmp_path / "real" / "c.toml"
    real.write_text('[[case]]\nname = "a"\nexpr = "sum(x)"\ninputs.x = { shape = [2] }\n')
    (tmp_path / "link.toml").symlink_to(real)
    (tmp_path / "folder").symlink_to(tmp_path / "real")
    cases, errors = read_paths([tmp_path / "link.toml", tmp_path / "folder"])
    assert errors == [] and [c.name for c in cases] == ["a", "a"]


def test_a_folder_linked_out_of_the_project_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "c.toml").write_text('[[case]]\nname = "a"\nexpr = "x"\ninputs.x = [2]\n')
    project = tmp_path / "project"
    (project / "cases").mkdir(parents=True)
    (project / ".git").mkdir()
    (project / "cases" / "linked").symlink_to(outside)
    cases, errors = read_paths([project / "cases" / "linked" / "c.toml"])
    assert cases == [] and "refused: a symbolic link" in str(errors[0])


@pytest.mark.parametrize("path", [p for p in COMMITTED
                                  if GENERATE.expectation(p)[0] == "expect-run"],
                         ids=lambda p: p.name)
def test_a_case_over_the_memory_budget_is_refused_before_sampling(path):
    _, text = GENERATE.expectation(path)
    cases, errors = read_file(path)
    assert errors == [] and cases
    for case in cases:
        run_case(case, "float64", timeout=None)   # the imports, outside the count
        with bounded_work(10_000):
            result = run_case(case, "float64", timeout=None)
        assert result.status == "error" and result.error_kind == "case"
        assert text in result.message and "--max-memory" in result.message


def test_the_memory_budget_follows_max_memory(tmp_path):
    path = CORPUS / "memory-inputs.toml"
    (inputs,), _ = read_file(path)
    need, elements, count = memory.estimate(inputs)
    assert (elements, count) == (200_000_001, 1)
    largest, total = memory.intermediates(inputs)   # 20 sums and 19 additions
    assert (largest, total) == (1, 39)
    assert need == (elements * (budgets.WORK_BYTES + budgets.POINT_BYTES * count)
                    + largest * budgets.LARGEST_BYTES + total * budgets.KEPT_BYTES)
    with budgets.memory_budget("27G"):
        memory.check_case(inputs)   # 26.8 GiB: within
        assert os.environ[budgets.ENV] == str(27 * 2**30)
    assert budgets.ENV not in os.environ
    with budgets.memory_budget("1G"), pytest.raises(budgets.BudgetError,
                                                    match=r"26\.8 GiB .* 1\.0 GiB"):
        memory.check_case(inputs)


def test_more_points_hold_no_more_memory():
    """1000 points of a million-element input were refused (15 GiB, and they ran to a
    MemoryError at 7.6 GB when every point's sample was drawn before the first was
    checked); a large formula's points are now drawn one at a time, and a failing check
    keeps the samples of only a few: the estimate stops growing with the points."""
    from conftest import make_case
    from gradcheck.checking.diagnose import KEPT_POINTS

    few, many = (make_case("sum(x * x)", {"x": [1_000_000]}, points=n) for n in (3, 1000))
    assert memory.estimate(many) == memory.estimate(few)
    assert memory.estimate(many)[2] == KEPT_POINTS + 1
    memory.check_case(many)   # within the default 2 GiB


def test_sizes():
    assert budgets.parse_size("4G") == 4 * 2**30
    assert budgets.parse_size("512MiB") == 512 * 2**20
    assert budgets.parse_size("1.5g") == 3 * 2**29
    assert budgets.parse_size("2000000") == 2_000_000
    for bad in ("", "4x", "-1G", "0", "G"):
        with pytest.raises(ValueError):
            budgets.parse_size(bad)


def test_max_memory_is_checked_by_the_command_line(capsys):
    from gradcheck.cli.main import main

    with pytest.raises(SystemExit) as stop:
        main(["run", "--max-memory", "4x", str(CORPUS / "memory-inputs.toml")])
    assert stop.value.code == 2
    assert ("--max-memory: max-memory must be a size from 1M to 1P (e.g. 4G, 512M, or a "
            "number of bytes), got '4x'") in capsys.readouterr().err


def test_a_worker_past_max_memory_is_that_cases_error():
    """A real worker process under --max-memory 256M: the op's 1 GiB fails there with
    a MemoryError, which is the case's own clear error."""
    from gradcheck.session.runner import run

    with budgets.memory_budget("256M"):
        result = run([CORPUS / "memory-hog.toml"], isolate=True, timeout=120)
    (hog,) = result.cases
    assert hog.status == "error" and hog.error_kind == "case", hog.message
    assert GENERATE.expectation(CORPUS / "memory-hog.toml")[1] in hog.message
    assert "256.0 MiB" in hog.message


# --------------------------------------------------------------------------- nothing escapes

def test_a_deep_dotted_key_is_a_file_error_in_list(capsys):
    """The issue's 2.5 KB file: `gradcheck list` (and run, which reads the same way)
    reports it as the file's error, exit 2, where it was a RecursionError (exit 3)."""
    from gradcheck.cli.main import main

    assert main(["list", str(CORPUS / "deep-dotted-key.toml")]) == 2
    err = capsys.readouterr().err
    assert "a dotted key of more than 16 parts" in err and "Traceback" not in err


@pytest.mark.parametrize("exc", [RecursionError("maximum recursion depth exceeded"),
                                 MemoryError()])
def test_exhaustion_while_reading_a_case_is_its_error(tmp_path, monkeypatch, exc):
    from gradcheck.cases import reader

    path = tmp_path / "c.toml"
    path.write_text('[[case]]\nname = "a"\nexpr = "x"\ninputs.x = [2]\n')

    def exhausted(self):
        raise exc

    monkeypatch.setattr(reader.CaseReader, "read", exhausted)
    cases, errors = read_file(path)
    assert cases == [] and "too large or nests too deeply" in str(errors[0])
    assert type(exc).__name__ in str(errors[0])


@pytest.mark.parametrize("exc, text", [
    (RecursionError("maximum recursion depth exceeded"), "nests too deeply"),
    (MemoryError(), "ran out of memory"),
    (RuntimeError("DefaultCPUAllocator: not enough memory: you tried to allocate 8 GB"),
     "ran out of memory")])
def test_exhaustion_while_running_a_case_is_its_error(monkeypatch, exc, text):
    from conftest import make_case
    from gradcheck.checking import case as checking

    case = make_case("sum(x * x)", {"x": [3]})

    def exhausted(*args, **kwargs):
        raise exc

    monkeypatch.setattr(checking, "case_points", exhausted)
    result = run_case(case, "float64", timeout=None)
    assert result.status == "error" and result.error_kind == "case"
    assert text in result.message


# --------------------------------------------------------------------------- real files load

def test_every_bundled_case_file_is_within_the_limits():
    files = [p for folder in ("cases", "tests/fixtures", "examples")
             for p in (ROOT / folder).rglob("*") if p.suffix in (".toml", ".yaml", ".yml")]
    assert files
    cases, errors = read_paths(files)
    assert errors == [] and len(cases) > 100


def test_files_at_the_limits_are_read(tmp_path):
    """Just within each limit: a file of exactly the size, a key of the parts and a
    string of the length allowed."""
    parts = ".".join(["p"] * (budgets.MAX_KEY_PARTS - 1))
    inner = "[" * 8 + "1.5" + "]" * 8
    text = ('[[case]]\nname = "a"\nexpr = "sum(x)"\ninputs.x = { shape = [1, 1, 1, 1, '
            f'1, 1, 1, 1], value = {inner} }}\n'
            f'description = "{"d" * (budgets.MAX_STRING_CHARS - 2)}"\n'
            f'[[case]]\nname = "b"\nexpr = "sum(x)"\ninputs.x = [2]\nargs.{parts} = 1\n')
    text += "#" * (budgets.MAX_FILE_BYTES - len(text.encode()) - 1) + "\n"
    path = tmp_path / "c.toml"
    path.write_text(text)
    assert path.stat().st_size == budgets.MAX_FILE_BYTES
    cases, errors = read_file(path)
    assert [c.name for c in cases] == ["a"]
    assert len(errors) == 1 and "only apply to a case with op" in str(errors[0])


@pytest.mark.parametrize("text", ["0", "a", "[1, 2]", "- [x]"])
def test_a_yaml_file_that_is_no_table(tmp_path, text):
    """Found by tests/fuzz_loader.py: a YAML file of a bare number went through the
    depth check as if it were a table."""
    path = tmp_path / "c.yaml"
    path.write_text(text)
    cases, errors = read_file(path)
    assert cases == [] and "must be a table" in str(errors[0])


# --------------------------------------------------------------------------- fuzzing

SOURCES = {p.name: (p.suffix, p.read_text()) for p in
           [ROOT / "cases" / "misc.yaml", ROOT / "cases" / "layers.toml",
            ROOT / "tests" / "fixtures" / "custom_ops.toml", *COMMITTED]}
ALPHABET = "[]{}\"'.=:-#,&*!|>? \t\n\\" + string.ascii_letters[:6] + "019"


@st.composite
def mutated_case_files(draw) -> tuple[str, str]:
    """(suffix, text): a real or hostile case file with a few random edits (inserted,
    deleted or replaced characters of TOML's and YAML's syntax, a slice repeated up to
    hundreds of times: deep nesting, long keys), or random text."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.sampled_from([".toml", ".yaml"])), draw(
            st.text(alphabet=ALPHABET, max_size=300))
    suffix, text = SOURCES[draw(st.sampled_from(sorted(SOURCES)))]
    for _ in range(draw(st.integers(1, 6))):
        i = draw(st.integers(0, len(text)))
        chunk = draw(st.text(alphabet=ALPHABET, min_size=1, max_size=6))
        how = draw(st.sampled_from(["insert", "delete", "replace", "repeat"]))
        if how == "insert":
            text = text[:i] + chunk + text[i:]
        elif how == "delete":
            text = text[:i] + text[i + draw(st.integers(1, 40)):]
        elif how == "replace":
            text = text[:i] + chunk + text[i + len(chunk):]
        else:
            text = text[:i] + text[i:i + len(chunk)] * draw(st.integers(2, 400)) + text[i:]
    return suffix, text


def load_anything(folder: str, suffix: str, text: str) -> None:
    """Read ``text`` as a case file: cases and CaseFileErrors only, nothing raised."""
    path = Path(folder) / f"fuzzed{suffix}"
    path.write_text(text, encoding="utf-8")
    cases, errors = read_file(path)
    assert all(isinstance(c, Case) for c in cases)
    assert all(isinstance(e, CaseFileError) for e in errors)
    for e in errors:
        str(e)   # renders


_FOLDER = tempfile.mkdtemp(prefix="gradcheck-fuzz-")
atexit.register(shutil.rmtree, _FOLDER, ignore_errors=True)


@settings(max_examples=150)
@given(mutated_case_files())
def test_the_loader_gives_cases_or_case_file_errors(drawn):
    load_anything(_FOLDER, *drawn)
