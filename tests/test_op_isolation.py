"""Op modules are imported per case file's folder: two folders that each hold a
``myops.py`` get their own class (the wrong one fails, the right one passes), whichever
runs first, serially, with ``--jobs`` and on Dask alike; ``pkg.mod`` names a file under
the folder; a name that is no file there is an installed module, imported only when a
pattern allows it."""

from __future__ import annotations

import inspect
import json
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

import gradcheck
from gradcheck.checking.opcheck.loader import load, op_folder
from gradcheck.cli.exit_codes import ExitCode
from gradcheck.cli.main import main

SQUARE = """
import dataclasses

import torch


@dataclasses.dataclass(frozen=True)
class Meta:   # a dataclass needs its module in sys.modules
    sign: float = {sign}


class Foo(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return Meta().sign * 2 * x * g
"""

CASE = """
[[case]]
name = "{name}"
op = "{op}"
reference = "x ** 2"
inputs.x = {{ shape = [3] }}
points = 2
"""


def make_folder(root: Path, name: str, sign: float, op: str = "myops:Foo",
                module: str = "myops.py") -> Path:
    folder = root / name
    (folder / module).parent.mkdir(parents=True, exist_ok=True)
    (folder / module).write_text(textwrap.dedent(SQUARE.format(sign=sign)))
    (folder / "cases.toml").write_text(CASE.format(name=name, op=op))
    return folder


@pytest.fixture
def two(tmp_path: Path) -> tuple[Path, Path]:
    """Two folders, each with a ``myops.py`` defining ``Foo``: x² with a right backward
    in ``right``, with its sign flipped in ``wrong``."""
    return make_folder(tmp_path, "right", 1.0), make_folder(tmp_path, "wrong", -1.0)


def verdicts(result) -> dict:
    return {(c.name, c.dtype): (c.status, c.error_kind) for c in result.cases}


def plain(result) -> dict:
    data = result.to_dict()
    data["summary"].pop("seconds")
    for case in data["cases"]:
        case.pop("seconds"), case.pop("peak_memory")
    return data


EXPECTED = {("right", "float64"): ("passed", ""), ("wrong", "float64"): ("failed", "")}


def test_same_named_modules_in_two_folders_are_two_modules(two):
    right, wrong = two
    a = load("myops:Foo", str(right / "cases.toml"))
    b = load("myops:Foo", str(wrong / "cases.toml"))
    assert a is not b and a.__module__ != b.__module__
    assert a.__module__.startswith("gradcheck_op_") and a.__module__.endswith(".myops")
    assert Path(inspect.getsourcefile(a)) == (right / "myops.py").resolve()
    assert Path(inspect.getsourcefile(b)) == (wrong / "myops.py").resolve()
    assert sys.modules[a.__module__].Meta().sign == 1.0
    assert sys.modules[b.__module__].Meta().sign == -1.0
    # the same file is the same module, whichever case file of that folder names it
    assert load("myops:Foo", str(right / "other.toml")) is a


@pytest.mark.parametrize("order", ["right first", "wrong first"])
def test_serial_verdicts_do_not_depend_on_which_folder_ran_first(two, order):
    paths = list(two) if order == "right first" else list(reversed(two))
    assert verdicts(gradcheck.run(paths, timeout=None)) == EXPECTED


def test_jobs_give_the_serial_verdicts_and_report(two):
    serial = gradcheck.run(list(two), timeout=None)
    parallel = gradcheck.run(list(two), timeout=None, jobs=2)
    assert verdicts(serial) == verdicts(parallel) == EXPECTED
    assert plain(serial) == plain(parallel)


def test_dask_gives_the_serial_verdicts(two):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, processes=True, threads_per_worker=1,
                                  dashboard_address=":0") as cluster:
        # one worker runs both folders' cases: one process, both modules
        result = gradcheck.run(list(two), timeout=None, scheduler=cluster.scheduler_address)
    assert verdicts(result) == EXPECTED


def test_cli_serial_and_jobs_agree(two, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)   # a run writes only inside its project
    reports = {}
    for jobs in ("1", "2"):
        out = tmp_path / f"report-{jobs}.json"
        code = main(["run", *map(str, two), "--jobs", jobs, "--format", "json",
                     "--output", str(out)])
        assert code == ExitCode.MISMATCH, capsys.readouterr()
        reports[jobs] = json.loads(out.read_text())
    status = [{c["name"]: c["status"] for c in r["cases"]} for r in reports.values()]
    assert status == [{"right": "passed", "wrong": "failed"}] * 2


def test_a_package_style_module(tmp_path):
    # pkg/mod.py with a relative import of its package's helper, and pkg/__init__.py run
    for name, sign in [("right", 1.0), ("wrong", -1.0)]:
        folder = make_folder(tmp_path, name, sign, op="pkg.mod:Foo", module="pkg/mod.py")
        (folder / "pkg" / "__init__.py").write_text("LOADED = True\n")
        (folder / "pkg" / "helpers.py").write_text(f"SIGN = {sign}\n")
        mod = folder / "pkg" / "mod.py"
        mod.write_text("from . import helpers\n" + mod.read_text().replace(
            "Meta().sign", "helpers.SIGN"))
    result = gradcheck.run([tmp_path / "right", tmp_path / "wrong"], timeout=None)
    assert verdicts(result) == EXPECTED
    foo = load("pkg.mod:Foo", str(tmp_path / "wrong" / "cases.toml"))
    package = sys.modules[foo.__module__.rpartition(".")[0]]
    assert package.LOADED and foo.__module__.endswith(".pkg.mod")


def test_a_module_imports_its_siblings(tmp_path):
    helper = f"helpers_{uuid.uuid4().hex}"   # siblings are plain top-level modules
    folder = make_folder(tmp_path, "right", 1.0)
    (folder / f"{helper}.py").write_text("SIGN = 1.0\n")
    mod = folder / "myops.py"
    mod.write_text(f"import {helper}\n" + mod.read_text().replace(
        "Meta().sign", f"{helper}.SIGN"))
    assert verdicts(gradcheck.run([folder], timeout=None)) == {
        ("right", "float64"): ("passed", "")}


def test_the_project_root_is_searched_after_the_case_folder(tmp_path):
    # cases/deep/cases.toml names myops, which lives at the project root only
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    make_folder(tmp_path, "unused", -1.0)
    (tmp_path / "unused" / "myops.py").rename(tmp_path / "myops.py")
    deep = tmp_path / "cases" / "deep"
    deep.mkdir(parents=True)
    (deep / "cases.toml").write_text(CASE.format(name="wrong", op="myops:Foo"))
    assert op_folder("myops", str(deep / "cases.toml")) == tmp_path.resolve()
    assert verdicts(gradcheck.run([deep], timeout=None)) == {
        ("wrong", "float64"): ("failed", "")}
    # a module next to the case file wins over the project root's
    make_folder(deep.parent, "deep", 1.0)
    assert op_folder("myops", str(deep / "cases.toml")) == deep.resolve()
    assert verdicts(gradcheck.run([deep], timeout=None)) == {
        ("deep", "float64"): ("passed", "")}


def test_a_name_that_is_no_file_there_is_an_installed_module(tmp_path):
    (tmp_path / "cases.toml").write_text(
        CASE.format(name="sin", op="torch:sin").replace("x ** 2", "sin(x)"))
    assert op_folder("torch", str(tmp_path / "cases.toml")) is None
    # refused unless allowed (tests/test_hostile_ops.py has the hostile ones)
    assert verdicts(gradcheck.run([tmp_path], timeout=None)) == {
        ("sin", "float64"): ("error", "case")}
    assert verdicts(gradcheck.run([tmp_path], timeout=None, allow_op_modules=["torch"])) \
        == {("sin", "float64"): ("passed", "")}
