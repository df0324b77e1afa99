"""Section (f), ``opchecks``: what each of an op case's newer checks costs, on the
bundled ops (``cases/ops/*.toml``).

The op cases run with every check, then with each of :data:`COSTED` switched off by
``skip_checks`` (``RunOptions.skip_checks``, as ``--skip-check`` does), side by side:
file by file, every configuration in turn (the first of them rotating from file to
file), so that a busy moment of the machine falls on them alike. Each run is
:func:`gradcheck.run` in this process, the op in its own process as always, the gradient
formulas not printed (as the text report without -v), SymPy's cache cleared first and
the kernel memo off (the whole bench's), so every configuration compiles what the
first did; one run of paths.toml at one point beforehand pays the imports every path
needs (torch.func, torch.library's opcheck), which no configuration is charged.

What is timed is each op case run's own seconds (its report's ``seconds``: references,
the op's process, every check), summed over the runs: a row per configuration, and for
each check switched off its share, (every check - without it) / every check, with what
it added to each case run (mean, median, the largest and where) in ``extra``.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from ...base.result import OP_CHECKS
from .config import BUNDLED, Config, Row

#: the checks whose cost is measured: those from op.jvp on, the paths through an op
#: beyond reverse mode (forward mode, vmap, the autograd contract, torch.library's
#: registration) and any check added after them
COSTED = tuple(f"op.{c}" for c in OP_CHECKS[OP_CHECKS.index("jvp"):])
#: every check on: the configuration the others are measured against
EVERY = "every op check"
#: the file whose cases, at one point, warm up the imports before anything is timed
WARM_UP = "paths.toml"


def _files(cfg: Config) -> list[Path]:
    folder = BUNDLED / "ops"
    return ([folder / f for f in cfg.op_files] if cfg.op_files
            else sorted(folder.glob("*.toml")))


def _shown(cfg: Config) -> str:
    files = ", ".join(f"cases/ops/{f}" for f in cfg.op_files) if cfg.op_files \
        else "cases/ops/*.toml"
    return (files + (f" -k {cfg.op_keyword}" if cfg.op_keyword else "")
            + (f" --dtype {cfg.op_dtype}" if cfg.op_dtype else ""))


def _run(path: Path, cfg: Config, skip: tuple[str, ...], **changes):
    import sympy

    from ...session.runner import RunOptions, run

    sympy.core.cache.clear_cache()
    options = RunOptions(keyword=cfg.op_keyword, dtype=cfg.op_dtype, skip_checks=skip,
                         formulas=False, timeout=cfg.cli_cap)
    return run([path], options, **changes)


def measure(cfg: Config) -> dict[str, dict]:
    """Each configuration (:data:`EVERY`, then each of :data:`COSTED`): ``wall`` (its
    runs' seconds) and ``cases`` (each op case run's seconds, by ``file/name[dtype]``)."""
    configs = {EVERY: (), **{name: (name,) for name in COSTED}}
    _run(_files(cfg)[0].with_name(WARM_UP), cfg, (), points=1, extreme_points=0)
    found = {name: {"wall": 0.0, "cases": {}} for name in configs}
    order = list(configs)
    for k, path in enumerate(_files(cfg)):
        for name in order[k % len(order):] + order[:k % len(order)]:
            start = time.perf_counter()
            result = _run(path, cfg, configs[name])
            found[name]["wall"] += time.perf_counter() - start
            found[name]["cases"].update(
                {f"{path.stem}/{c.name}[{c.dtype}]": c.seconds for c in result.cases
                 if c.mode == "op"})
    return found


def _added(every: dict, without: dict) -> dict:
    """What one check added to each case run, and its summaries."""
    added = {k: every[k] - without[k] for k in every if k in without}
    most = max(added, key=added.get) if added else ""
    return {"added_seconds": sum(added.values()),
            "added_mean": statistics.mean(added.values()) if added else 0.0,
            "added_median": statistics.median(added.values()) if added else 0.0,
            "most": {"case": most, "seconds": added.get(most, 0.0)},
            "added_per_case": added}


def opcost_rows(cfg: Config) -> list[Row]:
    found = measure(cfg)
    every = found[EVERY]
    total = sum(every["cases"].values())
    sizes = {"n": len(every["cases"]), "cases": len(every["cases"])}
    what = (f"the op case runs of {_shown(cfg)} ({len(every['cases'])}), each case's own "
            "seconds summed (references, the op's process, its checks); gradcheck.run in "
            "this process, the configurations in turns file by file")
    rows = [Row("opchecks", EVERY, sizes, total, what + "; every check", 1,
                extra={"skip_checks": [], "wall_seconds": every["wall"],
                       "per_case": every["cases"]})]
    for name in COSTED:
        without = found[name]
        seconds = sum(without["cases"].values())
        extra = _added(every["cases"], without["cases"])
        rows.append(Row(
            "opchecks", f"without {name}", sizes, seconds,
            what + f"; {name} switched off (skip_checks)", 1,
            ratio=extra["added_seconds"] / total if total else None,
            ratio_of=f"{name}'s share: (every check - without {name}) / every check, "
                     "in the op case runs' seconds",
            extra={"skip_checks": [name], "wall_seconds": without["wall"], **extra}))
    return rows


def opcost_notes(cfg: Config) -> list[str]:
    return [
        f"The op cases of {_shown(cfg)} with every check, then with each of "
        f"{', '.join(COSTED)} switched off by skip_checks (as --skip-check does), in "
        "this process (gradcheck.run: the op in its own process), the configurations "
        "in turns file by file, one run each; SymPy's cache cleared before each run and "
        "the kernel memo off, so each compiles the same; paths.toml's cases at one "
        "point first, untimed, for the imports every path needs.",
        "Seconds: the op case runs' own (each report's seconds), summed. A check's added "
        "cost: every check's seconds less its configuration's, per case run (a check "
        "that did not apply to a case adds only noise there: one run each, under the "
        "load the machine had); its share: the sum of them over every check's.",
    ]
