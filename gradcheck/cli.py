"""The command line: argparse wiring only. Heavy modules (torch, SymPy) are imported by
the commands that need them, so ``--help`` stays instant."""

from __future__ import annotations

import argparse
import os
import sys
from enum import IntEnum

from . import doctor_cli
from .io import write_atomic


class ExitCode(IntEnum):
    OK = 0          # every case passed (or failed as expect = "fail" said)
    MISMATCH = 1    # a gradient mismatch, an op that raised, or a case past its time limit
    USAGE = 2       # a usage or case-file error (an op that cannot be imported included)
    INTERNAL = 3    # an internal error
    NO_CASES = 5    # no case selected (pytest's code for "no tests collected")
    SIGINT = 130    # interrupted: 128 + the signal, as a shell counts it; the report
    SIGTERM = 143   # holds the cases that finished, marked incomplete


def _parser() -> argparse.ArgumentParser:
    from . import __version__
    from .dtypes import NAMES as DTYPES

    p = argparse.ArgumentParser(
        prog="gradcheck",
        description="Check gradients against the exact symbolic derivative.")
    p.add_argument("--version", action="version", version=f"gradcheck {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    _run_arguments(sub.add_parser(
        "run", help="run case files and print a report",
        description="Run case files (or folders of them) and report, for every case, "
                    "whether each witness agrees with the symbolic reference. Exit codes: "
                    "0 all passed, 1 a gradient mismatch, an op that raised or a case past "
                    "its time limit, 2 a usage or case-file error, 3 an internal error, "
                    "5 no case selected, 130 or 143 interrupted by SIGINT or SIGTERM (the "
                    "report holds the cases that finished, marked incomplete)."), DTYPES)
    ls = sub.add_parser("list", help="list the cases without running them")
    ls.add_argument("paths", nargs="+", metavar="PATH")
    fns = sub.add_parser(
        "functions", help="list the functions of the expression language",
        description="Every function and operator a formula may use: how it is called, "
                    "an example, PyTorch's grad_fn name for it and what it computes.")
    fns.add_argument("--format", choices=("text", "markdown"), default="text")
    from .explanation import arguments as explain_arguments

    explain_arguments(sub.add_parser(
        "explain", help="explain what autograd computes for a formula",
        description="Exact gradient formulas, PyTorch's grad_fn graph beside the engine's, "
                    "backward(v), the Jacobian when small, and every .grad (and why one "
                    "is None), at one sampled point."))
    cache = sub.add_parser(
        "cache", help="show or clear the cache of compiled reference kernels",
        description="The symbolic reference's compiled kernels are cached on disk, so a "
                    "re-run skips SymPy's differentiation and code printing. The folder "
                    "is $GRADCHECK_CACHE_DIR, else $XDG_CACHE_HOME/gradcheck, else "
                    "~/.cache/gradcheck; GRADCHECK_NO_CACHE=1 (or run --no-cache) turns "
                    "the cache off. Without options: the folder, its entries and size.")
    cache.add_argument("--clear", action="store_true", help="remove every cached kernel")
    _bench_arguments(sub.add_parser(
        "bench", help="measure gradcheck against other checkers",
        description="Run fixed workloads side by side and save reports/bench.json and "
                    "reports/bench.md."), DTYPES)
    doctor_cli.add_parser(sub)
    return p


def _dtype_help(dtypes) -> str:
    """--dtype's help: which witnesses of the registry run in which dtypes."""
    from .witnesses import REGISTRY

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


def _run_arguments(run: argparse.ArgumentParser, dtypes) -> None:
    from .report import FORMATS
    from .witnesses import names as witness_names

    run.add_argument("paths", nargs="+", metavar="PATH", help="case file or folder")
    run.add_argument("-k", dest="keyword", metavar="SUBSTRING",
                     help="only cases whose name contains SUBSTRING")
    run.add_argument("--dtype", choices=dtypes, help=_dtype_help(dtypes))
    run.add_argument("--seed", type=int, help="override every case's seed")
    run.add_argument("--points", type=int, help="override the number of points per case")
    run.add_argument("--extreme-points", type=int, metavar="N",
                     help="override the number of extra points at large and small "
                          "magnitudes per case (default 2; 0 turns them off)")
    run.add_argument("--strict-shapes", action="store_true",
                     help="op.shapes fails what autograd accepts but changes in what an "
                          "op's backward returns (a gradient it sums back to its input's "
                          "shape, trailing Nones, a gradient for an input that needs "
                          "none), as strict_shapes = true in a case does")
    run.add_argument("--allow-op-module", action="append", default=[], metavar="PATTERN",
                     help="let a case's op come from the installed modules PATTERN names "
                          "(fnmatch on the dotted name: torch, mypkg.*; repeatable); "
                          "without it, only modules that are files of the project")
    run.add_argument("--witness", action="append", choices=witness_names(),
                     help="only these witnesses (repeatable)")
    run.add_argument("--format", default="text", choices=FORMATS,
                     help="report format (default text); under GitHub Actions failures "
                          "are also printed as ::error annotations")
    run.add_argument("--output", metavar="FILE", help="write the report to FILE")
    run.add_argument("--device", choices=["cpu", "cuda"],
                     help="run ops and the torch witness on this device (cases on an "
                          "absent device are skipped)")
    run.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS",
                     help="time limit per case and dtype (default 300)")
    run.add_argument("-j", "--jobs", type=int, default=1, metavar="N",
                     help="run the cases in N worker processes (0: one per CPU; default "
                          "1); the report is the same as a serial run's")
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
                     help="neither read nor write the cache of compiled reference "
                          "kernels (see `gradcheck cache`)")
    run.add_argument("--max-memory", type=_size, metavar="SIZE",
                     help="the memory a case may take, e.g. 4G or 512M: a case whose "
                          "estimate (its elements times its points) is larger is refused "
                          "before it runs (default 2G), and each worker process is "
                          "limited to it (its address space beyond its start-up), so a "
                          "case that takes more fails alone with a MemoryError")
    run.add_argument("--exit-zero", action="store_true",
                     help="exit 0 even when cases fail (the report still says so)")
    run.add_argument("-v", "--verbose", action="store_true",
                     help="show grad_fn chains and notes for every case")


def _size(text: str) -> int:
    """``--max-memory``'s bytes (argparse reports an ArgumentTypeError as a usage error)."""
    from .budgets import parse_size

    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _bench_arguments(bench: argparse.ArgumentParser, dtypes) -> None:
    bench.add_argument("--out", default="reports", metavar="DIR",
                       help="folder for bench.json and bench.md (default reports)")
    bench.add_argument("--quick", action="store_true",
                       help="small sizes, one run each (seconds, not minutes); the "
                            "targets are not assessed; verdicts: one seed")
    # verdicts is not among the default sections: it runs every bundled case for many
    # seeds in four dtypes (tens of minutes), a different kind of measurement
    bench.add_argument("--section", action="append", metavar="NAME",
                       choices=["checkers", "memory", "compile", "engine", "tensor",
                                "verdicts"],
                       help="only this section (repeatable): checkers, memory, compile, "
                            "engine, tensor (the default is these five), or verdicts (every "
                            "case under --cases over --seeds seeds in every --dtype, and "
                            "the op cases against torch.autograd.gradcheck; saved as "
                            "verdicts.json and verdicts.md)")
    bench.add_argument("--seeds", type=int, metavar="N",
                       help="verdicts: seeds 0..N-1 (default 20; 1 with --quick)")
    bench.add_argument("--dtype", action="append", choices=dtypes,
                       help="verdicts: only this dtype (repeatable; default all four)")
    bench.add_argument("--cases", action="append", metavar="PATH",
                       help="verdicts: these case files or folders (repeatable; default "
                            "the bundled cases/)")
    bench.add_argument("-j", "--jobs", type=int, default=2, metavar="N",
                       help="verdicts: worker processes per run (default 2; 0: one per "
                            "CPU)")


def exit_code(result) -> ExitCode:
    """The exit code a run earns (see :class:`ExitCode`)."""
    if not result.cases:
        return ExitCode.NO_CASES
    kinds = {c.error_kind for c in result.cases if c.status == "error"}
    if "internal" in kinds:
        return ExitCode.INTERNAL
    if "case" in kinds:
        return ExitCode.USAGE
    # a time-out is a check that did not pass, as a CI counts a test that hung (the op's
    # failures, "op raised", are status failed already)
    if "timeout" in kinds or any(c.status == "failed" for c in result.cases):
        return ExitCode.MISMATCH
    return ExitCode.OK


# Set to 1, the cases of a plain `gradcheck run` (one job) run in its own process, as
# --in-process says: for a debugger, or for tests that call main() many times.
IN_PROCESS = "GRADCHECK_IN_PROCESS"


def _in_process(args) -> bool:
    return args.in_process or (args.jobs == 1 and not args.scheduler
                               and os.environ.get(IN_PROCESS, "") not in ("", "0"))


def _cmd_run(args) -> int:
    import signal

    from .interrupts import Interrupted, stop_on
    from .io import output_problem
    from .budgets import memory_budget
    from .kernelcache import turned_off
    from .parallel import ParallelError
    from .runner import run

    usage = _run_usage_error(args) or (args.output and output_problem(args.output))
    if usage:
        print(f"gradcheck: error: {usage}", file=sys.stderr)
        return ExitCode.USAGE
    tty = sys.stderr.isatty()
    # SIGINT and SIGTERM stop the run; what finished is still reported (incomplete)
    with stop_on(signal.SIGINT, signal.SIGTERM):
        try:
            with turned_off(args.no_cache), memory_budget(args.max_memory):
                result = run(args.paths, keyword=args.keyword, dtype=args.dtype,
                             seed=args.seed,
                             points=args.points, extreme_points=args.extreme_points,
                             strict_shapes=args.strict_shapes,
                             allow_op_modules=args.allow_op_module,
                             witnesses=args.witness, timeout=args.timeout,
                             device=args.device, jobs=args.jobs, scheduler=args.scheduler,
                             isolate=not _in_process(args),
                             progress=_progress if tty else None)
        except ParallelError as exc:
            if tty:
                print("\r\033[K", end="", file=sys.stderr, flush=True)
            from .report.text import printable

            print(f"gradcheck: error: {printable(exc)}", file=sys.stderr)
            return ExitCode.USAGE
        except Interrupted as stop:
            if stop.result is None:   # before the run had begun: nothing to report
                raise
            result = stop.result
        if tty:
            print("\r\033[K", end="", file=sys.stderr, flush=True)
        unwritten = _report(args, result)
    return _run_code(args, result, unwritten)


def _run_code(args, result, unwritten: str) -> int:
    """The exit code of a run whose report was written (or not: ``unwritten`` says why),
    with what stderr should say about it."""
    if unwritten:
        print(f"gradcheck: error: {unwritten}", file=sys.stderr)
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


def _run_usage_error(args) -> str:
    """What is wrong with ``gradcheck run``'s numbers ("" when nothing is)."""
    if args.points is not None and not 1 <= args.points <= 1000:
        return "--points must be from 1 to 1000"
    if args.extreme_points is not None and not 0 <= args.extreme_points <= 1000:
        return "--extreme-points must be from 0 to 1000"
    if not args.timeout > 0:   # (NaN too)
        return "--timeout must be a positive number of seconds"
    if args.jobs < 0:
        return "--jobs must be 0 or more"
    if args.jobs != 1 and args.scheduler:
        return "--jobs and --scheduler exclude each other"
    if args.in_process and (args.jobs != 1 or args.scheduler):
        return ("--in-process runs the cases in this process, one after the other: it "
                "excludes --jobs and --scheduler")
    return ""


def _progress(n: int, total: int, result) -> None:
    """The progress line on a terminal's stderr, rewritten as each result comes in."""
    from .report.text import one_line

    # the name comes from a case file: never let it drive the terminal
    print(f"\r\033[K[{n}/{total}] {one_line(result.name)} ({one_line(result.dtype)})",
          end="", file=sys.stderr, flush=True)


def _report(args, result) -> str:
    """The report in ``--format``, to ``--output`` or stdout, with GitHub Actions'
    annotations when running there; why ``--output`` could not be written ("" when it
    was)."""
    from .report import render

    # NO_COLOR counts when it is set and not empty (no-color.org)
    color = (args.output is None and sys.stdout.isatty()
             and not os.environ.get("NO_COLOR"))
    text = render(result, args.format, color=color, verbose=args.verbose)
    annotations = []
    if os.environ.get("GITHUB_ACTIONS") == "true":
        from .report.annotations import github_annotations

        annotations = github_annotations(result)
    if args.output:
        try:
            write_atomic(args.output, text)
        except OSError as exc:   # checked before the run, yet a disk fills (/dev/full)
            return f"cannot write the report to {args.output}: {exc.strerror or exc}"
        for line in annotations:
            print(line)
        s = result.summary
        from .report.text import one_line

        print(f"{s['passed']} passed, {s['failed']} failed, {s['errored']} errored, "
              f"{s['skipped']} skipped; report written to {one_line(args.output)}"
              + (f" (incomplete: interrupted by {result.interrupted})"
                 if result.incomplete else ""))
    else:
        sys.stdout.write(text)
        # keep a JSON/JUnit/Markdown document on stdout whole: the runner reads
        # workflow commands from stderr too
        stream = sys.stdout if args.format == "text" else sys.stderr
        for line in annotations:
            print(line, file=stream)
    return ""


def _no_cases(args) -> None:
    from .report.text import one_line

    where = ", ".join(map(one_line, args.paths))
    print("gradcheck: no cases selected: " + (
        f"no case name under {where} contains {one_line(args.keyword)!r}"
        if args.keyword else f"no cases under {where}"), file=sys.stderr)


def _cmd_list(args) -> int:
    from .cases import read_paths
    from .report.text import one_line, printable, split_lines  # texts from case files

    cases, errors = read_paths(args.paths)
    for c in cases:
        inputs = ", ".join(f"{s.name}{list(s.shape)}" for s in c.inputs)
        print(one_line(f"{c.where}: {c.name}  [{', '.join(c.dtypes)}]  ({inputs})  {c.expr}"))
        for line in split_lines(c.description or ""):
            print(f"    {one_line(line)}")
    for e in errors:
        print(f"error: {printable(e)}", file=sys.stderr)
    print(f"{len(cases)} cases" + (f", {len(errors)} invalid" if errors else ""))
    return ExitCode.USAGE if errors else ExitCode.OK


def _cmd_functions(args) -> int:
    from .rules.docs import markdown, text

    sys.stdout.write(markdown() if args.format == "markdown" else text())
    return ExitCode.OK


def _cmd_explain(args) -> int:
    from .explanation import command

    sys.stdout.write(command(args))
    return ExitCode.OK


def _cmd_cache(args) -> int:
    from . import kernelcache
    from .report.text import printable   # the folder's name comes from the environment

    where = printable(str(kernelcache.folder()))
    if args.clear:
        print(f"removed {kernelcache.clear()} cached kernels from {where}")
        return ExitCode.OK
    found = kernelcache.entries()
    size = 0
    for path in found:
        try:
            size += path.stat().st_size
        except OSError:   # removed meanwhile by another process
            pass
    print(where)
    print(f"{len(found)} kernels, {size / 1024:.1f} KiB"
          + ("" if kernelcache.enabled() else " (off: GRADCHECK_NO_CACHE is set)"))
    return ExitCode.OK


def _cmd_bench(args) -> int:
    from .bench import SECTIONS
    from .bench import main as bench_main

    wanted = args.section or list(SECTIONS)
    if (args.seeds is not None and args.seeds < 1) or args.jobs < 0:
        print("gradcheck: error: " + ("--jobs must be 0 or more" if args.jobs < 0 else
                                      "--seeds must be 1 or more"), file=sys.stderr)
        return ExitCode.USAGE
    measured = tuple(s for s in SECTIONS if s in wanted)
    if measured:
        code = bench_main(args.out, quick=args.quick, sections=measured)
        if code:
            return code
    if "verdicts" in wanted:
        from .bench.verdicts import DEFAULT_SEEDS, DTYPES, markdown, run_verdicts, save

        seeds = args.seeds or (1 if args.quick else DEFAULT_SEEDS)
        result = run_verdicts(args.cases, seeds=seeds, dtypes=args.dtype or DTYPES,
                              jobs=args.jobs,
                              progress=lambda msg: print(f"verdicts: {msg}",
                                                         file=sys.stderr, flush=True))
        sys.stdout.write(markdown(result))
        js, md = save(result, args.out)
        print(f"saved {js} and {md}")
    return ExitCode.OK


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``gradcheck`` command; returns the exit code."""
    from .errors import CaseFileError
    from .threads import one_thread_each

    one_thread_each()   # before NumPy loads: see gradcheck.threads

    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return ExitCode.USAGE
    try:
        commands = {"run": _cmd_run, "list": _cmd_list, "cache": _cmd_cache,
                    "bench": _cmd_bench, "functions": _cmd_functions,
                    "doctor": doctor_cli.command,
                    "explain": _cmd_explain}
        return int(commands[args.command](args))
    except CaseFileError as exc:
        from .report.text import printable

        print(f"gradcheck: error: {printable(exc)}", file=sys.stderr)
        return ExitCode.USAGE
    except KeyboardInterrupt as exc:   # 128 + the signal, as a shell counts it
        print("gradcheck: interrupted", file=sys.stderr)
        return getattr(exc, "exit_code", 130)
    except BrokenPipeError:   # the reader went away (| head): stop quietly, as on SIGPIPE
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + 13
    except Exception:
        import traceback

        from .report.text import printable   # the exception may quote case text

        print(printable(traceback.format_exc()), end="", file=sys.stderr)
        print("gradcheck: internal error (a bug in gradcheck; please report it)",
              file=sys.stderr)
        return ExitCode.INTERNAL
