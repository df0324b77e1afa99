"""``gradcheck doctor MODULE:FACTORY``: its arguments and its run (kept out of cli.py;
torch is imported only when the command runs, so ``--help`` stays instant)."""

from __future__ import annotations

import argparse

from ..project.op_patterns import argument as _pattern

HEALTHY, FINDINGS = 0, 1   # the exit codes; 2 (a factory error) is cli.main's


def add_parser(sub) -> None:
    p = sub.add_parser(
        "doctor", help="diagnose a training setup's wiring",
        description="Run a model's loss forward and backward (and its training step "
                    "twice) and report what is wired wrong: a parameter cut from the "
                    "graph or frozen by mistake, a zero, non-finite or accumulating "
                    "gradient, a loss broadcasting [N, 1] against [N], a loss without a "
                    "graph, a target that requires grad. Exit codes: 0 healthy, 1 "
                    "findings, 2 a factory that cannot be loaded or run.")
    _arguments(p)


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("factory", metavar="MODULE:FACTORY",
                   help="a function of a project file returning a dict: model, loss_fn, "
                        "batch, and optionally optimizer, train_step, frozen")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--allow-op-module", action="append", default=[], metavar="PATTERN",
                   type=_pattern,
                   help="an installed module the factory may come from (fnmatch "
                        "pattern; by default only files of the project; one that admits "
                        "the standard library, such as * or os, is refused)")


def command(args) -> int:
    from ..health.apart import run
    from ..health.render import text, to_json

    # the factory runs in a process of its own, its output captured (health/apart.py)
    report, output = run(args.factory, tuple(args.allow_op_module))
    print((to_json if args.format == "json" else text)(report, output), end="")
    return HEALTHY if report.healthy else FINDINGS
