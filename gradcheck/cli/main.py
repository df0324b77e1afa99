"""The command line: argparse wiring only. Heavy modules (torch, SymPy) are imported by
the commands that need them, so ``--help`` stays instant."""

from __future__ import annotations

import argparse
import os
import sys

from . import doctor as doctor_cli, init as init_cli, run as run_command
from . import tracing as trace_cli
from .exit_codes import ExitCode


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose errors name the option or choice meant (each command's
    parser is one too: ``add_subparsers`` makes its parsers of the parent's class)."""

    def error(self, message: str):
        import re

        from ..base.spelling import did_you_mean

        choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
        if choice:
            message += did_you_mean(choice.group(1), re.findall(r"'([^']*)'",
                                                                choice.group(2)))
        super().error(message)

    def unrecognized(self, args: argparse.Namespace, extra: list[str]):
        """Exit as ``parse_args`` does for ``extra``, with the closest option of the
        command given (``--seeed``: ``--seed``)."""
        from ..base.spelling import did_you_mean

        commands = [a for a in self._actions if isinstance(a, argparse._SubParsersAction)]
        command = commands[0].choices.get(getattr(args, "command", None)) if commands \
            else None
        known = [o for a in (command or self)._actions for o in a.option_strings]
        first = next((e.partition("=")[0] for e in extra if e.startswith("-")), None)
        hint = did_you_mean(first, known) if first else ""
        self.error(f"unrecognized arguments: {' '.join(extra)}{hint}")


def _parser() -> argparse.ArgumentParser:
    from ..base import __version__
    from ..base.dtypes import NAMES as DTYPES

    p = _Parser(
        prog="gradcheck",
        description="Check gradients against the exact symbolic derivative.")
    p.add_argument("--version", action="version", version=f"gradcheck {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    run_command.add_parser(sub, DTYPES)
    ls = sub.add_parser("list", help="list the cases without running them")
    ls.add_argument("paths", nargs="+", metavar="PATH")
    fns = sub.add_parser(
        "functions", help="list the functions of the expression language",
        description="Every function and operator a formula may use: how it is called, "
                    "an example, PyTorch's grad_fn name for it and what it computes.")
    fns.add_argument("--format", choices=("text", "markdown"), default="text")
    fns.add_argument("--aten", action="store_true",
                     help="list the ATen ops a traced function may use instead "
                          "(reference_function, expr_function, gradcheck trace)")
    from ..explanation import arguments as explain_arguments

    explain_arguments(sub.add_parser(
        "explain", help="explain what autograd computes for a formula",
        description="Exact gradient formulas, PyTorch's grad_fn graph beside the engine's, "
                    "backward(v), the Jacobian when small, and every .grad (and why one "
                    "is None), at one sampled point."))
    cache = sub.add_parser(
        "cache", help="show or remove the files an older gradcheck's kernel cache left",
        description="gradcheck keeps compiled reference kernels in each process's memory "
                    "only: it never reads kernels from the disk (a file there could be "
                    "written by an op under test, and would run as code). gradcheck "
                    "0.1.0 stored them under $GRADCHECK_CACHE_DIR, else "
                    "$XDG_CACHE_HOME/gradcheck, else ~/.cache/gradcheck; this shows "
                    "how many such files are left there, and --clear removes them.")
    cache.add_argument("--clear", action="store_true",
                       help="remove the old cache's files (never read)")
    _bench_arguments(sub.add_parser(
        "bench", help="measure gradcheck against other checkers",
        description="Run fixed workloads side by side and save reports/bench.json and "
                    "reports/bench.md."), DTYPES)
    doctor_cli.add_parser(sub)
    trace_cli.add_parser(sub)
    init_cli.add_parser(sub)
    return p


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
                                "opchecks", "speed", "verdicts", "sweep"],
                       help="only this section (repeatable): checkers, memory, compile, "
                            "engine, tensor, opchecks (each newer op check's cost on the "
                            "bundled ops), speed (one point at every element against "
                            "fast_mode; the default is these seven), verdicts (every "
                            "case under --cases over --seeds seeds in every --dtype, and "
                            "the op cases against torch.autograd.gradcheck; saved as "
                            "verdicts.json and verdicts.md), or sweep (--formulas random "
                            "layer-like formulas, right by construction, in every dtype: "
                            "false alarms counted; saved as sweep.json and sweep.md)")
    bench.add_argument("--seeds", type=int, metavar="N",
                       help="verdicts: seeds 0..N-1 (default 20; 1 with --quick)")
    bench.add_argument("--dtype", action="append", choices=dtypes,
                       help="verdicts: only this dtype (repeatable; default all four)")
    bench.add_argument("--cases", action="append", metavar="PATH",
                       help="verdicts: these case files or folders (repeatable; default "
                            "the bundled cases/)")
    bench.add_argument("-j", "--jobs", type=int, default=2, metavar="N",
                       help="verdicts, sweep: worker processes per run (default 2; 0: "
                            "one per CPU)")
    bench.add_argument("--formulas", type=int, metavar="N",
                       help="sweep: this many formulas (default 570: 1,520 runs; 60 "
                            "with --quick)")


def _cmd_list(args) -> int:
    from ..cases import read_paths
    from ..report.text import one_line, printable, split_lines  # texts from case files

    cases, errors = read_paths(args.paths)
    for c in cases:
        inputs = ", ".join(f"{s.name}{list(s.complex_shape)}"
                           + (" complex" if s.complex else "") for s in c.inputs)
        print(one_line(f"{c.where}: {c.name}  [{', '.join(c.dtypes)}]  ({inputs})  {c.expr}"))
        for line in split_lines(c.description or ""):
            print(f"    {one_line(line)}")
    for e in errors:
        print(f"error: {printable(e)}", file=sys.stderr)
    print(f"{len(cases)} cases" + (f", {len(errors)} invalid" if errors else ""))
    return ExitCode.USAGE if errors else ExitCode.OK


def _cmd_functions(args) -> int:
    from ..formula.docs import markdown, text

    if args.aten:
        sys.stdout.write(trace_cli.aten_table())
        return ExitCode.OK
    sys.stdout.write(markdown() if args.format == "markdown" else text())
    return ExitCode.OK


def _cmd_explain(args) -> int:
    from ..explanation import command

    sys.stdout.write(command(args))
    return ExitCode.OK


def _cmd_cache(args) -> int:
    from ..reference import kernelcache
    from ..report.text import printable   # the folder's name comes from the environment

    where = printable(str(kernelcache.old_folder()))
    if args.clear:
        print(f"removed {kernelcache.remove_old()} old cached kernels from {where}")
        return ExitCode.OK
    found = kernelcache.old_entries()
    print("compiled kernels are kept in each process's memory only; nothing is read "
          "from the disk")
    print(f"{len(found)} files of an older gradcheck's disk cache in {where}"
          + (" (never read; gradcheck cache --clear removes them)" if found else ""))
    return ExitCode.OK


def _cmd_bench(args) -> int:
    from .bench import SECTIONS
    from .bench import main as bench_main

    from ..process.limits import jobs_problem

    wanted = args.section or list(SECTIONS)
    problem = ("--" + jobs_problem(args.jobs) if jobs_problem(args.jobs) else
               "--seeds must be 1 or more" if args.seeds is not None and args.seeds < 1
               else "")
    if problem:
        print(f"gradcheck: error: {problem}", file=sys.stderr)
        return ExitCode.USAGE
    confined = _bench_out_problem(args.out)
    if confined:
        print(f"gradcheck: error: --out {confined}", file=sys.stderr)
        return ExitCode.USAGE
    measured = tuple(s for s in SECTIONS if s in wanted)
    if measured:
        code = bench_main(args.out, quick=args.quick, sections=measured)
        if code:
            return code
    if "verdicts" in wanted:
        from ..base.dtypes import NAMES
        from .bench.verdicts import DEFAULT_SEEDS, markdown, run_verdicts, save

        seeds = args.seeds or (1 if args.quick else DEFAULT_SEEDS)
        result = run_verdicts(args.cases, seeds=seeds, dtypes=args.dtype or NAMES,
                              jobs=args.jobs,
                              progress=lambda msg: print(f"verdicts: {msg}",
                                                         file=sys.stderr, flush=True))
        sys.stdout.write(markdown(result))
        js, md = save(result, args.out)
        print(f"saved {js} and {md}")
    if "sweep" in wanted:
        from .bench import sweep

        n = args.formulas or (60 if args.quick else sweep.DEFAULT_FORMULAS)
        found = sweep.run_sweep(n, jobs=args.jobs, progress=sweep.progress_line(
            lambda msg: print(f"sweep: {msg}", file=sys.stderr, flush=True)))
        sys.stdout.write(sweep.markdown(found))
        js, md = sweep.save(found, args.out)
        print(f"saved {js} and {md}")
    return ExitCode.OK


_TOO_DEEP = ("an argument nests too deeply to be read (RecursionError: Python's "
             "recursion limit was reached): write it with fewer nested brackets or "
             "parentheses")


# what the bench writes in --out: each judged, as a link there could lead elsewhere
BENCH_FILES = ("bench.json", "bench.md", "verdicts.json", "verdicts.md", "sweep.json",
               "sweep.md")


def _bench_out_problem(out: str) -> str:
    """Why the bench may not write in the folder ``out`` ("" when it may): it and each
    of its files resolve inside the project, outside .git/ and .github/."""
    from pathlib import Path

    from ..project.confine import write_problem
    from ..project.settings import project_root
    from ..report.text import one_line

    root = project_root()
    for path in (Path(out), *(Path(out) / name for name in BENCH_FILES)):
        problem = write_problem(path, root)
        if problem:
            return one_line(problem)
    return ""


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``gradcheck`` command; returns the exit code."""
    from ..base.errors import CaseFileError
    from ..process.threads import one_thread_each

    one_thread_each()   # before NumPy loads: see gradcheck.process.threads

    parser = _parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:
            parser.unrecognized(args, extra)
    except RecursionError:   # an argument's own parser recursed on a deep nesting
        print(f"gradcheck: error: {_TOO_DEEP}", file=sys.stderr)
        return ExitCode.USAGE
    if args.command is None:
        parser.print_help()
        return ExitCode.USAGE
    try:
        commands = {"run": run_command.command, "list": _cmd_list, "cache": _cmd_cache,
                    "bench": _cmd_bench, "functions": _cmd_functions,
                    "doctor": doctor_cli.command, "init": init_cli.command,
                    "explain": _cmd_explain, "trace": trace_cli.command}
        return int(commands[args.command](args))
    except CaseFileError as exc:
        from ..report.text import printable

        print(f"gradcheck: error: {printable(exc)}", file=sys.stderr)
        return ExitCode.USAGE
    except RecursionError:
        # a case's own RecursionError is that case's error (gradcheck.process.budgets.exhausted);
        # one that reaches here came from reading an argument or a settings file
        print(f"gradcheck: error: {_TOO_DEEP}", file=sys.stderr)
        return ExitCode.USAGE
    except KeyboardInterrupt as exc:   # 128 + the signal, as a shell counts it
        print("gradcheck: interrupted", file=sys.stderr)
        return getattr(exc, "exit_code", ExitCode.SIGINT)
    except BrokenPipeError:   # the reader went away (| head): stop quietly, as on SIGPIPE
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + 13
    except Exception:
        import traceback

        from ..report.text import printable   # the exception may quote case text

        print(printable(traceback.format_exc()), end="", file=sys.stderr)
        print("gradcheck: internal error (a bug in gradcheck; please report it)",
              file=sys.stderr)
        return ExitCode.INTERNAL
