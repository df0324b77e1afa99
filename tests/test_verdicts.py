"""``gradcheck bench --section verdicts`` on a tiny selection: right and wrong formulas
and ops, a mislabelled op (a false alarm by definition) and a case every witness skips
in bfloat16, one seed, two dtypes. Checks the counts, the findings and the op table in
the saved JSON and Markdown."""

from __future__ import annotations

import contextlib
import io
import json
import textwrap
from types import SimpleNamespace

import pytest

from conftest import SQUARE_OP
from gradcheck.cli.bench import verdicts
from gradcheck.cli.main import main

DTYPES = ["float64", "bfloat16"]

OPS = '''
import torch

from gradcheck import engine
''' + SQUARE_OP + '''

class SquareThrice(torch.autograd.Function):
    """Wrong: 3x where the derivative is 2x."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x * g


class EngineSquare(engine.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g
'''

FORMULAS = '''
[[case]]
name = "square"
expr = "sum(x**2)"
inputs.x = { shape = [3] }

[[case]]
name = "square-said-wrong"
description = "a right formula marked wrong: nothing can catch it, so it is missed"
expect = "fail"
dtype = ["float64", "bfloat16"]
expr = "sum(x**2)"
inputs.x = { shape = [3] }

[[case]]
name = "square-engine-only"
description = "the engine witness alone, which does not run in bfloat16: skipped there"
witnesses = ["engine"]
expr = "sum(x**2)"
inputs.x = { shape = [3] }
'''

OP_CASES = '''
[[case]]
name = "square-op"
op = "tmpops:Square"
reference = "x**2"
inputs.x = { shape = [4] }

[[case]]
name = "square-op-wrong"
op = "tmpops:SquareThrice"
reference = "x**2"
inputs.x = { shape = [4] }
expect = "fail"

[[case]]
name = "square-op-mislabelled"
description = "the wrong op marked right: a false alarm, as the sweep counts"
op = "tmpops:SquareThrice"
reference = "x**2"
inputs.x = { shape = [4] }
'''


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """One ``gradcheck bench --section verdicts`` run: (json, markdown, stdout, stderr)."""
    root = tmp_path_factory.mktemp("verdicts")
    (root / "pyproject.toml").write_text("")   # the op module's project root
    (root / "tmpops.py").write_text(textwrap.dedent(OPS))
    (root / "formulas.toml").write_text(FORMULAS)
    (root / "ops.toml").write_text(OP_CASES)
    out = root / "reports"
    argv = ["bench", "--section", "verdicts", "--seeds", "1", "--jobs", "1",
            "--cases", str(root / "formulas.toml"), "--cases", str(root / "ops.toml"),
            "--out", str(out)]
    for d in DTYPES:
        argv += ["--dtype", d]
    stdout, stderr = io.StringIO(), io.StringIO()
    # run from there: the bench writes only inside the project it runs in
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr), \
            pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        assert main(argv) == 0
    return (json.loads((out / "verdicts.json").read_text(encoding="utf-8")),
            (out / "verdicts.md").read_text(encoding="utf-8"), stdout.getvalue(),
            stderr.getvalue())


def test_counts_per_dtype_keep_false_alarms_misses_and_skips_apart(saved):
    data = saved[0]
    assert data["seeds"] == [0] and data["dtypes"] == DTYPES
    by = {c["dtype"]: c for c in data["counts"]}
    assert by["float64"] == {"dtype": "float64", "runs": 6, "passed": 4,
                             "false_alarms": 1, "missed": 1, "skipped": 0, "errored": 0,
                             "approximate": 0}
    # the engine-only case checked nothing in bfloat16: skipped, not passed
    assert by["bfloat16"] == {"dtype": "bfloat16", "runs": 6, "passed": 3,
                              "false_alarms": 1, "missed": 1, "skipped": 1, "errored": 0,
                              "approximate": 0}
    assert data["total"]["runs"] == 12 and data["total"]["false_alarms"] == 2


def test_every_false_alarm_and_miss_is_listed_with_its_witness_message(saved):
    data, table = saved[0], saved[1]
    got = {(f["kind"], f["dtype"], f["case"]) for f in data["findings"]}
    assert got == {(k, d, c) for d in DTYPES for k, c in (
        ("false alarm", "square-op-mislabelled"), ("missed", "square-said-wrong"))}
    for f in data["findings"]:
        assert f["seed"] == 0 and f["file"].endswith(".toml") and f["status"] == "failed"
        assert 0 < len(f["message"]) <= verdicts.MESSAGE_CHARS and "\n" not in f["message"]
        if f["kind"] == "false alarm":
            assert f["message"].startswith("op.")   # the failing op witness, by name
    assert "| false alarm | float64 | square-op-mislabelled |" in table
    assert "| missed | bfloat16 | square-said-wrong |" in table


def test_op_table_sets_gradcheck_per_dtype_beside_torch_gradcheck(saved):
    data, table = saved[0], saved[1]
    rows = {r["case"]: r for r in data["table"]}
    assert list(rows) == ["square-op", "square-op-wrong", "square-op-mislabelled"]
    assert rows["square-op"]["gradcheck"] == {"float64": "pass", "bfloat16": "pass"}
    assert rows["square-op"]["torch"] == {"float64": "pass", "float32": "pass"}
    assert rows["square-op-wrong"]["meant"] == "wrong"
    assert rows["square-op-wrong"]["gradcheck"] == {"float64": "caught",
                                                    "bfloat16": "caught"}
    assert rows["square-op-wrong"]["torch"] == {"float64": "caught", "float32": "caught"}
    assert rows["square-op-mislabelled"]["torch"]["float64"] == "FALSE ALARM"
    assert "Jacobian mismatch" in rows["square-op-mislabelled"]["torch_messages"]["float64"]
    assert data["torch_settings"]["float32"] == {"eps": 1e-3, "atol": 1e-3, "rtol": 1e-2}
    assert ("| case | meant | gradcheck float64 | bfloat16 | torch f64 | torch f32 |"
            in table)
    assert "| square-op-wrong | wrong | caught | caught | caught | caught |" in table
    assert ("| square-op-mislabelled | right | FALSE ALARM | FALSE ALARM | FALSE ALARM "
            "| FALSE ALARM |") in table


def test_markdown_is_printed_and_progress_is_one_stderr_line_per_seed_and_dtype(saved):
    _, table, stdout, stderr = saved
    assert table in stdout
    assert "| float64 | 6 | 4 | 0 | 1 | 1 | 0 | 0 |" in table
    assert "| all | 12 | 7 | 0 | 2 | 2 | 1 | 0 |" in table
    lines = [line for line in stderr.splitlines() if line.startswith("verdicts: [")]
    assert [line.split(":")[1].strip() for line in lines] == [
        "[1/2] seed 0 float64", "[2/2] seed 0 bfloat16"]
    assert "| dtype |" not in stderr


def test_outcome_counts_an_error_of_a_right_case_as_a_false_alarm_and_skips_apart():
    def result(status, expect="pass"):
        return SimpleNamespace(status=status, expect=expect, dtype="float16", file="f",
                               name="c")

    assert verdicts.outcome(result("error")) == verdicts.FALSE_ALARM
    assert verdicts.outcome(result("failed")) == verdicts.FALSE_ALARM
    assert verdicts.outcome(result("skipped")) == verdicts.SKIPPED
    assert verdicts.outcome(result("skipped", "fail")) == verdicts.SKIPPED
    assert verdicts.outcome(result("passed", "fail")) == verdicts.PASSED
    assert verdicts.outcome(result("failed", "fail")) == verdicts.MISSED
    assert verdicts.outcome(result("error", "fail")) == verdicts.ERRORED
    # a wrong case is meant to be caught in the dtypes its file lists only
    listed = frozenset({"bfloat16"})
    assert verdicts.outcome(result("failed", "fail"), listed) == verdicts.SKIPPED
    assert verdicts.outcome(result("failed"), listed) == verdicts.FALSE_ALARM
    count = verdicts.tally("float16", [result("error"), result("error", "fail")])
    assert (count.false_alarms, count.missed, count.errored, count.passed) == (1, 0, 2, 0)


def test_an_engine_op_is_not_applicable_to_torch_gradcheck(tmp_path):
    from gradcheck.cases import read_file

    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "tmpops.py").write_text(textwrap.dedent(OPS))
    (tmp_path / "ops.toml").write_text(textwrap.dedent('''
        [[case]]
        name = "engine-square"
        op = "tmpops:EngineSquare"
        reference = "x**2"
        inputs.x = { shape = [4] }
        '''))
    (case,), errors = read_file(tmp_path / "ops.toml")
    assert not errors
    verdict, why = verdicts.torch_verdict(case, "float64")
    assert verdict == "n/a" and "engine" in why
    (row,) = verdicts.op_table([case], {}, ["float64"])
    assert row.torch == {"float64": "n/a", "float32": "n/a"}
    assert row.gradcheck == {"float64": "-"}   # no sweep result given for it


def test_the_sources_digest_changes_with_a_case_file(saved, tmp_path):
    assert set(saved[0]["sources"]) == {"start", "end"}
    (tmp_path / "a.toml").write_text(FORMULAS)
    before = verdicts.sources_digest([tmp_path])
    assert verdicts.sources_digest([tmp_path]) == before
    (tmp_path / "a.toml").write_text(FORMULAS + "\n")
    assert verdicts.sources_digest([tmp_path]) != before


def test_torch_verdict_of_an_op_that_cannot_be_imported_says_why():
    from gradcheck.cases import case_from_dict

    case = case_from_dict({"name": "s", "op": "nosuchmod:F", "reference": "x**2",
                           "inputs": {"x": [3]}})
    verdict, why = verdicts.torch_verdict(case, "float64")
    assert verdict == "error: OpRefused" and "nosuchmod" in why
