"""``gradcheck run PATH...``: its arguments, its settings (the command line over
``[tool.gradcheck]``: :mod:`gradcheck.cli.settings`), the run with its progress display,
and the exit code; the reports it writes are :mod:`gradcheck.cli.output`. Kept out of
cli.py; torch is imported only when the command runs, so ``--help`` stays instant."""

from __future__ import annotations

import argparse
import os
import sys

from .exit_codes import ExitCode, exit_code
from ..cases.vocabulary import DEVICES, EXTREME_POINTS, MAX_POINTS, SKIPPABLE
from ..project.op_patterns import argument as _pattern
from ..process.limits import MAX_JOBS, MAX_TIMEOUT
from ..process.timelimit import DEFAULT_TIMEOUT
from .settings import COLORS

__all__ = ["add_parser", "command", "IN_PROCESS"]

DESCRIPTION = (
    "Run case files (or folders of them) and report, for every case, whether each "
    "witness agrees with the symbolic reference. Exit codes: 0 all passed (approximate "
    "ones included: a float64 run within float32's tolerance only, which --strict fails), "
    "1 a gradient mismatch, an op that raised or a case past its time limit, 2 a usage "
    "or case-file "
    "error, 3 an internal error, 5 no case selected, 130 or 143 interrupted by SIGINT or "
    "SIGTERM (the report holds the cases that finished, marked incomplete).")

EPILOG = (
    "Settings: the [tool.gradcheck] table of the nearest pyproject.toml (from the current "
    "folder) may set paths, dtype, seed, points, extreme-points, timeout, jobs, "
    "witnesses, reports, strict, strict-shapes, allow-op-modules, max-memory, "
    "step-summary and color; the command line overrides it. Its paths and reports are relative to the "
    "pyproject.toml's folder. Without PATH, the configured paths are run. Under GitHub "
    "Actions the Markdown report is also appended to $GITHUB_STEP_SUMMARY.")

# Set to 1, the cases of a plain `gradcheck run` (one job) run in its own process, as
# --in-process says: for a debugger, or for tests that call main() many times.
IN_PROCESS = "GRADCHECK_IN_PROCESS"


def add_parser(sub, dtypes) -> None:
    run = sub.add_parser("run", help="run case files and print a report",
                         description=DESCRIPTION, epilog=EPILOG)
    _selection(run, dtypes)
    _reporting(run)
    _execution(run)


def _dtype_help(dtypes) -> str:
    """--dtype's help: which witnesses of the registry run in which dtypes."""
    from ..witnesses.registry import REGISTRY

    text = "run every case in this dtype only"
    limited: dict[tuple, list[str]] = {}
    for w in REGISTRY.values():
        if w.runs_in is not None:
            limited.setdefault(w.runs_in, []).append(w.name)
    for runs_in, names in limited.items():
        others = [d for d in dtypes if d not in runs_in]
        text += (f" (the {' and '.join(names)} witness{'es' if len(names) > 1 else ''} "
                 f"run{'' if len(names) > 1 else 's'} in {' and '.join(runs_in)} only: in "
                 f"{' and '.join(others)} {'they are' if len(names) > 1 else 'it is'} "
                 "reported as skipped)")
    return text


def _selection(run: argparse.ArgumentParser, dtypes) -> None:
    """What runs: the cases, their dtypes, points and witnesses."""
    from ..witnesses.registry import names as witness_names

    run.add_argument("paths", nargs="*", metavar="PATH",
                     help="case file or folder (default: [tool.gradcheck] paths)")
    run.add_argument("-k", dest="keyword", metavar="SUBSTRING",
                     help="only cases whose name contains SUBSTRING")
    run.add_argument("--dtype", choices=dtypes, help=_dtype_help(dtypes))
    run.add_argument("--seed", type=int, help="override every case's seed")
    run.add_argument("--points", type=int, help="override the number of points per case")
    run.add_argument("--extreme-points", type=int, metavar="N",
                     help="override the number of extra points at large and small "
                          f"magnitudes per case (default {EXTREME_POINTS}; 0 turns them "
                          "off)")
    run.add_argument("--strict-shapes", action=argparse.BooleanOptionalAction,
                     help="op.shapes fails what autograd accepts but changes in what an "
                          "op's backward returns (a gradient it sums back to its input's "
                          "shape, trailing Nones, a gradient for an input that needs "
                          "none), as strict_shapes = true in a case does")
    run.add_argument("--strict", action=argparse.BooleanOptionalAction,
                     help="an approximate result (a float64 run whose mismatches all lie "
                          "within float32's tolerance) fails, as strict = true in a case "
                          "does; without it, it passes with a warning (--no-strict)")
    run.add_argument("--allow-op-module", action="append", default=[], metavar="PATTERN",
                     type=_pattern,
                     help="let a case's op come from the installed modules PATTERN names "
                          "(fnmatch on the dotted name: torch, mypkg.*; repeatable; added "
                          "to [tool.gradcheck] allow-op-modules); without it, only "
                          "modules that are files of the project; a pattern that admits "
                          "the standard library (*, o*, os, subprocess) is refused")
    run.add_argument("--witness", action="append", choices=witness_names(),
                     help="only these witnesses (repeatable)")
    run.add_argument("--skip-check", action="append", metavar="CHECK",
                     choices=[f"op.{c}" for c in SKIPPABLE],
                     help="switch an op check off in every case, as skip_checks = "
                          "[\"op.jvp\"] in a case does (repeatable; [tool.gradcheck] "
                          "skip-checks)")


def _report_spec(text: str) -> tuple[str, str]:
    """``--report``'s FMT:PATH (argparse reports an ArgumentTypeError as a usage
    error)."""
    from .settings import parse_report

    try:
        return parse_report(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _reporting(run: argparse.ArgumentParser) -> None:
    """Where the reports go, and what the terminal shows."""
    from ..report import FORMATS

    run.add_argument("--report", action="append", type=_report_spec, metavar="FMT:PATH",
                     help="write a report in FMT (" + ", ".join(FORMATS) + ") to PATH "
                          "(repeatable; replaces [tool.gradcheck] reports); the text "
                          "report still goes to stdout")
    run.add_argument("--format", choices=tuple(FORMATS),
                     help="the report on stdout, or in --output (default text); under "
                          "GitHub Actions failures are also printed as ::error "
                          "annotations")
    run.add_argument("--output", metavar="FILE",
                     help="write the --format report to FILE (as --report FMT:FILE)")
    run.add_argument("--step-summary", action=argparse.BooleanOptionalAction,
                     help="under GitHub Actions, append the Markdown report to "
                          "$GITHUB_STEP_SUMMARY (default: on)")
    run.add_argument("--color", choices=COLORS,
                     help="colour on the terminal (default auto: where the stream is a "
                          "terminal, unless NO_COLOR is set; FORCE_COLOR forces it)")
    talk = run.add_mutually_exclusive_group()
    talk.add_argument("-q", "--quiet", action="store_true",
                      help="only the failures and the summary, and no progress")
    talk.add_argument("-v", "--verbose", action="store_true",
                      help="every case's details: each witness's error/tolerance, "
                           "grad_fn chains, notes, and the contract notes (what PyTorch "
                           "allows a backward: trailing Nones, broadcast sums; JUnit too)")
    run.add_argument("--exit-zero", action="store_true",
                     help="exit 0 even when cases fail (the report still says so)")


def _execution(run: argparse.ArgumentParser) -> None:
    """Where and how the cases run."""
    run.add_argument("--device", choices=DEVICES,
                     help="run ops and the torch witness on this device (cases on an "
                          "absent device are skipped)")
    run.add_argument("--timeout", type=float, metavar="SECONDS",
                     help=f"time limit per case and dtype, above 0 and at most "
                          f"{MAX_TIMEOUT:.0f} (default {DEFAULT_TIMEOUT:.0f})")
    run.add_argument("-j", "--jobs", type=int, metavar="N",
                     help=f"run the cases in N worker processes, 0 to {MAX_JOBS} (0: one per "
                          "CPU; default 1), at most what the machine runs at once (its "
                          "cores, and 256 MiB a worker in half its available memory: a "
                          "larger N is lowered, with a note); the report is the same as "
                          "a serial run's")
    run.add_argument("--in-process", action="store_true",
                     help="run the cases in this process, one after the other, for a "
                          "debugger (also GRADCHECK_IN_PROCESS=1); by default each runs "
                          "in a worker process, so that an op that crashes, exits or "
                          "hangs costs only its own case")
    run.add_argument("--scheduler", metavar="ADDRESS",
                     help="run the cases on the Dask distributed cluster whose scheduler "
                          "is at ADDRESS, e.g. tcp://host:8786 (pip install "
                          "'gradcheck[distributed]')")
    run.add_argument("--no-cache", action="store_true",
                     help="compile every reference kernel anew: turn off the memo "
                          "that reuses a compiled kernel within a process (there is "
                          "no disk cache)")
    run.add_argument("--max-memory", type=_size, metavar="SIZE",
                     help="the memory a case may take, 1M to 1P, e.g. 4G or 512M: a "
                          "case whose estimate (its elements times its points, and its "
                          "intermediates) is larger is refused before it runs (default "
                          "2G), and each worker process is limited to it (its address "
                          "space beyond its start-up; without it, to its share of half "
                          "the available memory), so a case that takes more fails alone "
                          "with a MemoryError")


def _size(text: str) -> int:
    """``--max-memory``'s bytes (argparse reports an ArgumentTypeError as a usage error)."""
    from ..process.budgets import parse_size
    from ..process.limits import max_memory_problem

    problem = max_memory_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return parse_size(text)


def _in_process(args) -> bool:
    return args.in_process or (args.jobs == 1 and not args.scheduler
                               and os.environ.get(IN_PROCESS, "") not in ("", "0"))


def _usage_error(args) -> str:
    """What is wrong with ``gradcheck run``'s options after the merge ("" when
    nothing is)."""
    from ..process.limits import jobs_problem, timeout_problem
    from .output import report_problem

    if not args.paths:
        return ("no case file or folder to run: give a PATH, or set paths = [...] under "
                "[tool.gradcheck] in pyproject.toml")
    if args.points is not None and not 1 <= args.points <= MAX_POINTS:
        return f"--points must be from 1 to {MAX_POINTS}"
    if args.extreme_points is not None and not 0 <= args.extreme_points <= MAX_POINTS:
        return f"--extreme-points must be from 0 to {MAX_POINTS}"
    for problem in (timeout_problem(args.timeout), jobs_problem(args.jobs)):
        if problem:   # (the table's values were checked as the table's)
            return "--" + problem
    if args.jobs != 1 and args.scheduler:
        return "--jobs and --scheduler exclude each other"
    if args.in_process and (args.jobs != 1 or args.scheduler):
        return ("--in-process runs the cases in this process, one after the other: it "
                "excludes --jobs and --scheduler")
    return report_problem(args.reports)


def command(args) -> int:
    """``gradcheck run``: the exit code (a settings error raises SettingsError, a
    CaseFileError: cli.main makes it exit 2)."""
    from ..project.settings import settings
    from .settings import merge

    merge(args, settings())
    usage = _usage_error(args)
    if usage:
        print(f"gradcheck: error: {usage}", file=sys.stderr)
        return ExitCode.USAGE
    return _run(args)


def _run(args) -> int:
    import signal

    from ..process import spawn
    from ..process.budgets import memory_budget
    from ..process.interrupts import Interrupted, stop_on
    from ..reference.kernelcache import turned_off
    from ..process.limits import worker_env

    args.workers = _workers(args)
    # SIGINT and SIGTERM stop the run; what finished is still reported (incomplete)
    with stop_on(signal.SIGINT, signal.SIGTERM):
        try:
            with turned_off(args.no_cache), memory_budget(args.max_memory):
                if not _in_process(args) and not args.scheduler:
                    # the pool's first worker, started before our own imports and the
                    # reading of the case files, which overlap its imports (seconds)
                    spawn.prestart(worker_env(args.workers))
                try:
                    result = _results(args)
                finally:
                    spawn.discard()   # not taken: the run had nothing to run, or raised
        except Interrupted as stop:
            if stop.result is None:   # before the run had begun: nothing to report
                raise
            result = stop.result
        if result is None:   # it could not run, and said why
            return ExitCode.USAGE
        from .output import publish

        unwritten = publish(args, result)
    return _run_code(args, result, unwritten)


def _workers(args) -> int:
    """The worker processes the run starts: ``--jobs`` (0: one per core) within what
    the machine runs at once (:func:`gradcheck.process.limits.cap_jobs`), with a note on
    stderr where it was lowered."""
    from ..process.limits import cap_jobs

    if _in_process(args) or args.scheduler:
        return args.jobs
    jobs, note = cap_jobs(args.jobs)
    if note:
        print(f"gradcheck: note: {note}", file=sys.stderr)
    return jobs


def _results(args):
    """The run's result, shown in progress on stderr; None after saying why it could
    not run (a --jobs or --scheduler setting that does not work here)."""
    from ..session.executors import ParallelError
    from .progress import display
    from .output import is_terminal, use_color
    from ..session.runner import run

    mode = "quiet" if args.quiet else "live" if is_terminal(sys.stderr) else "lines"
    try:
        with display(sys.stderr, mode=mode,
                     color=use_color(args.color, sys.stderr)) as progress:
            return run(args.paths, _options(args), progress=progress)
    except ParallelError as exc:
        from ..report.text import printable

        print(f"gradcheck: error: {printable(exc)}", file=sys.stderr)
        return None


def _options(args):
    """The :class:`~gradcheck.session.runner.RunOptions` of the merged ``args``."""
    from ..session.runner import RunOptions

    return RunOptions(
        keyword=args.keyword, dtype=args.dtype, seed=args.seed, points=args.points,
        extreme_points=args.extreme_points, witnesses=args.witness, device=args.device,
        strict_shapes=args.strict_shapes, strict=args.strict,
        allow_op_modules=args.allow_op_module, skip_checks=tuple(args.skip_check or ()),
        timeout=args.timeout, jobs=args.workers,
        scheduler=args.scheduler, isolate=not _in_process(args),
        formulas=_shows_formulas(args))


def _shows_formulas(args) -> bool:
    """Whether a report of this run shows the gradient formulas of a case that passed:
    the text report with -v, and a format whose row says it does (the JSON report's
    "gradients"). The others show them for the cases that did not pass only, which
    always have them."""
    from ..report import FORMATS

    asked = {args.format, *(r.fmt for r in args.reports)}
    return args.verbose or any(FORMATS[fmt].formulas for fmt in asked)


def _run_code(args, result, unwritten: list[str]) -> int:
    """The exit code of a run whose reports were written (or not: ``unwritten`` says
    why, one reason a report), with what stderr should say about it."""
    for reason in unwritten:
        print(f"gradcheck: error: {reason}", file=sys.stderr)
    if result.incomplete:
        import signal

        done = len(result.cases)
        print(f"gradcheck: interrupted by {result.interrupted}: the report holds the "
              f"{done} case run(s) that finished; {result.not_run} did not",
              file=sys.stderr)
        return 128 + signal.Signals[result.interrupted].value
    code = exit_code(result)
    if unwritten and code != ExitCode.INTERNAL:
        return ExitCode.USAGE
    if code == ExitCode.NO_CASES:
        _no_cases(args)
    if args.exit_zero and code == ExitCode.MISMATCH:
        return ExitCode.OK
    return code


def _no_cases(args) -> None:
    from ..report.text import one_line

    where = ", ".join(map(one_line, args.paths))
    print("gradcheck: no cases selected: " + (
        f"no case name under {where} contains {one_line(args.keyword)!r}"
        if args.keyword else f"no cases under {where}"), file=sys.stderr)
