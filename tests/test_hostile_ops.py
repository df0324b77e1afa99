"""The hostile op corpus (tests/hostile/ops/): a case file alone names installed code
(``os:spawnl`` running /bin/sh, ``torch:save`` writing a path, ``this:s`` printing on
import, ``subprocess:run``, ``builtins:eval``) or reaches another module's code through a
project module (``hostile_ops:os.system``, an imported ``system``, a ``partial`` of it, a
class attribute holding it). Each is a case error that says how to allow it, and nothing
is imported or run; the project's own ops pass; a pattern (``--allow-op-module``,
``allow_op_modules=``, ``[tool.gradcheck] allow-op-modules``) lets an installed module
through, in this process and in ``--jobs`` workers."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import gradcheck
from gradcheck.checking.opcheck.loader import OpRefused, load

CORPUS = Path(__file__).resolve().parent / "hostile" / "ops"
MARKERS = "hostile_ops_marker*"
# the modules each refused case names, as the message must tell to allow them
MODULES = {"refused-os-spawnl": "os", "refused-torch-save": "torch", "refused-this": "this",
           "refused-subprocess-run": "subprocess", "refused-builtins-eval": "builtins"}
CHAINS = {"refused-chain-into-os", "refused-chain-through-class-into-os"}
IMPORTED = {"refused-imported-callable": "posix", "refused-partial-of-os-system": "functools",
            "refused-class-attribute-from-os": "posix"}


def assert_refusals(cases: dict, modules: dict = MODULES) -> None:
    """Every refused-* case is a case error saying what was refused and how to allow
    it (``modules``: the module each names); every fine-* case passed."""
    refused = {n for n in cases if n.startswith("refused-")}
    assert refused == set(MODULES) | CHAINS | set(IMPORTED)
    for name in refused:
        c = cases[name]
        assert (c.status, c.error_kind) == ("error", "case"), (name, c.message)
        assert " refused: " in c.message, c.message
    for name, module in {**modules, **IMPORTED}.items():
        message = cases[name].message
        assert f"--allow-op-module {module} " in message, message
        assert f'allow-op-modules = ["{module}"] under [tool.gradcheck]' in message
    for name in CHAINS:
        assert "is not a class defined in hostile_ops" in cases[name].message
    fine = {n: c.status for n, c in cases.items() if n.startswith("fine-")}
    assert set(fine.values()) <= {"passed"}, fine


def test_a_pattern_allows_an_installed_module_and_only_what_it_names(tmp_path,
                                                                     monkeypatch):
    monkeypatch.chdir(tmp_path)
    sin = CORPUS / "allowed.toml"
    for patterns, status in ((["torch"], "passed"), (["tor*"], "passed"),
                             ("torch", "passed"), (["torch.*"], "error"),
                             (["Torch"], "error"), ([], "error")):
        (case,) = gradcheck.run([sin], timeout=None, allow_op_modules=patterns).cases
        assert case.status == status, (patterns, case.message)
    # torch allowed is torch's own callables, not what it imported from its submodules
    (save,) = gradcheck.run([CORPUS / "torch_save.toml"], timeout=None,
                            allow_op_modules=["torch"]).cases
    assert save.error_kind == "case" and "defined in module 'torch.serialization'" \
        in save.message and "--allow-op-module torch.serialization " in save.message
    assert not list(tmp_path.glob(MARKERS))


def test_the_pyproject_allows_patterns(tmp_path):
    cases = tmp_path / "deep" / "cases"
    cases.mkdir(parents=True)
    shutil.copy(CORPUS / "allowed.toml", cases)
    (case,) = gradcheck.run([cases], timeout=None).cases   # no pyproject: refused
    assert case.error_kind == "case" and "the project's pyproject.toml" in case.message
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\n')
    (case,) = gradcheck.run([cases], timeout=None).cases
    assert f"[tool.gradcheck] in {pyproject}" in case.message, case.message
    pyproject.write_text('[tool.gradcheck]\nallow-op-modules = ["numpy", "torch"]\n')
    (case,) = gradcheck.run([cases], timeout=None).cases
    assert case.status == "passed", case.message
    pyproject.write_text('[tool.gradcheck]\nallow-op-modules = "torch"\n')
    (case,) = gradcheck.run([cases], timeout=None).cases
    assert case.error_kind == "case" and str(pyproject) in case.message
    assert "allow-op-modules must be a list of non-empty strings" in case.message


def test_check_op_and_load_follow_the_same_rules(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    refused = gradcheck.check_op("torch:sin", "sin(x)", {"x": (2,)})
    assert refused.error_kind == "case" and "--allow-op-module torch " in refused.message
    allowed = gradcheck.check_op("torch:sin", "sin(x)", {"x": (2,)},
                                 allow_op_modules=["torch"])
    assert allowed.status == "passed", allowed.message
    project = str(CORPUS / "project.toml")
    # Cls.apply is the Function itself (checked as a Function, its own backward too)
    assert load("hostile_ops:Square.apply", project) is load("hostile_ops:Square", project)
    with pytest.raises(OpRefused, match="not a class defined in hostile_ops"):
        load("hostile_ops:square.__globals__", project)


SCRIPT = """
import json, sys
import gradcheck

from gradcheck.checking.opcheck.loader import OpRefused, load

corpus = sys.argv[1]
for spec in ("this:s", "os:spawnl", "subprocess:run"):   # here, whatever run() does
    try:
        load(spec, corpus + "/this.toml")
    except OpRefused:
        pass
cases = {c.name: [c.status, c.error_kind, c.message]
         for c in gradcheck.run([corpus], timeout=None).cases}
imported = "this" in sys.modules
# a pattern that admits os is itself refused (gradcheck.project.op_patterns) ...
(os_allowed,) = gradcheck.run([corpus + "/spawnl.toml"], timeout=None,
                              allow_op_modules=["os"]).cases
# ... and with that check turned off here, the same case really runs /bin/sh (the
# corpus is live)
import gradcheck.project.op_patterns
gradcheck.project.op_patterns.problem = lambda pattern: ""
gradcheck.run([corpus + "/spawnl.toml"], timeout=None, allow_op_modules=["os"])
print(json.dumps({"cases": cases, "this": imported, "os": os_allowed.message}))
"""


def test_every_hostile_op_is_refused_imports_nothing_and_runs_nothing(tmp_path):
    # in a fresh process (is `this` imported?) whose folder the ops would write to
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(CORPUS)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "Beautiful is better than ugly" not in proc.stdout + proc.stderr
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["this"] is False
    cases = {n: SimpleNamespace(status=v[0], error_kind=v[1], message=v[2])
             for n, v in out["cases"].items()}
    allowed = cases.pop("allowed-torch-sin")   # an installed module, without a pattern
    assert allowed.error_kind == "case" and "--allow-op-module torch " in allowed.message
    assert len([n for n in cases if n.startswith("fine-")]) == 6
    assert_refusals(cases)
    assert "allow pattern 'os' would admit the standard library's 'os'" in out["os"]
    # only the run with the pattern check turned off wrote a marker
    assert sorted(p.name for p in tmp_path.glob(MARKERS)) == ["hostile_ops_marker_spawnl"]


def test_a_jobs_run_refuses_in_its_workers_and_carries_the_patterns(tmp_path):
    report = tmp_path / "report.json"
    # the project's own ops are left out: the serial test runs them
    files = [str(f) for f in sorted(CORPUS.glob("*.toml")) if f.name != "project.toml"]
    proc = subprocess.run(
        [sys.executable, "-m", "gradcheck", "run", *files, "--jobs", "2",
         "--allow-op-module", "torch", "--allow-op-module", "numpy",
         "--format", "json", "--output", str(report)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr   # case errors
    cases = {c["name"]: SimpleNamespace(status=c["status"], error_kind=c["error_kind"],
                                        message=c["message"] or "")
             for c in json.loads(report.read_text())["cases"]}
    assert cases.pop("allowed-torch-sin").status == "passed"   # it reached the workers
    assert "Beautiful is better than ugly" not in proc.stdout + proc.stderr
    # torch is allowed here, and torch.save still refused: it is torch.serialization's
    assert "defined in module 'torch.serialization'" in cases["refused-torch-save"].message
    assert_refusals(cases, dict(MODULES, **{"refused-torch-save": "torch.serialization"}))
    assert not list(tmp_path.glob(MARKERS))


def test_the_corpus_is_what_the_issue_names():
    ops = {line.split('"')[1] for f in CORPUS.glob("*.toml")
           for line in f.read_text().splitlines() if line.startswith("op = ")}
    assert {"os:spawnl", "torch:save", "this:s", "subprocess:run", "builtins:eval",
            "hostile_ops:os.system"} <= ops


def test_a_refused_op_and_a_case_over_its_budget_start_no_worker(monkeypatch):
    """What can be refused without running anything of the case (an op module it may
    not import, an estimate over the memory budget) is answered by the run's parent:
    no worker process is started for it (a worker imports torch first: seconds), and
    the result is the one the worker would have given."""
    from gradcheck.session import pool, runner

    def no_worker(*args, **kwargs):
        raise AssertionError("a worker process was started")

    monkeypatch.setattr(pool._Worker, "__init__", no_worker)
    files = [CORPUS / "spawnl.toml", CORPUS.parent / "budgets" / "memory-inputs.toml"]
    result = runner.run(files, isolate=True)
    kinds = {c.name: (c.status, c.error_kind) for c in result.cases}
    assert set(kinds.values()) == {("error", "case")}
    messages = " ".join(c.message for c in result.cases)
    assert "--allow-op-module os" in messages and "--max-memory" in messages
    in_process = runner.run(files).cases   # the same, in the same order
    assert [(c.name, c.status, c.message) for c in result.cases] == [
        (c.name, c.status, c.message) for c in in_process]
