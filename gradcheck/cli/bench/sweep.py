"""``gradcheck bench --section sweep``: random layer-like formulas, right by construction
(every witness is PyTorch's or gradcheck's own correct code), run as a new user would
(default settings) in every dtype. Any failed or errored run is a false alarm.

The generator is this module's own, apart from the Hypothesis strategies of
:mod:`gradcheck.strategies` (which draw over every row of the table): it draws the
formulas layers are made of (linear layers, two-layer MLPs with activations, layer norms,
attention, elementwise products, bilinear forms), optionally passed through a cube, a
Gaussian bump, a softplus written out, a clamp or another activation, and reduced by sum,
mean, max, sort, cumsum, std, var, norm or logsumexp (or checked with ``backward(v)``).
Each formula runs in float64 and float32; every third also in bfloat16 and float16.

Data only (:func:`run_sweep`); :func:`markdown` renders, :func:`save` writes.
"""

from __future__ import annotations

import json
import random
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from ...base.dtypes import NAMES

VERSION = 1
DEFAULT_FORMULAS = 570
DEFAULT_SEED = 0
MESSAGE_CHARS = 300

ACTIVATIONS = ("tanh", "relu", "gelu", "silu", "mish", "elu", "leaky_relu", "erf",
               "sigmoid", "softplus", "abs", "cos", "sin")
DOMAINS = (None, None, [-0.5, 0.5], "positive")


def _act(rng: random.Random, inner: str) -> str:
    name = rng.choice(ACTIVATIONS)
    if name == "gelu" and rng.random() < 0.3:
        return f"gelu({inner}, approximate='tanh')"
    return f"{name}({inner})"


def _shape(rng: random.Random, choices) -> int:
    return rng.choice(choices)


def _body(rng: random.Random, inputs: dict) -> tuple[str, int]:
    """A layer's output (a matrix [B, N], or a vector [n]) and its rank."""
    kind = rng.choice(("linear", "mlp", "layernorm", "attention", "product", "bilinear"))
    dom = rng.choice(DOMAINS)

    def add(name, shape, domain=None):
        spec = {"shape": shape}
        if domain is not None:
            spec["domain"] = domain
        inputs[name] = spec

    B, D, N = (_shape(rng, (2, 3, 4, 8, 32)), _shape(rng, (4, 8, 16, 64)),
               _shape(rng, (5, 8, 16, 32)))
    if kind == "linear":
        add("x", [B, D], dom), add("W", [D, N]), add("b", [N])
        return "x @ W + b", 2
    if kind == "mlp":
        add("x", [B, D], dom), add("W", [D, N]), add("b", [N]), add("V", [N, D])
        return f"{_act(rng, 'x @ W + b')} @ V", 2
    if kind == "layernorm":
        add("x", [B, D], dom), add("w", [D]), add("b", [D])
        return ("(x - mean(x, axis=-1, keepdims=True)) / sqrt(var(x, axis=-1, "
                "correction=0, keepdims=True) + 0.00001) * w + b"), 2
    if kind == "attention":
        L = _shape(rng, (4, 8, 16))
        for name in "qkv":
            add(name, [L, D], dom)
        return "softmax(q @ transpose(k) / 8, axis=-1) @ v", 2
    if kind == "product":
        n = _shape(rng, (24, 96, 512, 2048))
        add("x", [n], dom), add("y", [n], rng.choice(DOMAINS))
        return f"{_act(rng, 'x')} * {_act(rng, 'y')}", 1
    add("x", [B, D], dom), add("A", [D, N]), add("y", [B, N])
    return "(x @ A) * y", 2


def _wrap(rng: random.Random, inner: str, inputs: dict, rank: int) -> str:
    kind = rng.choice(("none", "none", "cube", "bump", "softplus", "clamp", "act", "act"))
    if kind == "cube":
        return f"({inner})**3"
    if kind == "bump":
        return f"exp(-({inner})**2)"
    if kind == "softplus":
        return f"log(1 + exp({inner}))"
    if kind == "clamp":
        return f"clamp({inner}, min=-1, max=1)"
    if kind == "act":
        return _act(rng, inner)
    return inner


def _reduce(rng: random.Random, inner: str, rank: int) -> str:
    kind = rng.choice(("sum", "mean", "max", "sort", "cumsum", "std", "var", "norm",
                       "logsumexp", "none"))
    if kind in ("sum", "mean", "norm"):
        return f"{kind}({inner})"
    if kind == "sort":
        return f"sum(sort({inner}, axis=-1) * ({inner}))"
    if kind == "cumsum":
        return f"sum(cumsum({inner}, axis=-1))"
    if kind == "none":
        return inner
    return f"{kind}({inner}, axis=-1)"


def formula(rng: random.Random, index: int) -> dict:
    """One random layer-like formula case (a case file's table)."""
    inputs: dict = {}
    body, rank = _body(rng, inputs)
    wrapped = _wrap(rng, body, inputs, rank)
    expr = _reduce(rng, wrapped, rank)
    dtypes = ["float64", "float32"] + (["bfloat16", "float16"] if index % 3 == 0 else [])
    return {"name": f"sweep-{index}", "expr": expr, "inputs": inputs, "dtype": dtypes}


def formulas(n: int = DEFAULT_FORMULAS, seed: int = DEFAULT_SEED) -> list[dict]:
    rng = random.Random(seed)
    return [formula(rng, i) for i in range(n)]


def _toml_value(v) -> str:
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + " }"
    return repr(v)


def to_toml(cases: list[dict]) -> str:
    lines = ["# random layer-like formulas of gradcheck.cli.bench.sweep", ""]
    for c in cases:
        lines.append("[[case]]")
        lines.append(f"name = {_toml_value(c['name'])}")
        lines.append(f"expr = {_toml_value(c['expr'])}")
        lines.append(f"dtype = {_toml_value(c['dtype'])}")
        for name, spec in c["inputs"].items():
            lines.append(f"inputs.{name} = {_toml_value(spec)}")
        lines.append("")
    return "\n".join(lines)


@dataclass(frozen=True)
class Count:
    """One dtype's tally. ``false_alarms``: failed or errored runs (every formula is
    right); ``notes``: runs with a note; ``inconclusive``/``skipped_witnesses``: witness
    results of those statuses; ``approximate``: runs reported approximate."""

    dtype: str
    runs: int = 0
    passed: int = 0
    approximate: int = 0
    false_alarms: int = 0
    skipped: int = 0
    notes: int = 0
    inconclusive: int = 0
    skipped_witnesses: int = 0
    # runs with a note of each kind issue 30 added (NOTE_KINDS)
    branch_judged: int = 0
    finer_step: int = 0
    inconclusive_points: int = 0
    points_beyond_range: int = 0
    points_pulled_in: int = 0


#: what a note of each kind says (the runs that have one are counted per kind)
NOTE_KINDS = {"branch_judged": "decisions in", "finer_step": "at a finer step they agree",
              "inconclusive_points": "is inconclusive for",
              "points_beyond_range": "the formula overflows",
              "points_pulled_in": "is pulled in toward the centre"}


@dataclass(frozen=True)
class Finding:
    dtype: str
    case: str
    expr: str
    status: str
    message: str


@dataclass
class SweepResult:
    formulas: int
    seed: int
    jobs: int
    seconds: float
    counts: list[Count] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    @property
    def runs(self) -> int:
        return sum(c.runs for c in self.counts)

    @property
    def false_alarms(self) -> int:
        return sum(c.false_alarms for c in self.counts)


def _tally(results, exprs: dict) -> tuple[list[Count], list[Finding]]:
    by: dict[str, dict] = {}
    findings = []
    for r in results:
        c = by.setdefault(r.dtype, {k: 0 for k in Count.__dataclass_fields__ if k != "dtype"})
        c["runs"] += 1
        status = r.status
        if status == "passed":
            c["passed"] += 1
        elif status == "approximate":
            c["approximate"] += 1
        elif status == "skipped":
            c["skipped"] += 1
        else:
            c["false_alarms"] += 1
            findings.append(Finding(r.dtype, r.name, exprs.get(r.name, ""), status,
                                    (r.message or "")[:MESSAGE_CHARS]))
        c["notes"] += bool(r.notes)
        for kind, text in NOTE_KINDS.items():
            c[kind] += any(text in n for n in r.notes)
        for w in r.witnesses:
            c["inconclusive"] += w.status == "inconclusive"
            c["skipped_witnesses"] += w.status == "skipped"
    counts = [Count(d, **by[d]) for d in NAMES if d in by]   # in the dtypes' own order
    return counts, findings


def progress_line(say: Callable[[str], None], every: int = 100):
    """A ``progress(n, total, result)`` saying how far the sweep is every ``every`` runs
    and at the end, and each false alarm as it comes."""
    def progress(n: int, total: int, result) -> None:
        if result.status not in ("passed", "approximate", "skipped"):
            say(f"{result.status}: {result.name} [{result.dtype}]")
        if n % every == 0 or n == total:
            say(f"{n}/{total} runs")

    return progress


def run_sweep(n: int = DEFAULT_FORMULAS, *, seed: int = DEFAULT_SEED, jobs: int = 2,
              progress: Callable | None = None) -> SweepResult:
    """Draw ``n`` formulas and run each in its dtypes through :func:`gradcheck.run`."""
    from ...session.runner import run

    cases = formulas(n, seed)
    exprs = {c["name"]: c["expr"] for c in cases}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sweep.toml"
        path.write_text(to_toml(cases))
        result = run([path], jobs=jobs, isolate=True, progress=progress, formulas=False)
    counts, findings = _tally(result.cases, exprs)
    return SweepResult(n, seed, jobs, time.perf_counter() - start, counts, findings)


def markdown(result: SweepResult) -> str:
    lines = ["# gradcheck bench: sweep", "",
             f"{result.formulas} random layer-like formulas (generator seed {result.seed}, "
             f"`gradcheck.cli.bench.sweep`), default settings, {result.runs} runs in "
             f"{result.seconds:.0f} s with {result.jobs} workers. Every formula is right: "
             "a failed or errored run is a false alarm.", "",
             "| dtype | runs | passed | approximate | false alarms | skipped | runs with "
             "notes | inconclusive witnesses | skipped witnesses | branch judged | finer "
             "step | inconclusive points | points beyond range | points pulled in |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in result.counts:
        lines.append(f"| {c.dtype} | {c.runs} | {c.passed} | {c.approximate} | "
                     f"{c.false_alarms} | {c.skipped} | {c.notes} | {c.inconclusive} | "
                     f"{c.skipped_witnesses} | {c.branch_judged} | {c.finer_step} | "
                     f"{c.inconclusive_points} | {c.points_beyond_range} | "
                     f"{c.points_pulled_in} |")
    lines += ["", "The last five columns count runs with a note of that kind: a witness "
              "judged by the branch it took where rounding flipped a decision; finite "
              "differences that agreed at a finer step; points inconclusive for finite "
              "differences; points not checked as the formula as written overflows the "
              "dtype there; points pulled in toward their domains' centres to keep "
              "within it."]
    if result.findings:
        lines += ["", "## False alarms", ""]
        for f in result.findings:
            msg = f.message.replace("\n", " ").replace("|", "\\|")
            lines.append(f"- `{f.case}` [{f.dtype}] {f.status}: `{f.expr}`: {msg}")
    return "\n".join(lines) + "\n"


def to_json(result: SweepResult) -> dict:
    return {"version": VERSION, "formulas": result.formulas, "seed": result.seed,
            "jobs": result.jobs, "seconds": result.seconds, "runs": result.runs,
            "false_alarms": result.false_alarms,
            "counts": [asdict(c) for c in result.counts],
            "findings": [asdict(f) for f in result.findings]}


def save(result: SweepResult, out_dir: str | Path = "reports") -> tuple[Path, Path]:
    from ...base.io import write_atomic

    js, md = Path(out_dir) / "sweep.json", Path(out_dir) / "sweep.md"
    write_atomic(js, json.dumps(to_json(result), indent=2, ensure_ascii=False) + "\n")
    write_atomic(md, markdown(result))
    return js, md
