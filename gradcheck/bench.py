"""``gradcheck bench``: fixed workloads measured side by side, one comparison table.

Four sections, each a list of :class:`Row` (data only; printing is the caller's):

(a) ``checkers``: gradcheck's full check against ``torch.autograd.gradcheck`` (slow and
    fast mode) and, when JAX is importable, ``jax.test_util.check_grads``, on one
    elementwise formula at growing sizes. Each row says what that checker verified.
(b) ``memory``: the million-element check with every witness, in a fresh process: wall
    time and peak resident memory against the input's size.
(c) ``compile``: building and evaluating the symbolic reference (``Reference``) against
    formula size, and plain ``sympy.diff`` + ``lambdify`` of the same expression, each
    in a fresh process under a time cap.
(d) ``engine``: gradcheck's engine against PyTorch on chains of elementwise ops.

Rows with a target say whether it was met (``met``); in a ``--quick`` run the sizes are
too small for the targets, which are then not assessed (``met`` is ``None``).
"""

from __future__ import annotations

import gc
import json
import os
import platform
import random
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable

ELEMENTWISE = "sum(log(1 + exp(x)) * tanh(x) + sigmoid(x)**2)"
VERSION = 2

SECTIONS = {
    "checkers": "(a) Gradient checkers side by side",
    "memory": "(b) Every witness on a large input: time and peak memory",
    "compile": "(c) Symbolic compile time against formula size",
    "engine": "(d) Engine overhead against PyTorch",
}

#: The random formulas of section (c) are built from these, over x0..x7 (shape ()).
TEMPLATES = {"+": "({a} + {b})", "*": "({a} * {b})", "sin": "sin({a})",
             "exp": "exp({a} / (1 + {a}**2))", "log": "log(1 + {a}**2)",
             "tanh": "tanh({a})"}
FORMULA_INPUTS = 8

#: Op mixes for the engine-overhead chains. The first is the headline: cheap kernels, so
#: the ratio measures the engine's own work. The second adds sin, whose float64 kernel
#: in NumPy is several times slower than PyTorch's vectorised one: that ratio measures
#: the libraries' libm as much as the engine.
CHAINS = {
    "tanh, *, +, exp(-x)": ("tanh", "scale", "shift", "expneg"),
    "sin, tanh, *, +": ("sin", "tanh", "scale", "shift"),
}

_RESULT = "BENCH-RESULT "  # prefix of a child process's answer line


@dataclass(frozen=True)
class Config:
    """What to measure. :data:`FULL` is ``gradcheck bench``, :data:`QUICK` ``--quick``."""

    sizes: tuple[int, ...] = (10, 100, 1000, 10_000)  # (a): every checker
    big: int = 1_000_000                # (a): gradcheck alone
    memory_n: int = 1_000_000           # (b)
    depths: tuple[int, ...] = (2, 3, 4, 5, 6, 7, 8)   # (c)
    large_ops: int = 1000               # (c): the one large formula, in parsed nodes
    cap: float = 20.0                   # (c): seconds one compile may take
    chain: tuple[int, int] = (10_000, 1000)  # (d): elements, ops
    repeat: int = 3                     # runs per measurement (the median is kept)
    once_over: float = 5.0              # a run longer than this is not repeated
    quick: bool = False


FULL = Config()
QUICK = Config(sizes=(10, 100), big=1000, memory_n=10_000, depths=(2, 3), large_ops=60,
               chain=(100, 8), repeat=1, quick=True)

# Targets, at the full configuration's sizes.
TARGET_MEMORY_SECONDS = 10.0
TARGET_MEMORY_RATIO = 20.0
TARGET_DEPTH = 8
TARGET_DEPTH_SECONDS = 2.0
TARGET_LARGE_SECONDS = 10.0
TARGET_BACKWARD_FORWARD = 3.0
TARGET_ENGINE_TORCH = 2.0


@dataclass(frozen=True)
class Row:
    """One measurement. ``seconds`` is ``None`` where none was taken (a ratio row, a
    run stopped at its cap: ``extra["capped"]``)."""

    section: str
    name: str
    sizes: dict
    seconds: float | None
    verified: str
    runs: int = 1                 # measurements the median is of
    ratio: float | None = None
    ratio_of: str = ""            # what ``ratio`` divides by what
    target: str | None = None
    met: bool | None = None       # None: no target, or not assessed (quick sizes)
    extra: dict = field(default_factory=dict)


@dataclass
class Report:
    quick: bool
    rows: list[Row]
    notes: dict[str, list[str]]        # section -> notes
    absent: dict[str, list[dict]]      # section -> [{"name", "reason"}]
    environment: dict
    seconds: float = 0.0

    def section(self, name: str) -> list[Row]:
        return [r for r in self.rows if r.section == name]


@dataclass(frozen=True)
class Workload:
    section: str
    label: str
    run: Callable[[], list[Row]]


# --------------------------------------------------------------------------- timing

def _timed(fn: Callable[[], object], cfg: Config) -> tuple[float, int]:
    """Median of ``cfg.repeat`` runs, or of fewer when one run takes over
    ``cfg.once_over`` seconds; returns (seconds, runs)."""
    times = []
    for _ in range(cfg.repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
        if times[-1] > cfg.once_over:
            break
    return statistics.median(times), len(times)


# --------------------------------------------------------------------------- (a)

GRADCHECK_VERIFIED = ("every element of the gradient against the exact symbolic "
                      "derivative, for each witness (engine, torch autograd, central "
                      "finite differences)")


def _elementwise_case(n: int, name: str | None = None):
    from .cases import case_from_dict

    # one point, as the other checkers measured beside it check (no extreme points)
    return case_from_dict({"name": name or f"n{n}", "expr": ELEMENTWISE, "points": 1,
                           "extreme_points": 0, "inputs": {"x": {"shape": [n]}}})


def _check_passed(result) -> None:
    if result.status != "passed":
        raise RuntimeError(f"bench case failed: {result.message}")


def _gradcheck_rows(n: int, cfg: Config) -> list[Row]:
    import sympy

    from .runner import run_case
    from .symbolic import Reference

    def fresh():
        sympy.core.cache.clear_cache()  # compile from scratch every time
        _check_passed(run_case(_elementwise_case(n), "float64", timeout=None))

    seconds, runs = _timed(fresh, cfg)
    case = _elementwise_case(n)
    cache = {id(case): Reference(case)}
    reused, reused_runs = _timed(
        lambda: _check_passed(run_case(case, "float64", cache=cache, timeout=None)), cfg)
    return [Row("checkers", "gradcheck", {"n": n}, seconds,
                GRADCHECK_VERIFIED + "; reference compile included", runs),
            Row("checkers", "gradcheck, compiled reference reused", {"n": n}, reused,
                GRADCHECK_VERIFIED + "; the reference compiled once before (as for a "
                "case's further points and dtypes)", reused_runs)]


def _warm_up(cfg: Config) -> list[Row]:
    """The first run of each checker pays one-time costs (imports, lazy set-up):
    run them all once at a small size before anything is measured."""
    once = replace(cfg, repeat=1)
    _gradcheck_rows(10, once)
    _torch_rows(10, once)
    return []


def _torch_rows(n: int, cfg: Config) -> list[Row]:
    import torch

    def f(x):
        return (torch.log(1 + torch.exp(x)) * torch.tanh(x) + torch.sigmoid(x) ** 2).sum()

    x = torch.randn(n, dtype=torch.float64, generator=torch.Generator().manual_seed(0),
                    requires_grad=True)
    slow, slow_runs = _timed(lambda: torch.autograd.gradcheck(f, (x,)), cfg)
    fast, fast_runs = _timed(lambda: torch.autograd.gradcheck(f, (x,), fast_mode=True), cfg)
    return [Row("checkers", "torch.autograd.gradcheck", {"n": n}, slow,
                "every element of the Jacobian (here 1×n, the gradient) against central "
                "finite differences: 2n evaluations of f (float64)", slow_runs),
            Row("checkers", "torch.autograd.gradcheck fast_mode", {"n": n}, fast,
                "one random projection uᵀJv against a finite-difference directional "
                "derivative (float64)", fast_runs)]


def _load_jax():
    """``(jax, jax.numpy, check_grads, pinned)``, float64 enabled. Raises on any failure
    (JAX is optional). ``pinned``: XLA was asked for one thread before it started."""
    pinned = "jax" not in sys.modules and "XLA_FLAGS" not in os.environ
    if pinned:
        # read when XLA's CPU backend starts; one thread, as torch and NumPy here
        os.environ["XLA_FLAGS"] = ("--xla_cpu_multi_thread_eigen=false "
                                   "intra_op_parallelism_threads=1")
    try:
        import jax
        import jax.numpy as jnp
        from jax.test_util import check_grads

        jax.config.update("jax_enable_x64", True)
        jax.devices()  # start the backend now, while the flags are set
    finally:
        if pinned:
            del os.environ["XLA_FLAGS"]
    return jax, jnp, check_grads, pinned


def _jax_rows(n: int, cfg: Config, mods) -> list[Row]:
    import numpy as np

    jax, jnp, check_grads, _ = mods

    def f(x):
        return jnp.sum(jnp.log(1 + jnp.exp(x)) * jnp.tanh(x) + jax.nn.sigmoid(x) ** 2)

    x = jnp.asarray(np.random.default_rng(0).standard_normal(n), dtype=jnp.float64)

    def check():
        check_grads(f, (x,), order=1, modes=["rev"])

    start = time.perf_counter()
    check()  # JAX compiles every op for this shape on the first call
    first = time.perf_counter() - start
    seconds, runs = _timed(check, cfg)
    verified = ("one random projection: ⟨u, Jᵀw⟩ from the VJP against ⟨central-difference "
                "JVP along u, w⟩ (order 1, modes ['rev'], float64)")
    return [Row("checkers", "jax.test_util.check_grads", {"n": n}, seconds, verified, runs,
                extra={"first_call_seconds": first}),
            Row("checkers", "jax.test_util.check_grads, first call", {"n": n}, first,
                verified + "; includes compiling each op for this shape", 1)]


# --------------------------------------------------------------------------- children

def _run_child(job: dict, timeout: float) -> dict:
    """Run ``job`` in a fresh interpreter (see :func:`_child_main`); its answer, or
    ``{"capped": True, "killed": True}`` when it ran past ``timeout`` seconds."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    try:
        proc = subprocess.run(
            [sys.executable, "-c", "from gradcheck.bench import _child_main; _child_main()"],
            input=json.dumps(job), capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"capped": True, "killed": True}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(_RESULT):
            return json.loads(line[len(_RESULT):])
    raise RuntimeError(f"bench child {job['job']} exited with {proc.returncode}: "
                       f"{proc.stderr.strip()[-2000:]}")


class _Capped(Exception):
    pass


def _child_main() -> None:
    """Entry point of a child process: reads a job as JSON on stdin, prints the answer."""
    job = json.loads(sys.stdin.read())
    answer = {"memory": _child_memory, "reference": _child_compile,
              "sympy": _child_compile}[job["job"]](job)
    print(_RESULT + json.dumps(answer), flush=True)


def _formula_case(expr: str):
    from .cases import case_from_dict

    return case_from_dict({"name": "formula", "expr": expr, "points": 1,
                           "extreme_points": 0, "inputs": {
                               f"x{i}": {"shape": []} for i in range(FORMULA_INPUTS)}})


def _formula_point(seed: int = 0) -> dict:
    import numpy as np

    rng = np.random.default_rng(seed)
    return {f"x{i}": np.asarray(rng.uniform(-2, 2)) for i in range(FORMULA_INPUTS)}


def _lowered(case):
    """The formula as one SymPy expression, built by SymPy's usual evaluation, and its
    input symbols (what plain SymPy starts from)."""
    from .lowering import lower, symbol

    syms = {s.name: symbol(s.name) for s in case.inputs}
    return (lower(case.output, syms, scalar=True, evaluated=True),
            [syms[s.name] for s in case.inputs])


def _child_compile(job: dict) -> dict:
    """Time ``Reference(case)`` + one evaluation (``reference``), or ``sympy.diff`` of the
    lowered expression w.r.t. every input + ``lambdify(cse=True)`` + one evaluation
    (``sympy``), stopped at ``job["cap"]`` seconds."""
    import numpy as np
    import sympy

    from .symbolic import Reference

    point = _formula_point()

    def measure(case) -> list[float]:
        if job["job"] == "reference":
            out = Reference(case).evaluate(point, np.ones(()))
            # an input the formula does not use has no gradient (None): 0 for sympy
            return [0.0 if out.grads[s.name] is None else float(out.grads[s.name])
                    for s in case.inputs]
        body, syms = _lowered(case)
        fn = sympy.lambdify(syms, [sympy.diff(body, s) for s in syms], cse=True)
        return [float(g) for g in fn(*(float(point[s.name]) for s in case.inputs))]

    # warm-up on a one-op formula: the first lambdify's one-time imports are not the
    # formula's cost
    measure(_formula_case("sin(x0)"))
    sympy.core.cache.clear_cache()
    case = _formula_case(job["expr"])

    def expire(signum, frame):
        raise _Capped

    signal.signal(signal.SIGALRM, expire)
    start = time.perf_counter()
    signal.setitimer(signal.ITIMER_REAL, job["cap"])
    try:
        grads = measure(case)
        seconds = time.perf_counter() - start
    except _Capped:
        return {"capped": True}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return {"seconds": seconds, "grads": grads}


def _rss_kib() -> tuple[int | None, int | None]:
    """(current, peak) resident set size in KiB from /proc, or (None, None)."""
    try:
        fields = dict(line.split(":", 1) for line in
                      Path("/proc/self/status").read_text().splitlines() if ":" in line)
        return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])
    except (OSError, KeyError, ValueError):
        return None, None


def _child_memory(job: dict) -> dict:
    """Every witness on ``job["n"]`` elements after a warm-up and the reference compile:
    seconds, and the peak resident memory of the check above the memory before it."""
    import resource

    import sympy
    import torch

    from .runner import run_case
    from .symbolic import Reference

    torch.set_num_threads(1)
    _check_passed(run_case(_elementwise_case(10, "warm-up"), "float64", timeout=None))
    case = _elementwise_case(job["n"])
    sympy.core.cache.clear_cache()  # the warm-up compiled the same formula
    start = time.perf_counter()
    cache = {id(case): Reference(case)}
    compile_seconds = time.perf_counter() - start
    gc.collect()
    before, _ = _rss_kib()
    method = "ru_maxrss"
    if before is not None:
        try:  # Linux: reset the high-water mark to the current RSS
            Path("/proc/self/clear_refs").write_text("5")
            method = "VmHWM"
        except OSError:
            pass
    if method == "ru_maxrss":
        scale = 1 if sys.platform == "darwin" else 1024
        before_bytes = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale
    else:
        before_bytes = before * 1024
    start = time.perf_counter()
    result = run_case(case, "float64", cache=cache, timeout=None)
    check_seconds = time.perf_counter() - start
    _check_passed(result)
    if method == "VmHWM":
        peak_bytes = _rss_kib()[1] * 1024
    else:
        peak_bytes = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale
    return {"compile_seconds": compile_seconds, "check_seconds": check_seconds,
            "baseline_bytes": before_bytes, "peak_bytes": peak_bytes, "method": method,
            "witnesses": [w.witness for w in result.witnesses]}


# --------------------------------------------------------------------------- (b)

def _memory_rows(cfg: Config) -> list[Row]:
    n = cfg.memory_n
    got = _run_child({"job": "memory", "n": n}, timeout=600)
    if got.get("capped"):
        raise RuntimeError("the memory workload ran past 600 s")
    input_bytes = 8 * n
    extra_bytes = max(0, got["peak_bytes"] - got["baseline_bytes"])
    seconds = got["compile_seconds"] + got["check_seconds"]
    assess = not cfg.quick
    what = (f"every element of the gradient, witnesses {', '.join(got['witnesses'])}, "
            "against the exact reference (one point, float64)")
    return [
        Row("memory", "gradcheck, every witness: wall time", {"n": n}, seconds,
            what + "; reference compile included", 1,
            target=f"< {TARGET_MEMORY_SECONDS:g} s at n = 10⁶",
            met=seconds < TARGET_MEMORY_SECONDS if assess else None,
            extra={k: got[k] for k in ("compile_seconds", "check_seconds")}),
        Row("memory", "gradcheck, every witness: peak memory", {"n": n}, None, what, 1,
            ratio=extra_bytes / input_bytes,
            ratio_of="peak resident bytes above the baseline / the input's bytes",
            target=f"< {TARGET_MEMORY_RATIO:g}× the input's bytes at n = 10⁶",
            met=extra_bytes / input_bytes < TARGET_MEMORY_RATIO if assess else None,
            extra={"peak_bytes": extra_bytes, "input_bytes": input_bytes,
                   "baseline_bytes": got["baseline_bytes"], "method": got["method"]}),
    ]


# --------------------------------------------------------------------------- (c)

def random_formula(depth: int, seed: int, inputs: int = FORMULA_INPUTS) -> str:
    """A random formula over ``x0..x{inputs-1}`` nesting exactly ``depth`` levels of
    :data:`TEMPLATES` (``+ * sin tanh``, ``exp(a/(1+a**2))``, ``log(1+a**2)``); the
    operands of ``+`` and ``*`` are both ``depth - 1`` deep."""
    rng = random.Random(seed)

    def draw(d: int) -> str:
        if d == 0:
            return f"x{rng.randrange(inputs)}"
        op = rng.choice(list(TEMPLATES))
        a = draw(d - 1)
        return TEMPLATES[op].format(a=a, b=draw(d - 1) if op in "+*" else "")

    return draw(depth)


def count_ops(expr: str) -> int:
    """Parsed nodes of a formula over x0..x7 (inputs once each, every constant)."""
    from .tree import walk

    return sum(1 for _ in walk(_formula_case(expr).output))


def size_goal(depth: int) -> int:
    """Parsed nodes aimed at for a depth: 8 at depth 2, ×1.7 a level (190 at depth 8)."""
    return round(8 * 1.696 ** (depth - 2))


def formula_of_size(depth: int, ops: int, tolerance: float = 0.2) -> tuple[str, int, int]:
    """The first seed's formula of ``depth`` within ``tolerance`` of ``ops`` parsed nodes
    (random formulas of one depth vary 20-fold in size); ``(expr, ops, seed)``."""
    best = None
    for seed in range(2000):
        expr = random_formula(depth, seed)
        count = count_ops(expr)
        if abs(count - ops) <= tolerance * ops:
            return expr, count, seed
        if best is None or abs(count - ops) < abs(best[1] - ops):
            best = (expr, count, seed)
    return best


def _depth_for(ops: int) -> int:
    depth = 2
    while size_goal(depth + 1) <= ops:
        depth += 1
    return depth


def _compile_workloads(cfg: Config) -> list[Workload]:
    formulas = [(d, *formula_of_size(d, size_goal(d)), False) for d in cfg.depths]
    large_depth = _depth_for(cfg.large_ops)
    formulas.append((large_depth, *formula_of_size(large_depth, cfg.large_ops, 0.1), True))
    measured: dict[tuple[str, str], dict] = {}  # the sympy row's ratio reads Reference's
    out = []
    for depth, expr, ops, seed, is_large in formulas:
        sizes = {"depth": depth, "ops": ops, "inputs": FORMULA_INPUTS, "seed": seed}
        tag = f"[depth {depth}, {ops} ops{' (large)' if is_large else ''}]"
        for job, label in (("reference", "Reference"), ("sympy", "sympy.diff + lambdify")):
            out.append(Workload("compile", f"{label} {tag}",
                                _compile_run(job, expr, sizes, is_large, cfg, measured)))
    return out


def _compile_target(sizes: dict, is_large: bool) -> tuple[str | None, float | None]:
    if is_large:
        return f"< {TARGET_LARGE_SECONDS:g} s for ~1000 ops", TARGET_LARGE_SECONDS
    if sizes["depth"] == TARGET_DEPTH:
        return f"< {TARGET_DEPTH_SECONDS:g} s at depth {TARGET_DEPTH}", TARGET_DEPTH_SECONDS
    return None, None


def _compile_run(job: str, expr: str, sizes: dict, is_large: bool, cfg: Config,
                 measured: dict) -> Callable[[], list[Row]]:
    def run() -> list[Row]:
        got = _run_child({"job": job, "expr": expr, "cap": cfg.cap}, timeout=cfg.cap + 60)
        measured[(job, expr)] = got
        capped = bool(got.get("capped"))
        extra = {"formula": expr, "large": is_large, "cap_seconds": cfg.cap,
                 "capped": capped}
        if job == "reference":
            target, limit = _compile_target(sizes, is_large)
            met = None
            if limit is not None and not cfg.quick:
                met = not capped and got["seconds"] < limit
            return [Row("compile", "Reference (gradcheck.symbolic)", sizes,
                        got.get("seconds"), "builds the exact gradient (all 8 partial "
                        "derivatives) and evaluates value and gradient at one point",
                        1, target=target, met=met, extra=extra)]
        ours = measured.get(("reference", expr), {})
        ratio = None
        if ours.get("seconds") and not capped:
            ratio = got["seconds"] / ours["seconds"]
            extra["agrees"] = _close(got["grads"], ours["grads"])
        elif ours.get("seconds"):
            extra["ratio_at_least"] = cfg.cap / ours["seconds"]
        return [Row("compile", "sympy.diff + lambdify(cse=True)", sizes, got.get("seconds"),
                    "the same gradient by sympy.diff of the lowered expression w.r.t. each "
                    "of the 8 inputs, lambdify(cse=True), evaluated at the same point",
                    1, ratio=ratio, ratio_of="sympy seconds / Reference seconds",
                    extra=extra)]

    return run


def _close(a: list[float], b: list[float]) -> bool:
    return all(abs(x - y) <= 1e-9 * max(1.0, abs(x), abs(y)) for x, y in zip(a, b))


# --------------------------------------------------------------------------- (d)

def _chain(lib, x, length: int, ops: tuple[str, ...]):
    """``length`` elementwise ops in a chain, cycling through ``ops``, then a sum."""
    steps = {"sin": lib.sin, "tanh": lib.tanh, "scale": lambda t: t * 1.01,
             "shift": lambda t: t + 0.1, "expneg": lambda t: lib.exp(-t)}
    for i in range(length):
        x = steps[ops[i % len(ops)]](x)
    return lib.sum(x)


def _engine_rows(label: str, cfg: Config) -> list[Row]:
    """Forward and backward of one chain on the engine and on torch (float64), and the
    two ratios with their targets."""
    import numpy as np
    import torch

    from . import engine

    n, length = cfg.chain
    ops = CHAINS[label]
    data = np.random.default_rng(0).standard_normal(n)
    times: dict[str, list[float]] = {k: [] for k in ("engine forward", "engine backward",
                                                     "torch forward", "torch backward")}
    for _ in range(cfg.repeat):
        for name, lib, make in (
                ("engine", engine, lambda: engine.Tensor(data.copy(), requires_grad=True)),
                ("torch", torch, lambda: torch.tensor(data, requires_grad=True))):
            x = make()
            start = time.perf_counter()
            y = _chain(lib, x, length, ops)
            mid = time.perf_counter()
            y.backward()
            end = time.perf_counter()
            times[f"{name} forward"].append(mid - start)
            times[f"{name} backward"].append(end - mid)
    sizes = {"n": n, "ops": length, "chain": label}
    t = {k: statistics.median(v) for k, v in times.items()}
    rows = [Row("engine", k, sizes, t[k], "forward pass" if "forward" in k
                else "backward pass (all leaf gradients)", cfg.repeat) for k in times]
    assess = not cfg.quick
    bf = t["engine backward"] / t["engine forward"]
    et = ((t["engine forward"] + t["engine backward"])
          / (t["torch forward"] + t["torch backward"]))
    rows += [
        Row("engine", "engine backward / engine forward", sizes, None,
            "ratio of the two engine passes above", cfg.repeat, ratio=bf,
            ratio_of="engine backward seconds / engine forward seconds",
            target=f"<= {TARGET_BACKWARD_FORWARD:g}",
            met=bf <= TARGET_BACKWARD_FORWARD if assess else None),
        Row("engine", "engine / torch (forward + backward)", sizes, None,
            "ratio of the engine's and torch's forward + backward", cfg.repeat, ratio=et,
            ratio_of="engine seconds / torch seconds",
            target=f"<= {TARGET_ENGINE_TORCH:g}",
            met=et <= TARGET_ENGINE_TORCH if assess else None),
    ]
    return rows


# --------------------------------------------------------------------------- running

def _plan(cfg: Config, wanted: tuple[str, ...], notes: dict,
          absent: dict) -> list[Workload]:
    plan: list[Workload] = []
    if "checkers" in wanted:
        plan += _checker_workloads(cfg, notes, absent)
    if "memory" in wanted:
        plan.append(Workload("memory", f"every witness n={cfg.memory_n} (fresh process)",
                             lambda: _memory_rows(cfg)))
    if "compile" in wanted:
        plan += _compile_workloads(cfg)
    if "engine" in wanted:
        for label in CHAINS:
            plan.append(Workload("engine", f"chain of {cfg.chain[1]} ops ({label}) on "
                                 f"{cfg.chain[0]} elements",
                                 lambda label=label: _engine_rows(label, cfg)))
    return plan


def _checker_workloads(cfg: Config, notes: dict, absent: dict) -> list[Workload]:
    plan: list[Workload] = [Workload("checkers", "warm-up (imports, first compile, first "
                                     "torch.autograd.gradcheck; not reported)",
                                     lambda: _warm_up(cfg))]
    try:
        jax_mods = _load_jax()
    except Exception as exc:  # JAX is optional: any failure to import it means "absent"
        jax_mods = None
        absent["checkers"].append({"name": "jax.test_util.check_grads",
                                   "reason": f"jax is not importable "
                                             f"({type(exc).__name__}: {exc})"})
    else:
        notes["checkers"].append(
            f"JAX {jax_mods[0].__version__}: float64 (jax_enable_x64), f not jitted; "
            "the timed runs follow a first call per size, which compiles each op for that "
            "shape (its own row). XLA " + ("pinned to one thread (XLA_FLAGS)." if jax_mods[3]
                                           else "threads as configured by the caller."))
    for n in cfg.sizes:
        plan.append(Workload("checkers", f"gradcheck n={n}",
                             lambda n=n: _gradcheck_rows(n, cfg)))
        plan.append(Workload("checkers", f"torch.autograd.gradcheck n={n}",
                             lambda n=n: _torch_rows(n, cfg)))
        if jax_mods is not None:
            plan.append(Workload("checkers", f"jax check_grads n={n}",
                                 lambda n=n: _jax_rows(n, cfg, jax_mods)))
    plan.append(Workload("checkers", f"gradcheck n={cfg.big}",
                         lambda: _gradcheck_rows(cfg.big, cfg)))
    return plan


def _environment() -> dict:
    import numpy
    import sympy
    import torch

    env = {"python": platform.python_version(), "platform": platform.platform(),
           "cpus": os.cpu_count(), "numpy": numpy.__version__, "sympy": sympy.__version__,
           "torch": torch.__version__, "torch_threads": 1}
    jax = getattr(sys.modules.get("jax"), "__version__", None)  # when it was used
    if jax:
        env["jax"] = jax
    return env


def _load() -> list[float] | None:
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None


def _runs(cfg: Config) -> str:
    return "One run each" if cfg.repeat == 1 else f"Median of {cfg.repeat} runs"


def _static_notes(cfg: Config) -> dict[str, list[str]]:
    return {
        "checkers": [
            f"Formula `{ELEMENTWISE}`, float64, one point. {_runs(cfg)} after a warm-up "
            f"of every checker; a run over {cfg.once_over:g} s is not repeated (the runs "
            "column says how many were taken). torch on one thread, like NumPy.",
            "Ratio: the checker's seconds / gradcheck's (compile included) at the same n.",
            "gradcheck's f has a scalar output (a final sum), so torch's slow mode builds "
            "a 1×n Jacobian: 2n evaluations of f, no n×n matrix.",
        ],
        "memory": [
            "Run in a fresh process (torch on one thread): imports, a warm-up case, the "
            "reference compile (SymPy's cache cleared), then the check (sampling the "
            "point, every witness, the comparisons). Seconds: compile + check.",
            "Peak memory: the process's resident set (RSS, from /proc/self/status), which "
            "counts NumPy's, torch's and the interpreter's allocations alike. The "
            "high-water mark (VmHWM) is reset (/proc/self/clear_refs) right before the "
            "check, and the peak is VmHWM after it minus VmRSS before it. Where that is "
            "unavailable, ru_maxrss before and after is used (which undercounts when the "
            "imports peaked higher than the check).",
            "The input's bytes: n float64 values (8n).",
        ],
        "compile": [
            "Random formulas over 8 scalar inputs x0..x7 from `+`, `*`, `sin`, "
            "`exp(a/(1+a**2))`, `log(1+a**2)`, `tanh`, nesting exactly `depth` levels; ops: "
            "parsed nodes (each input once, every constant). For each depth the first seed "
            "whose formula is within 20% of 8·1.7^(depth−2) nodes (190 at depth 8) is used; "
            f"the large formula is within 10% of {cfg.large_ops} nodes.",
            "Each measurement is one run in a fresh process, after a warm-up on `sin(x0)` "
            "(so the first lambdify's one-time imports are not counted) and with SymPy's "
            f"cache cleared; parsing excluded; stopped at {cfg.cap:g} s ('> cap').",
            "Reference: gradcheck.symbolic.Reference(case) plus one evaluate() (with the "
            "derivative construction it has at the time of the run). sympy: the lowered "
            "expression, sympy.diff w.r.t. each input, lambdify(cse=True), one call. "
            "Ratio: sympy seconds / Reference seconds; 'agrees' checks both gradients.",
        ],
        "engine": [
            f"{_runs(cfg)}, float64, torch on one thread. The ratios' targets: "
            f"backward/forward <= {TARGET_BACKWARD_FORWARD:g}, engine/torch <= "
            f"{TARGET_ENGINE_TORCH:g}.",
        ],
    }


def run_bench(config: Config = FULL, *, sections: tuple[str, ...] | None = None,
              progress: Callable[[str], None] | None = None) -> Report:
    """Measure every workload (of ``sections``, default all); nothing is printed here:
    ``progress`` gets one message as each workload starts and one as it ends."""
    import torch

    say = progress or (lambda _msg: None)
    start = time.perf_counter()
    load_start = _load()
    threads = torch.get_num_threads()
    # One thread, as NumPy's elementwise kernels: a fair comparison, and it keeps torch's
    # OpenMP workers from spinning against a busy core (which costs it 100x here).
    torch.set_num_threads(1)
    notes = _static_notes(config)
    absent: dict[str, list[dict]] = {s: [] for s in SECTIONS}
    rows: list[Row] = []
    wanted = tuple(s for s in SECTIONS if s in (sections or SECTIONS))
    try:
        plan = _plan(config, wanted, notes, absent)
        for k, w in enumerate(plan, 1):
            say(f"[{k}/{len(plan)}] start {w.section}: {w.label}")
            t0 = time.perf_counter()
            try:
                rows.extend(w.run())
            except Exception as exc:  # one failing workload is reported, the rest run
                absent[w.section].append({"name": w.label,
                                          "reason": f"failed: {type(exc).__name__}: {exc}"})
                say(f"[{k}/{len(plan)}] FAILED {w.section}: {w.label}: {exc}")
                continue
            say(f"[{k}/{len(plan)}] done  {w.section}: {w.label} "
                f"({time.perf_counter() - t0:.1f} s)")
    finally:
        torch.set_num_threads(threads)
    _ratios_to_gradcheck(rows)
    env = _environment()
    if load_start is not None:
        env["load_average_start"], env["load_average_end"] = load_start, _load()
    return Report(config.quick, rows, {s: notes[s] for s in wanted},
                  {s: absent[s] for s in wanted}, env, time.perf_counter() - start)


def _ratios_to_gradcheck(rows: list[Row]) -> None:
    ours = {r.sizes["n"]: r.seconds for r in rows
            if r.section == "checkers" and r.name == "gradcheck"}
    for i, r in enumerate(rows):
        if r.section == "checkers" and r.name != "gradcheck" and ours.get(r.sizes["n"]):
            rows[i] = replace(r, ratio=r.seconds / ours[r.sizes["n"]],
                              ratio_of="seconds / gradcheck's seconds at the same n")


# --------------------------------------------------------------------------- output

def to_json(report: Report) -> dict:
    return {"version": VERSION, "quick": report.quick, "seconds": report.seconds,
            "environment": report.environment,
            "sections": [{"id": s, "title": SECTIONS[s], "notes": report.notes[s],
                          "absent": report.absent[s]} for s in report.notes],
            "rows": [asdict(r) for r in report.rows]}


def _fmt_seconds(r: Row) -> str:
    if r.extra.get("capped"):
        return f"> {r.extra['cap_seconds']:g} (cap)"
    if r.seconds is None:
        return "-"
    return f"{r.seconds:.4f}" if r.seconds < 10 else f"{r.seconds:.1f}"


def _fmt_ratio(r: Row) -> str:
    if r.ratio is None:
        if "ratio_at_least" in r.extra:
            return f"> {r.extra['ratio_at_least']:.1f}×"
        return "-"
    return f"{r.ratio:.3g}×" if r.ratio < 1000 else f"{r.ratio:,.0f}×"


def _fmt_sizes(sizes: dict) -> str:
    if "depth" in sizes:
        return f"depth {sizes['depth']}, {sizes['ops']} ops"
    if "chain" in sizes:
        return f"n = {sizes['n']:,}, {sizes['ops']} ops ({sizes['chain']})"
    return f"n = {sizes['n']:,}"


def _fmt_met(r: Row, quick: bool) -> str:
    if r.target is None:
        return "-"
    if r.met is None:
        return "not assessed (quick sizes)" if quick else "-"
    return "yes" if r.met else "no"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(report: Report) -> str:
    env = report.environment
    out = ["# gradcheck bench" + (" (quick: reduced sizes)" if report.quick else ""), "",
           f"Python {env.get('python')}, {env.get('cpus')} CPUs, NumPy {env.get('numpy')}, "
           f"SymPy {env.get('sympy')}, torch {env.get('torch')}"
           + (f", JAX {env['jax']}" if "jax" in env else "")
           + (f"; load average {env['load_average_start'][0]} at the start, "
              f"{env['load_average_end'][0]} at the end"
              if "load_average_start" in env and "load_average_end" in env else "")
           + f". Total {report.seconds:.0f} s.", ""]
    for section in report.notes:
        out += [f"## {SECTIONS[section]}", ""]
        out += [f"- {n}" for n in report.notes[section]]
        for a in report.absent[section]:
            out.append(f"- **absent**: {a['name']}: {_cell(a['reason'])}")
        rows = report.section(section)
        if rows:
            out += ["", "| workload | size | seconds | runs | ratio | verified | target "
                    "| target met |", "|---|---|---|---|---|---|---|---|"]
            for r in rows:
                name = r.name
                if r.extra.get("large"):
                    name += " (large formula)"
                if r.extra.get("agrees") is False:
                    name += " (gradients DISAGREE)"
                if r.extra.get("peak_bytes") is not None:
                    name += (f": {r.extra['peak_bytes'] / 2**20:.1f} MiB over "
                             f"{r.extra['input_bytes'] / 2**20:.1f} MiB of input")
                out.append("| " + " | ".join(_cell(c) for c in (
                    name, _fmt_sizes(r.sizes), _fmt_seconds(r), r.runs, _fmt_ratio(r),
                    r.verified, r.target or "-", _fmt_met(r, report.quick))) + " |")
        out.append("")
    return "\n".join(out)


def main(out_dir: str = "reports", quick: bool = False,
         sections: tuple[str, ...] | None = None) -> int:
    """Run the benchmark's ``sections`` (default all; progress on stderr), print the
    table, save ``bench.json`` and ``bench.md`` in ``out_dir``."""
    from .io import write_atomic

    report = run_bench(QUICK if quick else FULL, sections=sections,
                       progress=lambda msg: print(f"bench: {msg}", file=sys.stderr,
                                                  flush=True))
    table = markdown(report)
    sys.stdout.write(table)
    write_atomic(Path(out_dir) / "bench.json", json.dumps(to_json(report), indent=2,
                                                          ensure_ascii=False) + "\n")
    write_atomic(Path(out_dir) / "bench.md", table)
    print(f"saved {out_dir}/bench.json and {out_dir}/bench.md")
    return 0
