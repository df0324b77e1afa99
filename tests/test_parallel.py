"""Parallel and distributed runs (``gradcheck run --jobs N`` / ``--scheduler ADDRESS``):
the same report as a serial run, a worker that dies costs only the case it was running,
time limits hold inside workers, and a cluster that cannot be used is a usage error."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import SQUARE_OP
from gradcheck.process import limits
from gradcheck.session import executors as parallel, pool
from gradcheck.cli.exit_codes import ExitCode
from gradcheck.cli.main import main
from gradcheck.session.runner import run
from gradcheck.session.tasks import tasks_of

CASES = Path(__file__).parent.parent / "cases"
# A bit of everything, from every bundled file: elementwise and expanded formulas, a YAML
# file, retain_grad, float32, custom ops (imported by the workers), expect = "fail";
# seed and points overridden, which the workers must apply too.
SUBSET = dict(paths=[str(CASES)], keyword="sig", points=1, seed=3)

# The op module of the crash tests: ops that kill their own process, one that loops in
# Python, one that never lets SIGALRM in, and a correct one. Each test writes it under a
# name of its own: a Dask worker keeps the modules it imported.
OPS = """
import os
import signal
import time

import torch
""" + SQUARE_OP + """

def killed(x):
    os.kill(os.getpid(), signal.SIGKILL)


def exits(x):
    os._exit(7)


def loops(x):
    end = time.monotonic() + 60
    while time.monotonic() < end:
        pass
    return x * x


def deaf(x):
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
    time.sleep(60)
    return x * x
"""


def op_case(name: str, op: str, **keys) -> str:
    extra = "".join(f"{k} = {v}\n" for k, v in keys.items())
    return (f'[[case]]\nname = "{name}"\nop = "MODULE:{op}"\nreference = "x**2"\n'
            f"inputs.x = {{ shape = [3] }}\n{extra}\n")


BLOCKS = {
    "before": '[[case]]\nname = "before"\nexpr = "sum(x**2)"\ninputs.x = { shape = [3] }\n\n',
    "killed": op_case("killed", "killed"),
    "square-op": op_case("square-op", "Square", dtype='["float64", "float32"]'),
    "broken": '[[case]]\nname = "broken"\nexpr = "sum(x ** )"\ninputs.x = { shape = [3] }\n\n',
    "exits": op_case("exits", "exits"),
    "loops": op_case("loops", "loops"),
    "deaf": op_case("deaf", "deaf"),
    "after": '[[case]]\nname = "after"\nexpr = "sum(sin(x))"\ninputs.x = { shape = [3] }\n\n',
}


def write_crashes(folder: Path, module: str, names: list[str]) -> Path:
    (folder / f"{module}.py").write_text(OPS)
    path = folder / "crashes.toml"
    text = "[defaults]\npoints = 1\n\n" + "".join(BLOCKS[n] for n in names)
    path.write_text(text.replace("MODULE", module))
    return path


def same(got: dict, expected: dict) -> None:
    """``got == expected``, failing on the first case that differs (a readable diff)."""
    for g, e in zip(got["cases"], expected["cases"]):
        assert g == e
    assert got == expected


def plain(result) -> dict:
    """A run as its JSON report, without the durations and peak memory (the measurements,
    which may differ)."""
    data = result.to_dict()
    data["summary"].pop("seconds")
    for case in data["cases"]:
        case.pop("seconds"), case.pop("peak_memory")
    return data


def check_report(data: dict, names: list[str], errors: dict[str, str]) -> None:
    """The report holds every case of ``names`` in the serial order (file order, the
    invalid case's error in its place), the ``errors`` with those words in their
    message, the others passed."""
    assert [c["name"] for c in data["cases"]] == [
        r for n in names for r in ([n, n] if n == "square-op" else [n])]
    for case in data["cases"]:
        name = case["name"]
        if name in errors:
            assert errors[name] in case["message"], case["message"]
            if "time limit" in errors[name]:   # its own kind of error
                assert (case["status"], case["error_kind"]) == ("error", "timeout"), case
            else:   # a process dying inside an op is the op's failure
                assert (case["status"], case["error_kind"]) == ("failed", "op crashed"), case
        elif name != "broken":
            assert case["status"] == "passed", case
    died = [c for c in data["cases"] if "the op's process died" in c["message"]]
    assert {c["name"] for c in died} == {"killed", "exits"} & set(names)


# --------------------------------------------------------------------------- --jobs

@pytest.fixture(scope="module")
def serial():
    """The subset's report from a serial run, without durations."""
    result = run(**SUBSET)
    assert len(result.cases) > 8 and {c.status for c in result.cases} >= {"passed"}
    return plain(result)


def test_jobs_report_equals_serial(serial, tmp_path):
    # from a plain script, as a user would call it: the workers are fresh interpreters
    # that do not import the caller's __main__, so no `if __name__ == "__main__"` guard
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(f"""
        import json
        import gradcheck
        seen = []
        result = gradcheck.run(**{SUBSET!r}, jobs=2,
                               progress=lambda n, total, r: seen.append((n, total)))
        print(json.dumps({{"report": result.to_dict(), "progress": seen}}))
    """))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    report = data["report"]
    report["summary"].pop("seconds")
    for case in report["cases"]:
        case.pop("seconds"), case.pop("peak_memory")
    same(report, serial)
    total = len(serial["cases"])
    assert sorted(map(tuple, data["progress"])) == [(n, total) for n in range(1, total + 1)]


def test_jobs_dead_or_stuck_worker_costs_only_its_case(tmp_path, monkeypatch, capsys):
    # "loops" is stopped by the time limit inside its worker (SIGALRM); "deaf" blocks
    # SIGALRM, so the parent kills its worker once the limit and a grace period have
    # passed; "killed" kills its worker, and "after" then runs in a new one
    monkeypatch.chdir(tmp_path)   # a run writes only inside its project
    monkeypatch.setattr(pool, "KILL_GRACE", 0.5)
    names = ["loops", "deaf", "before", "square-op", "broken", "killed", "after"]
    path = write_crashes(tmp_path, "crash_jobs", names)
    out = tmp_path / "report.json"
    code = main(["run", str(path), "--jobs", "2", "--timeout", "3", "--format", "json",
                 "--output", str(out)])
    assert code == ExitCode.USAGE          # "broken" is a case-file error
    assert "4 passed, 1 failed, 3 errored" in capsys.readouterr().out
    check_report(json.loads(out.read_text()), names, {
        "killed": "the op's process died (killed by SIGKILL)",
        "loops": "ran past its time limit of 3 s",
        # the op runs in a process of its own: the judge's own time limit stops the case
        "deaf": "ran past its time limit of 3 s"})


def test_jobs_usage_errors(capsys):
    assert main(["run", str(CASES), "--jobs", "-1"]) == ExitCode.USAGE
    assert "--jobs must be an integer from 0 (one per CPU core) to 1024, got -1" in \
        capsys.readouterr().err
    assert main(["run", str(CASES), "--jobs", "2", "--scheduler", "tcp://h:1"]) == \
        ExitCode.USAGE
    assert "exclude each other" in capsys.readouterr().err


# --------------------------------------------------------------------------- Dask

@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("distributed")
    import dask

    # KilledWorker at the first death (by default the scheduler tries four workers); a
    # case merely queued on the dying worker gets it too, and gradcheck runs it again
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                      dashboard_address=":0") as c:
            yield c


def test_dask_report_equals_serial(cluster, serial):
    same(plain(run(**SUBSET, scheduler=cluster.scheduler_address)), serial)


def test_dask_dead_or_stuck_worker_costs_only_its_case(cluster, tmp_path, monkeypatch):
    # a case running past its limit in a worker's thread (where SIGALRM cannot reach)
    # is stopped too
    monkeypatch.chdir(tmp_path)   # a run writes only inside its project
    names = ["before", "exits", "square-op", "broken", "loops", "after"]
    path = write_crashes(tmp_path, "crash_dask", names)
    out = tmp_path / "report.json"
    code = main(["run", str(path), "--scheduler", cluster.scheduler_address,
                 "--timeout", "3", "--format", "json", "--output", str(out)])
    assert code == ExitCode.USAGE
    check_report(json.loads(out.read_text()), names, {
        "exits": "the op's process died (exit code 7)",
        "loops": "ran past its time limit of 3 s"})


def test_dask_missing_or_unreachable_is_a_usage_error(monkeypatch, capsys):
    pytest.importorskip("distributed")
    path = str(CASES / "retain_grad.toml")
    assert main(["run", path, "--scheduler", "no-port-here"]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert "cannot reach the Dask scheduler at 'no-port-here'" in err
    monkeypatch.setattr(parallel, "CONNECT_TIMEOUT", "0.5s")
    assert main(["run", path, "--scheduler", "tcp://127.0.0.1:1"]) == ExitCode.USAGE
    assert "cannot reach the Dask scheduler" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "distributed", None)   # as if not installed
    assert main(["run", path, "--scheduler", "tcp://127.0.0.1:8786"]) == ExitCode.USAGE
    assert "pip install 'gradcheck[distributed]'" in capsys.readouterr().err


# --------------------------------------------------------------------------- executors

def test_one_executor_interface_picks_serial_pool_or_dask():
    assert isinstance(parallel.executor(1), parallel.Serial)
    assert isinstance(parallel.executor(0), parallel.Pool)
    assert parallel.executor(limits.jobs_cap()[0]).jobs == limits.jobs_cap()[0]
    assert isinstance(parallel.executor(1, "tcp://h:1"), parallel.Dask)
    with pytest.raises(ValueError, match="jobs must be an integer from 0"):
        parallel.executor(-1)
    # no runs, nothing started (nor a scheduler reached)
    assert list(parallel.Pool(2).map([], timeout=1)) == []
    assert list(parallel.Dask("tcp://127.0.0.1:1").map([], timeout=1)) == []


def results_without_seconds(pairs) -> list[dict]:
    """(index, result) pairs in the runs' order, as dicts without the measurements
    (durations, peak memory)."""
    out = []
    for _, result in sorted(pairs, key=lambda pair: pair[0]):
        data = result.to_dict()
        data.pop("seconds"), data.pop("peak_memory")
        out.append(data)
    return out


def runs_of_a_moved_file(folder: Path, module: str):
    """The runs of a case file (a formula case, an op case whose module lives in the
    file's folder, overrides applied), their serial results, and the file's path, the
    file itself then renamed."""
    from gradcheck.cases import read_file
    from gradcheck.session.runner import RunOptions, select

    path = write_crashes(folder, module, ["before", "square-op", "after"])
    cases, errors = read_file(path)
    assert not errors
    runs = select(cases, RunOptions(seed=5, points=2))
    serial = results_without_seconds(parallel.Serial().map(runs, timeout=60))
    path.rename(folder / "elsewhere.txt")
    return runs, serial, path


def test_workers_receive_the_case_and_never_open_its_file(tmp_path):
    """The case travels whole: its file is gone before the workers start, and the pool
    still gives the serial results."""
    import pickle

    from gradcheck.cases import Case

    runs, serial, path = runs_of_a_moved_file(tmp_path, "moved_ops")
    task = pickle.loads(pickle.dumps(tasks_of(runs, 60)[1]))
    assert isinstance(task.case, Case) and task.case.seed == 5 and task.case.points == 2
    assert task.file == str(path) and task.case.op is not None
    pooled = results_without_seconds(parallel.Pool(2).map(runs, timeout=60))
    assert not path.exists() and (tmp_path / "elsewhere.txt").exists()
    assert pooled == serial
    assert [r["status"] for r in pooled] == ["passed"] * 4
    assert {r["file"] for r in pooled} == {str(path)}


def test_dask_workers_receive_the_case_and_never_open_its_file(cluster, tmp_path):
    runs, serial, path = runs_of_a_moved_file(tmp_path, "moved_ops_dask")
    begun = []   # a run is said to start when it is submitted
    got = results_without_seconds(
        parallel.Dask(cluster.scheduler_address).map(runs, timeout=60,
                                                     started=begun.append))
    assert not path.exists()
    assert got == serial and [r["status"] for r in got] == ["passed"] * 4
    assert begun == [0, 1, 2, 3]


def deep_case_file(folder: Path, depth: int) -> Path:
    """A case whose formula is ``depth`` nested sines (in lets: one expression may nest
    64 levels), deeper than pickle can follow node by node."""
    lets, previous = [], "x"
    for i in range(0, depth, 50):
        lets.append(f'let.a{i} = "{"sin(" * min(50, depth - i)}{previous}'
                    f'{")" * min(50, depth - i)}"')
        previous = f"a{i}"
    path = folder / "deep.toml"
    path.write_text('[[case]]\nname = "deep"\ninputs.x = { shape = [3] }\n'
                    + "\n".join(lets) + f'\nexpr = "sum({previous})"\npoints = 1\n'
                    'dtype = ["float64", "float32"]\n')
    return path


def test_a_deep_formula_runs_under_jobs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)   # a run writes only inside its project
    path = deep_case_file(tmp_path, 400)
    reports = {}
    for jobs in ("1", "2"):
        out = tmp_path / f"report-{jobs}.json"
        assert main(["run", str(path), "--jobs", jobs, "--format", "json",
                     "--output", str(out)]) == ExitCode.OK
        reports[jobs] = json.loads(out.read_text())
        reports[jobs]["summary"].pop("seconds")
        for case in reports[jobs]["cases"]:
            case.pop("seconds"), case.pop("peak_memory")
    same(reports["2"], reports["1"])
    assert [c["status"] for c in reports["2"]["cases"]] == ["passed", "passed"]


def test_gradcheck_run_starts_its_first_worker_early_and_uses_it(monkeypatch, tmp_path):
    """`gradcheck run` starts one worker before reading the case files; the pool takes
    that one (no second process is started for one worker), and the run's verdict is
    the worker's."""
    from gradcheck.process import spawn

    early = []
    real = spawn.spawn

    def recorded(*args):
        early.append(real(*args))
        return early[-1]

    def no_second(*args):
        raise AssertionError("the pool started a worker of its own")

    monkeypatch.delenv("GRADCHECK_IN_PROCESS")   # (the suite's runs are in-process)
    monkeypatch.setattr(spawn, "spawn", recorded)
    monkeypatch.setattr(pool, "spawn", no_second)
    path = tmp_path / "one.toml"
    path.write_text('[[case]]\nname = "one"\nexpr = "sum(tanh(x))"\n'
                    'inputs.x = { shape = [3] }\n')
    assert main(["run", str(path), "-q", "--no-cache"]) == ExitCode.OK
    assert len(early) == 1 and not spawn._spare
    assert early[0][0].wait(timeout=10) == 0   # it answered the case and left


def test_an_early_worker_no_case_needs_is_killed(monkeypatch, tmp_path, capsys):
    """A run whose cases are all answered by the parent (a refused op module) kills
    the worker it started early instead of leaving it running."""
    from gradcheck.process import spawn

    early = []
    real = spawn.spawn
    monkeypatch.delenv("GRADCHECK_IN_PROCESS")
    monkeypatch.setattr(spawn, "spawn",
                        lambda *args: early.append(real(*args)) or early[-1])
    path = tmp_path / "refused.toml"
    path.write_text('[[case]]\nname = "refused"\nop = "os:getcwd"\nexpr = "sum(x)"\n'
                    'inputs.x = { shape = [3] }\n')
    assert main(["run", str(path), "-q"]) == ExitCode.USAGE
    assert len(early) == 1 and not spawn._spare
    assert early[0][0].poll() is not None   # reaped: gone before main returned
