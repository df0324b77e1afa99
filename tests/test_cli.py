"""The command line end to end (DESIGN.md section 4): ``gradcheck run`` and ``list`` through
``gradcheck.cli.main.main`` and once through a real subprocess; exit codes, filters and
overrides, the text and JSON reports, ``--output``, escaping, and repeatability."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gradcheck.cli.exit_codes import ExitCode
from gradcheck.cli.main import main

PASSING_A = """
[defaults]
points = 2

[[case]]
name = "square"
expr = "sum(x**2)"
inputs.x = { shape = [3] }

[[case]]
name = "softplus"
expr = "sum(softplus(x))"
inputs.x = { shape = [4] }
"""

PASSING_B = """
[[case]]
name = "layer"
inputs.x = { shape = [2, 3] }
inputs.W = { shape = [3, 2] }
expr = "sum(tanh(x @ W))"
dtype = ["float64", "float32"]
points = 2

[[case]]
name = "retained-tanh"
inputs.x = { shape = [3] }
let.h = "tanh(x)"
expr = "sum(h * h)"
retain_grad = ["h"]
points = 2
"""

# The runs the folder above holds: (name, dtype), in report order.
PASSING_RUNS = [("square", "float64"), ("softplus", "float64"), ("layer", "float64"),
                ("layer", "float32"), ("retained-tanh", "float64")]

EXPECT_FAIL = """
[[case]]
name = "correct-but-expected-to-fail"
expr = "sum(sin(x))"
inputs.x = { shape = [3] }
expect = "fail"
points = 1
"""

# Line 8 holds the bad expression (line numbers matter for the error).
ONE_BAD = """\
[[case]]
name = "good-one"
expr = "sum(exp(x))"
inputs.x = { shape = [2] }

[[case]]
name = "broken"
expr = "sum(x ** )"
inputs.x = { shape = [2] }

[[case]]
name = "good-two"
expr = "sum(cos(x))"
inputs.x = { shape = [2] }
"""

EVIL_NAME = """
[[case]]
name = "evil\\u001b[31mred\\u0007bell"
expr = "sum(x * 3)"
inputs.x = { shape = [2] }
points = 1
"""

ESC = "\x1b"
SCHEMA_CASE = {"name", "file", "dtype", "status", "outcome", "witnesses", "message"}
SCHEMA_WITNESS = {"status", "max_abs_err", "max_rel_err", "worst_index", "grad_fn"}
SCHEMA_SUMMARY = {"passed", "approximate", "failed", "errored", "skipped", "xfailed",
                  "xpassed", "seconds"}


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


@pytest.fixture
def passing(tmp_path: Path) -> Path:
    folder = tmp_path / "passing"
    write(folder, "a.toml", PASSING_A)
    write(folder, "b.toml", PASSING_B)
    return folder


def gc(capsys, *argv) -> tuple[int, str, str]:
    """Run ``gradcheck ARGV`` in-process: (exit code, stdout, stderr)."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def gc_json(capsys, *argv) -> tuple[int, dict]:
    code, out, _ = gc(capsys, "run", *argv, "--format", "json")
    return code, json.loads(out)


def case_lines(out: str) -> list[str]:
    """The one-line-per-case lines of a text report."""
    return [line for line in out.splitlines()
            if line.split(" ", 1)[0] in ("PASS", "FAIL", "ERROR", "SKIP", "APPROX", "XFAIL",
                                         "XPASS")]


def without_timing(x):
    """A JSON report with its timing fields removed."""
    if isinstance(x, dict):
        return {k: without_timing(v) for k, v in x.items() if k != "seconds"}
    if isinstance(x, list):
        return [without_timing(v) for v in x]
    return x


# --------------------------------------------------------------------------- run, text

def test_run_prints_one_line_per_case_and_the_summary(capsys, passing):
    code, out, err = gc(capsys, "run", passing)
    assert code == ExitCode.OK == 0
    lines = case_lines(out)
    assert len(lines) == len(PASSING_RUNS)
    for line, (name, dtype) in zip(lines, PASSING_RUNS):
        assert line.startswith("PASS")
        assert line.split()[1:3] == [name, dtype]
    assert out.rstrip("\n").splitlines()[-1].startswith(
        f"{len(PASSING_RUNS)} passed, 0 failed, 0 errored, 0 skipped")
    assert ESC not in out and ESC not in err  # not a TTY: no colours, no progress line


def test_subprocess_run_matches_in_process_run(capsys, passing):
    """``python -m gradcheck`` in a fresh process: same exit code, same text lines, and
    the same JSON apart from timings (points depend on the seed, not on the process)."""
    env = dict(os.environ, PYTHONHASHSEED="123")
    proc = subprocess.run([sys.executable, "-m", "gradcheck", "run", str(passing)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert ESC not in proc.stdout
    lines = case_lines(proc.stdout)
    assert [line.split()[:3] for line in lines] == [["PASS", n, d] for n, d in PASSING_RUNS]
    assert "5 passed, 0 failed, 0 errored, 0 skipped" in proc.stdout

    proc = subprocess.run([sys.executable, "-m", "gradcheck", "run", str(passing),
                           "--format", "json"], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    _, here = gc_json(capsys, passing)
    assert without_timing(json.loads(proc.stdout)) == without_timing(here)


def test_expect_fail_on_a_correct_case_fails_with_exit_1(capsys, tmp_path):
    path = write(tmp_path, "f.toml", EXPECT_FAIL)
    code, out, _ = gc(capsys, "run", path)
    assert code == ExitCode.MISMATCH == 1
    [line] = case_lines(out)
    assert line.startswith("XPASS")   # pytest's word: expected to fail, but passed
    assert "correct-but-expected-to-fa" in line
    assert "expected a mismatch" in out
    assert "0 passed, 0 failed, 0 errored, 0 skipped, 1 xpassed" in out

    code, report = gc_json(capsys, path)
    assert code == 1
    [case] = report["cases"]
    assert case["status"] == "failed" and case["outcome"] == "xpass"
    assert report["summary"]["xpassed"] == 1 and report["summary"]["failed"] == 0
    assert "expected a mismatch" in case["message"]
    # every witness agreed: the case failed only because it was expected to
    assert all(w["status"] == "passed" for w in case["witnesses"].values())


def test_exit_zero_turns_a_mismatch_into_0(capsys, tmp_path):
    path = write(tmp_path, "f.toml", EXPECT_FAIL)
    code, out, _ = gc(capsys, "run", path, "--exit-zero")
    assert code == 0
    assert case_lines(out)[0].startswith("XPASS")  # the report still says so


def test_exit_zero_does_not_hide_a_case_file_error(capsys, tmp_path):
    path = write(tmp_path, "bad.toml", ONE_BAD)
    code, _, _ = gc(capsys, "run", path, "--exit-zero")
    assert code == ExitCode.USAGE


def test_a_bad_case_is_an_error_and_the_others_still_run(capsys, tmp_path):
    path = write(tmp_path, "bad.toml", ONE_BAD)
    code, out, _ = gc(capsys, "run", path)
    assert code == ExitCode.USAGE == 2
    lines = case_lines(out)
    assert len(lines) == 3
    status = {line.split()[1]: line.split()[0] for line in lines}
    assert status == {"good-one": "PASS", "broken": "ERROR", "good-two": "PASS"}
    assert f"{path}:8" in out  # the error names file and line of the bad expr
    assert "2 passed, 0 failed, 1 errored" in out

    code, report = gc_json(capsys, path)
    assert code == 2
    broken = next(c for c in report["cases"] if c["name"] == "broken")
    assert broken["status"] == "error"
    assert broken["file"] == str(path)
    assert f"{path}:8" in broken["message"]
    assert {c["name"] for c in report["cases"] if c["status"] == "passed"} == {
        "good-one", "good-two"}


def test_a_missing_path_exits_2(capsys, tmp_path):
    code, out, err = gc(capsys, "run", tmp_path / "no-such-folder")
    assert code == ExitCode.USAGE
    assert "no-such-folder" in err and "no such file" in err
    assert out == ""


@pytest.mark.parametrize("points", ["0", "-3", "1001"])
def test_bad_points_exits_2(capsys, passing, points):
    code, out, err = gc(capsys, "run", passing, "--points", points)
    assert code == ExitCode.USAGE
    assert "--points" in err
    assert out == ""


def test_non_numeric_points_is_a_usage_error(capsys, passing):
    with pytest.raises(SystemExit) as exc:
        main(["run", str(passing), "--points", "many"])
    assert exc.value.code == 2
    assert "--points" in capsys.readouterr().err


# --------------------------------------------------------------------------- filters

def test_k_filters_by_substring(capsys, passing):
    code, out, _ = gc(capsys, "run", passing, "-k", "soft")
    assert code == 0
    lines = case_lines(out)
    assert [line.split()[1] for line in lines] == ["softplus"]
    assert "1 passed" in out

    code, report = gc_json(capsys, passing, "-k", "a")  # square, layer x2, retained-tanh
    assert sorted(c["name"] for c in report["cases"]) == [
        "layer", "layer", "retained-tanh", "square"]


def test_k_that_matches_nothing_runs_nothing(capsys, passing):
    code, out, err = gc(capsys, "run", passing, "-k", "zzz-nothing", "--format", "json")
    report = json.loads(out)
    assert code == ExitCode.NO_CASES == 5   # as pytest's "no tests collected"
    assert "no cases selected" in err and "'zzz-nothing'" in err
    assert report["cases"] == []
    assert report["summary"]["passed"] == 0


def test_dtype_runs_only_that_dtype(capsys, passing):
    code, report = gc_json(capsys, passing, "--dtype", "float32")
    assert code == 0
    assert [c["dtype"] for c in report["cases"]] == ["float32"] * 4
    assert sorted(c["name"] for c in report["cases"]) == [
        "layer", "retained-tanh", "softplus", "square"]
    assert all(c["status"] == "passed" for c in report["cases"])


def test_seed_and_points_override(capsys, passing):
    _, base = gc_json(capsys, passing, "-k", "square")
    _, two = gc_json(capsys, passing, "-k", "square", "--seed", "7", "--points", "2")
    _, four = gc_json(capsys, passing, "-k", "square", "--seed", "7", "--points", "4")
    _, other = gc_json(capsys, passing, "-k", "square", "--seed", "8", "--points", "2")
    [b], [c2], [c4], [o] = (r["cases"] for r in (base, two, four, other))
    assert (b["seed"], b["points"]) == (0, 2)     # from the file's [defaults]
    assert (c2["seed"], c2["points"]) == (7, 2)
    assert (c4["seed"], c4["points"]) == (7, 4)
    # sum(x**2), x of 3 elements: 1 value + 3 gradient elements per point, at the bulk
    # points and the 2 extreme points
    assert c2["witnesses"]["torch"]["checked"] == (2 + 2) * 4
    assert c4["witnesses"]["torch"]["checked"] == (4 + 2) * 4
    # a different seed draws different points (the numeric witness's worst element moves)
    assert c2["witnesses"]["numeric"]["worst"] != o["witnesses"]["numeric"]["worst"]
    assert c2["witnesses"]["numeric"]["worst"] != b["witnesses"]["numeric"]["worst"]


def test_witness_runs_only_that_witness(capsys, passing):
    code, report = gc_json(capsys, passing, "--witness", "numeric")
    assert code == 0
    assert len(report["cases"]) == len(PASSING_RUNS)
    for case in report["cases"]:
        assert set(case["witnesses"]) == {"numeric"}
    code, out, _ = gc(capsys, "run", passing, "--witness", "numeric")
    assert all("torch" not in line for line in case_lines(out))


def test_unknown_witness_is_a_usage_error(capsys, passing):
    with pytest.raises(SystemExit) as exc:
        main(["run", str(passing), "--witness", "jax"])
    assert exc.value.code == 2


def test_witness_choices_are_the_registry(capsys, monkeypatch):
    from gradcheck.witnesses import registry as witnesses

    with pytest.raises(SystemExit):
        main(["run", "--help"])
    assert "--witness {engine,torch,numeric}" in capsys.readouterr().out
    entry = witnesses.Witness("jax", witnesses.witness("torch"), None,
                              witnesses.formula_tolerance, "jax, as torch")
    monkeypatch.setitem(witnesses.REGISTRY, "jax", entry)
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    assert "--witness {engine,torch,numeric,jax}" in capsys.readouterr().out


# --------------------------------------------------------------------------- JSON

def test_json_report_has_the_documented_schema(capsys, passing, tmp_path):
    write(passing, "c.toml", EXPECT_FAIL)
    write(passing, "d.toml", ONE_BAD)
    code, report = gc_json(capsys, passing)
    assert code == 2
    assert {"version", "summary", "cases"} <= set(report)
    assert isinstance(report["version"], str) and report["version"]
    summary = report["summary"]
    assert SCHEMA_SUMMARY <= set(summary)
    # counted by outcome: the expect = "fail" case that agreed is xpassed, not failed
    assert summary == {**summary, "passed": 7, "failed": 0, "errored": 1, "skipped": 0,
                       "xfailed": 0, "xpassed": 1}
    assert isinstance(summary["seconds"], (int, float)) and summary["seconds"] >= 0
    assert len(report["cases"]) == 9
    for case in report["cases"]:
        assert SCHEMA_CASE <= set(case), case.keys()
        assert case["status"] in ("passed", "failed", "error", "skipped")
        assert case["outcome"] == ("xpass" if case["expect"] == "fail" else case["status"])
        assert isinstance(case["name"], str) and isinstance(case["message"], str)
        assert isinstance(case["witnesses"], dict)
        for name, w in case["witnesses"].items():
            assert name in ("engine", "torch", "numeric")
            assert SCHEMA_WITNESS <= set(w), w.keys()
            assert w["status"] in ("passed", "failed", "error")
            assert isinstance(w["max_abs_err"], float) and w["max_abs_err"] >= 0
            assert isinstance(w["max_rel_err"], float) and w["max_rel_err"] >= 0
            assert w["worst_index"] is None or isinstance(w["worst_index"], str)
            if name in ("torch", "engine"):
                assert w["grad_fn"] and all(isinstance(g, str) for g in w["grad_fn"])
                assert w["grad_fn"][-1] == "AccumulateGrad"
            else:
                assert w["grad_fn"] is None
        if "engine" in case["witnesses"] and case["status"] == "passed":
            assert case["witnesses"]["engine"]["grad_fn"] == \
                case["witnesses"]["torch"]["grad_fn"]
    layer = next(c for c in report["cases"] if c["name"] == "layer")
    assert layer["file"] == str(passing / "b.toml")
    assert "MmBackward0" in layer["witnesses"]["torch"]["grad_fn"]
    assert layer["witnesses"]["torch"]["worst_index"].split("[")[0] in (
        "value", "x.grad", "W.grad")


def test_same_run_twice_gives_the_same_json(capsys, passing):
    _, first = gc_json(capsys, passing)
    _, second = gc_json(capsys, passing)
    assert without_timing(first) == without_timing(second)
    assert first["cases"] and without_timing(first) != without_timing(
        gc_json(capsys, passing, "--seed", "99")[1])


def test_filtering_does_not_change_a_cases_results(capsys, passing):
    """A case's points depend only on its own seed, name, dtype and index."""
    _, everything = gc_json(capsys, passing)
    for keyword in ("layer", "retained", "softplus"):
        _, some = gc_json(capsys, passing, "-k", keyword)
        selected = [c for c in everything["cases"] if keyword in c["name"]]
        assert selected
        assert without_timing(some["cases"]) == without_timing(selected)


# --------------------------------------------------------------------------- --output

@pytest.mark.parametrize("fmt", ["json", "text"])
def test_output_writes_the_report_atomically(capsys, passing, tmp_path, fmt, monkeypatch):
    monkeypatch.chdir(tmp_path)   # a run writes only inside its project
    folder = tmp_path / "reports" / "nested"
    target = folder / f"report.{fmt}"
    code, out, _ = gc(capsys, "run", passing, "--format", fmt, "--output", target)
    assert code == 0
    assert sorted(p.name for p in folder.iterdir()) == [target.name]  # no temp files
    text = target.read_text(encoding="utf-8")
    assert text.endswith("\n")
    if fmt == "json":
        assert len(json.loads(text)["cases"]) == len(PASSING_RUNS)
    else:
        assert len(case_lines(text)) == len(PASSING_RUNS)
        assert ESC not in text
    # the text report still goes to the log, then where the file report went
    assert len(case_lines(out)) == len(PASSING_RUNS)
    assert "5 passed, 0 failed, 0 errored, 0 skipped" in out
    assert out.splitlines()[-1] == f"report written to {target} ({fmt})"


def test_output_replaces_an_existing_report(capsys, passing, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)   # a run writes only inside its project
    target = tmp_path / "out" / "r.json"
    target.parent.mkdir()
    target.write_text("old", encoding="utf-8")
    code, _, _ = gc(capsys, "run", passing, "-k", "square", "--format", "json",
                    "--output", target)
    assert code == 0
    assert [c["name"] for c in json.loads(target.read_text())["cases"]] == ["square"]
    assert [p.name for p in target.parent.iterdir()] == ["r.json"]


def test_output_with_failures_keeps_exit_code(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)   # a run writes only inside its project
    path = write(tmp_path, "f.toml", EXPECT_FAIL)
    target = tmp_path / "r.json"
    code, out, _ = gc(capsys, "run", path, "--format", "json", "--output", target)
    assert code == 1
    assert json.loads(target.read_text())["summary"]["xpassed"] == 1
    assert "0 passed, 0 failed, 0 errored, 0 skipped, 1 xpassed" in out
    assert out.startswith("XPASS ")


# --------------------------------------------------------------------------- escaping

def test_text_report_escapes_control_characters_in_names(capsys, tmp_path):
    path = write(tmp_path, "evil.toml", EVIL_NAME)
    code, out, err = gc(capsys, "run", path)
    assert code == 0
    assert ESC not in out and "\x07" not in out
    [line] = case_lines(out)
    assert "evil" in line and "red" in line and "bell" in line

    # JSON keeps the name exactly (json escapes it as \u001b)
    code, out, _ = gc(capsys, "run", path, "--format", "json")
    assert ESC not in out
    assert json.loads(out)["cases"][0]["name"] == "evil\x1b[31mred\x07bell"


def test_escaping_holds_in_colour_on_a_terminal(capsys, tmp_path, monkeypatch):
    """On a TTY the report is coloured and a progress line goes to stderr: the colours
    are gradcheck's own, and the case name still never reaches the terminal raw."""
    path = write(tmp_path, "evil.toml", EVIL_NAME)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    code, out, err = gc(capsys, "run", path)
    assert code == 0
    assert "\x1b[32m" in out  # PASS in green: colour is on
    assert "\x1b[31mred" not in out and "\x07" not in out
    assert "\x1b[31mred" not in err and "\x07" not in err


def test_no_color_turns_colour_off_on_a_terminal(capsys, passing, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    code, out, _ = gc(capsys, "run", passing, "-k", "square")
    assert code == 0
    assert ESC not in out


def test_an_empty_no_color_leaves_colour_on(capsys, passing, monkeypatch):
    """NO_COLOR counts only when it is set to something (the no-color.org convention)."""
    monkeypatch.setenv("NO_COLOR", "")
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    code, out, _ = gc(capsys, "run", passing, "-k", "square")
    assert code == 0
    assert "\x1b[32m" in out


def test_error_messages_escape_control_characters(capsys, tmp_path):
    path = write(tmp_path, "evil.toml", """
        [[case]]
        name = "evil\\u001b[2J"
        expr = "sum(x ** )"
        inputs.x = { shape = [2] }
        """)
    code, out, _ = gc(capsys, "run", path)
    assert code == 2
    assert ESC not in out
    assert len(case_lines(out)) == 1 and case_lines(out)[0].startswith("ERROR")


# --------------------------------------------------------------------------- list, help

def test_list_prints_the_cases_without_running_them(capsys, passing):
    code, out, err = gc(capsys, "list", passing)
    assert code == 0
    lines = out.splitlines()
    for name in ("square", "softplus", "layer", "retained-tanh"):
        assert sum(f": {name} " in line for line in lines) == 1, name
    layer = next(line for line in lines if ": layer " in line)
    assert "float64" in layer and "float32" in layer and "x[2, 3]" in layer
    assert f"{passing / 'b.toml'}:1" in layer
    assert lines[-1] == "4 cases"
    assert "PASS" not in out  # listed, not run


def test_list_gives_a_complex_input_its_declared_shape(capsys, tmp_path):
    path = write(tmp_path, "c.toml", """
        [[case]]
        name = "c"
        expr = "sum(abs(z * x)**2)"
        inputs.z = { shape = [3, 4], dtype = "complex" }
        inputs.x = { shape = [4] }
        """)
    code, out, _ = gc(capsys, "list", path)
    assert code == 0 and "(z[3, 4] complex, x[4])" in out   # (held as z[3, 4, 2])


def test_list_with_invalid_cases_exits_2(capsys, tmp_path):
    path = write(tmp_path, "bad.toml", ONE_BAD)
    code, out, err = gc(capsys, "list", path)
    assert code == ExitCode.USAGE
    assert out.splitlines()[-1] == "2 cases, 1 invalid"
    assert f"{path}:8" in err and "broken" in err


def test_list_escapes_control_characters(capsys, tmp_path):
    write(tmp_path, "evil.toml", EVIL_NAME)
    write(tmp_path, "bad.toml", """
        [[case]]
        name = "evil\\u001b[2J"
        description = "also \\u001b[31m here"
        expr = "sum(x ** )"
        inputs.x = { shape = [2] }
        """)
    code, out, err = gc(capsys, "list", tmp_path)
    assert code == 2
    assert ESC not in out and "\x07" not in out and ESC not in err
    assert "evil" in out and "1 cases, 1 invalid" in out


def test_list_of_a_missing_path_exits_2(capsys, tmp_path):
    code, _, err = gc(capsys, "list", tmp_path / "nope.toml")
    assert code == 2
    assert "no such file" in err


def test_help(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "run" in out and "list" in out
    with pytest.raises(SystemExit) as exc:
        main(["run", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for option in ("-k", "--dtype", "--seed", "--points", "--witness", "--format",
                   "--output", "--exit-zero"):
        assert option in out


def test_no_command_prints_help_and_exits_2(capsys):
    code, out, _ = gc(capsys)
    assert code == ExitCode.USAGE
    assert "usage:" in out


def test_help_does_not_import_torch_or_sympy():
    script = textwrap.dedent("""
        import sys
        from gradcheck.cli.main import main
        for argv in (["--help"], ["run", "--help"], ["list", "--help"]):
            try:
                main(argv)
            except SystemExit as exc:
                assert exc.code == 0, exc.code
        heavy = sorted({m.split(".")[0] for m in sys.modules} & {"torch", "sympy"})
        print("HEAVY", heavy, file=sys.stderr)
        """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "HEAVY []" in proc.stderr

    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "gradcheck", "--help"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0
    assert "usage: gradcheck" in proc.stdout
    imported = {line.split("|")[-1].strip().split(".")[0]
                for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "gradcheck" in imported  # the import log is really there
    # nor NumPy: the command sets one BLAS/OpenMP thread per process before NumPy
    # loads (a worker's threads would deadlock the case processes it forks)
    assert not imported & {"torch", "sympy", "numpy"}


def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path):
    """``gradcheck list cases/ | head -1``: when the reader closes the pipe, gradcheck
    stops without a traceback, with 141 (128 + SIGPIPE) as a command killed by the
    signal would."""
    root = Path(__file__).resolve().parents[1]
    cases = tmp_path / "many.toml"
    cases.write_text("".join(f'[[case]]\nname = "c{i}"\nexpr = "sum(x)"\n'
                             f'inputs = {{ x = {{ shape = [2] }} }}\n' for i in range(3000)))
    proc = subprocess.Popen([sys.executable, "-m", "gradcheck", "list", str(cases)],
                            cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.readline()
    proc.stdout.close()          # the reader goes away after one line
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141
    assert b"c0" in first and "Traceback" not in err and "internal error" not in err


@pytest.mark.parametrize("seconds", ["-5", "0", "nan", "inf", "86401"])
def test_a_timeout_that_is_no_positive_number_is_a_usage_error(seconds, capsys):
    file = str(Path(__file__).resolve().parents[1] / "cases" / "activations.toml")
    assert main(["run", file, "--timeout", seconds]) == ExitCode.USAGE
    assert ("--timeout must be a number of seconds above 0 and at most 86,400 (one day), "
            f"got {float(seconds)!r}") in capsys.readouterr().err
