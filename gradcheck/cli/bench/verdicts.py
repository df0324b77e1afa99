"""``gradcheck bench --section verdicts``: does gradcheck say the right thing about the
bundled cases, seed after seed and dtype after dtype, and what does
``torch.autograd.gradcheck`` say about the same ops?

Two parts, both data (rendering is :func:`markdown`'s, printing the CLI's):

- the **sweep**: every case under the paths (default the bundled ``cases/``) for seeds
  0..N-1 in each dtype, through :func:`gradcheck.run` (the one definition of a run),
  tallied per dtype. A *false alarm* is a case meant to pass (``expect = "pass"``) that
  failed or errored; a *miss* is a case meant to be wrong (``expect = "fail"``) that was
  not caught (status failed: a caught one reports passed). A skipped result (every
  witness skipped in the dtype, a cuda case here) is counted as skipped, never as a pass.
- the **table**: for every case with an ``op``, gradcheck's verdict per dtype at seed 0
  next to ``torch.autograd.gradcheck``'s on the same op at the same first point: float64
  with its default settings, float32 with eps 1e-3, atol 1e-3, rtol 1e-2 (a float32
  step and tolerances a user would pick; the defaults are float64's).
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from ...base.dtypes import NAMES
from .config import BUNDLED
from .render import cell, environment_line

VERSION = 1
DEFAULT_SEEDS = 20
DEFAULT_JOBS = 2
MESSAGE_CHARS = 200

#: torch.autograd.gradcheck's settings per dtype it is asked in: float64 as it comes,
#: float32 with a step and tolerances sized for float32 (its defaults, eps 1e-6 and
#: atol 1e-5, are below float32's rounding of a central difference).
TORCH_SETTINGS = {"float64": {}, "float32": {"eps": 1e-3, "atol": 1e-3, "rtol": 1e-2}}


# (BUNDLED, where the bundled cases live, is config's: cache.py reads it here too)
def _bundled() -> Path:
    # relative to the working folder where it lies below it: the report's file names
    # then read as `gradcheck run` prints them
    here = Path.cwd().resolve()
    return BUNDLED.relative_to(here) if BUNDLED.is_relative_to(here) else BUNDLED


# What one run's result is, for this sweep.
PASSED, FALSE_ALARM, MISSED, SKIPPED, ERRORED = (
    "passed", "false alarm", "missed", "skipped", "errored")


@dataclass(frozen=True)
class Count:
    """One dtype's tally over every seed. ``false_alarms``: right cases that failed or
    errored; ``missed``: wrong cases not caught; ``errored``: every run with status
    error, whatever the case meant (a right case's error is a false alarm as well), so
    runs = passed + skipped + false_alarms + missed + the wrong cases' errors;
    ``approximate``: the passed runs that were approximate (a float64 run within
    float32's tolerance only: exit 0, no false alarm)."""

    dtype: str
    runs: int = 0
    passed: int = 0
    false_alarms: int = 0
    missed: int = 0
    skipped: int = 0
    errored: int = 0
    approximate: int = 0


@dataclass(frozen=True)
class Finding:
    """One run that went wrong: a false alarm, a miss, or a wrong case that errored."""

    kind: str           # FALSE_ALARM, MISSED or ERRORED
    seed: int
    dtype: str
    case: str
    file: str
    status: str
    error_kind: str
    message: str        # the first failing witness's message, MESSAGE_CHARS at most


@dataclass(frozen=True)
class TableRow:
    """One op case: what it is meant to be, gradcheck's cell per dtype (seed 0) and
    torch.autograd.gradcheck's in float64 and float32."""

    case: str
    file: str
    op: str
    meant: str                      # "right" or "wrong" (expect = "fail")
    gradcheck: dict[str, str]       # dtype -> cell
    torch: dict[str, str]           # "float64"/"float32" -> cell
    torch_messages: dict[str, str] = field(default_factory=dict)  # why, where not passed
    order: int = 1
    strict_shapes: bool = False     # wrong only by strict_shapes' rules, not autograd's


@dataclass
class Verdicts:
    paths: list[str]
    seeds: list[int]
    dtypes: list[str]
    jobs: int
    counts: list[Count]
    findings: list[Finding]
    table: list[TableRow]
    environment: dict
    seconds: float = 0.0
    seconds_per_sweep: dict = field(default_factory=dict)   # "seed/dtype" -> seconds
    # digests of gradcheck's sources and the case files when the run began and ended:
    # each (seed, dtype) run starts fresh workers, so code edited meanwhile would mix
    sources: dict = field(default_factory=dict)             # "start"/"end" -> sha256


# --------------------------------------------------------------------------- the sweep

def sources_digest(paths: Iterable[str | Path]) -> str:
    """sha256 over gradcheck's own ``.py`` files and every file under ``paths``."""
    import hashlib

    files = sorted(Path(__file__).resolve().parents[2].rglob("*.py"))
    for p in map(Path, paths):
        files += sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
    h = hashlib.sha256()
    for f in files:
        if "__pycache__" in f.parts:
            continue
        h.update(str(f).encode() + b"\0")
        with contextlib.suppress(OSError):   # a file removed meanwhile
            h.update(f.read_bytes())
    return h.hexdigest()


def outcome(result, listed: frozenset | None = None) -> str:
    """What one :class:`~gradcheck.base.result.CaseResult` is for this sweep. ``listed``: the
    dtypes the case's own file lists. A wrong case is meant to be caught there only:
    elsewhere its bug may be below the dtype's resolution (a constant off by 7e-5 in
    float16) or beyond its range, so a miss there counts as skipped."""
    if result.status == "skipped":
        return SKIPPED
    if result.expect == "fail" and listed is not None and result.dtype not in listed:
        return PASSED if result.status == "passed" else SKIPPED
    if result.expect == "fail":
        if result.status == "failed":
            return MISSED
        return ERRORED if result.status == "error" else PASSED
    # (approximate: within float32's tolerance in float64, which exits 0: a pass)
    return FALSE_ALARM if result.status in ("failed", "error") else PASSED


def failing_message(result) -> str:
    """The first failing (or erroring) witness's message and diagnosis, on one line,
    cut to :data:`MESSAGE_CHARS`; the case's own message when no witness failed (an op
    that raised, a case-file error, a wrong case every witness agreed with)."""
    text = result.message
    for w in result.witnesses:
        if w.status in ("failed", "error"):
            text = f"{w.witness}: {w.message}" + (f" ({w.diagnosis})" if w.diagnosis
                                                  else "")
            break
    return " ".join(text.split())[:MESSAGE_CHARS]


def tally(dtype: str, results: Iterable, listed: dict | None = None) -> Count:
    listed = listed or {}
    kinds = [(outcome(r, listed.get((r.file, r.name))), r.status) for r in results]
    return Count(dtype, runs=len(kinds),
                 passed=sum(k == PASSED for k, _ in kinds),
                 false_alarms=sum(k == FALSE_ALARM for k, _ in kinds),
                 missed=sum(k == MISSED for k, _ in kinds),
                 skipped=sum(k == SKIPPED for k, _ in kinds),
                 errored=sum(s == "error" for _, s in kinds),
                 approximate=sum(k == PASSED and s == "approximate" for k, s in kinds))


def findings(seed: int, results: Iterable, listed: dict | None = None) -> list[Finding]:
    listed = listed or {}
    return [Finding(k, seed, r.dtype, r.name, r.file, r.status, r.error_kind,
                    failing_message(r))
            for r in results
            if (k := outcome(r, listed.get((r.file, r.name)))) in (FALSE_ALARM, MISSED,
                                                                    ERRORED)]


# --------------------------------------------------------------------------- the table

def gradcheck_cell(meant: str, result) -> str:
    """gradcheck's verdict on one op case in one dtype, as the table shows it."""
    if result is None:
        return "-"
    if result.status == "skipped":
        return "skipped"
    if result.status == "error":
        why = f"error: {result.error_kind or 'unknown'}"
        return f"FALSE ALARM ({why})" if meant == "right" else why
    if meant == "wrong":
        return "caught" if result.status == "passed" else "missed"
    if result.status == "approximate":
        return "pass (approximate)"
    return "pass" if result.status == "passed" else "FALSE ALARM"


def torch_verdict(case, dtype: str) -> tuple[str, str]:
    """torch.autograd.gradcheck (and for an ``order = 2`` case gradgradcheck too) on the
    case's op at its first point in ``dtype``, with :data:`TORCH_SETTINGS`:
    ``("passed" | "mismatch" | "n/a" | "error: <type>", message)``. The op runs in a
    process of its own, as in every check (:mod:`gradcheck.checking.opcheck.process`; there
    :func:`gradcheck.checking.opcheck.calls.torch_gradcheck`): the bench never imports it."""
    from ...checking.opcheck.process import OpProcess, OpRaised
    from ...sampling.points import case_points

    # a nondeterministic op declares how far its backward may differ from itself; a user
    # of torch's checker would pass the same (its tolerances stay the defaults)
    settings = dict(TORCH_SETTINGS[dtype], nondet_tol=case.nondet_tol)
    try:
        with OpProcess(case, dtype) as op:
            if op.info.get("engine"):
                return "n/a", "a gradcheck.engine Function runs on NumPy, not on torch tensors"
            point = next(iter(case_points(case, dtype)))
            got = op.call("torch_gradcheck", point=point.values, settings=settings,
                          order=case.order, chars=MESSAGE_CHARS)
    except OpRaised as exc:   # the op's process died, or sent no verdict
        return "error: OpRaised", _first_line(exc)
    except Exception as exc:   # an op that cannot be imported: say so in its cell
        return f"error: {type(exc).__name__}", _first_line(exc)
    verdict, message = got.get("verdict"), got.get("message")
    if not (isinstance(verdict, str) and isinstance(message, str)):
        return "error: OpRaised", "the op's process sent a malformed verdict"
    return verdict, message


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines() or [""]
    return lines[0][:MESSAGE_CHARS]


def torch_cell(meant: str, verdict: str) -> str:
    if verdict == "passed":
        return "missed" if meant == "wrong" else "pass"
    if verdict == "mismatch":
        return "caught" if meant == "wrong" else "FALSE ALARM"
    return verdict   # "n/a", "error: <type>"


def op_table(cases: list, first: dict, dtypes: Iterable[str]) -> list[TableRow]:
    """One :class:`TableRow` per op case; ``first``: seed 0's results by
    ``(file, name, dtype)``."""
    from ...session.runner import RunOptions, override

    rows = []
    for case in cases:
        if case.op is None:
            continue
        case = override(case, RunOptions(seed=0))   # the sweep's seed 0: the same first point
        meant = "wrong" if case.expect == "fail" else "right"
        torch_cells, messages = {}, {}
        for dtype in TORCH_SETTINGS:
            verdict, message = torch_verdict(case, dtype)
            torch_cells[dtype] = torch_cell(meant, verdict)
            if message:
                messages[dtype] = message
        rows.append(TableRow(
            case.name, case.file, case.op, meant,
            {d: gradcheck_cell(meant, first.get((case.file, case.name, d)))
             for d in dtypes}, torch_cells, messages, case.order, case.strict_shapes))
    return rows


# --------------------------------------------------------------------------- running

def run_verdicts(paths: Iterable[str | Path] | None = None, *, seeds: int = DEFAULT_SEEDS,
                 dtypes: Iterable[str] = NAMES, jobs: int = DEFAULT_JOBS,
                 progress: Callable[[str], None] | None = None) -> Verdicts:
    """Sweep ``paths`` (default the bundled cases) over seeds 0..``seeds``-1 in each of
    ``dtypes``, then build the op table. Nothing is printed here: ``progress`` gets one
    message per (seed, dtype) sweep and one for the table."""
    from ...cases import read_paths
    from ...session.runner import run
    from .notes import environment

    say = progress or (lambda _msg: None)
    paths = [str(p) for p in (paths or [_bundled()])]
    dtypes = list(dtypes)
    start = time.perf_counter()
    digest = sources_digest(paths)
    by_dtype: dict[str, list] = {d: [] for d in dtypes}
    found: list[Finding] = []
    first: dict = {}
    per_sweep: dict[str, float] = {}
    total = seeds * len(dtypes)
    k = 0
    cases, _ = read_paths(paths)   # the file errors are in the sweep's results already
    listed = {(c.file, c.name): frozenset(c.dtypes) for c in cases}
    for seed in range(seeds):
        for dtype in dtypes:
            k += 1
            t0 = time.perf_counter()
            results = run(paths, seed=seed, dtype=dtype, jobs=jobs).cases
            per_sweep[f"{seed}/{dtype}"] = time.perf_counter() - t0
            by_dtype[dtype] += results
            found += findings(seed, results, listed)
            if seed == 0:
                first.update({(r.file, r.name, dtype): r for r in results})
            c = tally(dtype, results, listed)
            say(f"[{k}/{total}] seed {seed} {dtype}: {c.runs} runs, {c.passed} passed "
                f"({c.approximate} approximate), {c.false_alarms} false alarms, {c.missed} missed, {c.skipped} skipped, "
                f"{c.errored} errored ({per_sweep[f'{seed}/{dtype}']:.1f} s)")
    t0 = time.perf_counter()
    table = op_table(cases, first, dtypes)
    say(f"table: {len(table)} op cases against torch.autograd.gradcheck "
        f"({time.perf_counter() - t0:.1f} s)")
    return Verdicts(paths, list(range(seeds)), dtypes, jobs,
                    [tally(d, by_dtype[d], listed) for d in dtypes], found, table,
                    environment(),
                    time.perf_counter() - start, per_sweep,
                    {"start": digest, "end": sources_digest(paths)})


# --------------------------------------------------------------------------- output

def to_json(v: Verdicts) -> dict:
    return {"version": VERSION, "paths": v.paths, "seeds": v.seeds, "dtypes": v.dtypes,
            "jobs": v.jobs, "seconds": v.seconds, "environment": v.environment,
            "torch_settings": TORCH_SETTINGS,
            "counts": [asdict(c) for c in v.counts],
            "total": asdict(_total(v.counts)),
            "findings": [asdict(f) for f in v.findings],
            "table": [asdict(r) for r in v.table],
            "seconds_per_sweep": v.seconds_per_sweep, "sources": v.sources}


def _total(counts: list[Count]) -> Count:
    return Count("all", *(sum(getattr(c, f) for c in counts) for f in
                          ("runs", "passed", "false_alarms", "missed", "skipped",
                           "errored", "approximate")))


def _seeds(seeds: list[int]) -> str:
    return f"seed {seeds[0]}" if len(seeds) == 1 else f"seeds {seeds[0]}..{seeds[-1]}"


def _settings(dtype: str) -> str:
    s = TORCH_SETTINGS[dtype]
    return ", ".join(f"{k} {v:g}" for k, v in s.items()) if s else "default settings"


def _header(v: Verdicts) -> list[str]:
    return ["# gradcheck bench: verdicts", "",
            environment_line(v.environment) + ". Cases: "
            f"{', '.join(v.paths)}; {_seeds(v.seeds)} ({len(v.seeds)}), "
            f"{', '.join(v.dtypes)}; {v.jobs} jobs. Total {v.seconds:.0f} s."
            + (" **gradcheck's sources or the case files changed during the run**: its "
               "runs may mix versions." if v.sources.get("start") != v.sources.get("end")
               else ""), ""]


def _counts(v: Verdicts) -> list[str]:
    out = [f"## Verdicts over {len(v.seeds)} seed" + ("s" if len(v.seeds) > 1 else ""), "",
           "- Every case under the paths, run with `--seed S --dtype D` for each seed and "
           "dtype (the case's own dtypes list is overridden).",
           "- False alarm: a case meant to pass (expect = \"pass\") that failed or "
           "errored. Missed: a case meant to be wrong (expect = \"fail\") that was not "
           "caught, in a dtype its file lists (elsewhere its bug may be below the "
           "dtype's resolution or beyond its range: a miss there counts as skipped). "
           "Skipped (every witness skipped in the dtype, an engine op in half precision, "
           "an absent device): counted apart, never as a pass. Errored: every run with "
           "status error; a right case's error is a false alarm too. Approximate: the "
           "passed runs of right cases that were approximate (float64 beyond its "
           "tolerance, within float32's: exit 0).", "",
           "| dtype | runs | passed | approximate | false alarms | missed | skipped | "
           "errored |",
           "|---|---|---|---|---|---|---|---|"]
    for c in v.counts + [_total(v.counts)]:
        out.append(f"| {c.dtype} | {c.runs} | {c.passed} | {c.approximate} | "
                   f"{c.false_alarms} | {c.missed} | {c.skipped} | {c.errored} |")
    return out


def _findings(v: Verdicts) -> list[str]:
    out = ["", "### False alarms and misses", ""]
    if not v.findings:
        return out + ["None.", ""]
    out += ["Runs of one case in one dtype that went the same way are one row (the "
            "message is the first seed's; the JSON lists each run).", "",
            "| what | dtype | case | file | seeds | status | message |",
            "|---|---|---|---|---|---|---|"]
    groups: dict[tuple, list[Finding]] = {}
    for f in v.findings:
        groups.setdefault((f.kind, f.dtype, f.case, f.file, f.status, f.error_kind),
                          []).append(f)
    for (kind, dtype, case, file, status, error_kind), fs in groups.items():
        status += f" ({error_kind})" if error_kind else ""
        out.append("| " + " | ".join(cell(c) for c in (
            kind, dtype, case, file, ", ".join(str(f.seed) for f in fs), status,
            fs[0].message)) + " |")
    out.append("")
    return out


def _op_table(v: Verdicts) -> list[str]:
    out = ["## Op cases: gradcheck against torch.autograd.gradcheck", "",
           "- gradcheck: its verdict at seed 0 in each dtype (the sweep's first run). "
           "torch: torch.autograd.gradcheck on the same op at the same first point "
           "(that dtype's point 0 of seed 0), float64 with "
           f"{_settings('float64')}, float32 with {_settings('float32')}; for an order-2 "
           "case gradgradcheck as well (marked ²). n/a: a gradcheck.engine Function, "
           "which torch cannot call.",
           "- A cell says caught or missed for an op meant to be wrong, pass (pass "
           "(approximate): within float32's tolerance only, in float64) or FALSE "
           "ALARM for a right one. Meant wrong (strict_shapes): wrong by the case's "
           "strict_shapes rules only; autograd accepts what its backward returns.", ""]
    heads = [f"gradcheck {d}" if i == 0 else d for i, d in enumerate(v.dtypes)]
    out += ["| " + " | ".join(["case", "meant", *heads, "torch f64", "torch f32"]) + " |",
            "|" + "---|" * (4 + len(v.dtypes))]
    for r in v.table:
        mark = "²" if r.order == 2 else ""
        out.append("| " + " | ".join(cell(c) for c in (
            r.case, r.meant + (" (strict_shapes)" if r.strict_shapes else ""),
            *(r.gradcheck[d] for d in v.dtypes),
            r.torch["float64"] + mark, r.torch["float32"] + mark)) + " |")
    # why torch raised where it should not have (a right op) or raised other than a
    # mismatch; a wrong op's mismatch is what the cell says already (the JSON keeps it)
    why = [(r, d) for r in v.table for d in r.torch_messages
           if r.torch[d] == "FALSE ALARM" or r.torch[d].startswith("error")]
    if why:
        out += ["", "torch.autograd.gradcheck's messages for its false alarms and errors:",
                ""]
        out += [f"- {cell(r.case)}, {d}: {cell(r.torch_messages[d])}" for r, d in why]
    out.append("")
    return out


def markdown(v: Verdicts) -> str:
    """The sweep's report: the counts per dtype, every false alarm and miss, the op
    table beside torch.autograd.gradcheck."""
    return "\n".join(_header(v) + _counts(v) + _findings(v) + _op_table(v))


def save(v: Verdicts, out_dir: str | Path = "reports") -> tuple[Path, Path]:
    """Write ``verdicts.json`` and ``verdicts.md`` (what :func:`markdown` renders) in
    ``out_dir``; their paths."""
    from ...base.io import write_atomic

    js, md = Path(out_dir) / "verdicts.json", Path(out_dir) / "verdicts.md"
    write_atomic(js, json.dumps(to_json(v), indent=2, ensure_ascii=False) + "\n")
    write_atomic(md, markdown(v))
    return js, md
