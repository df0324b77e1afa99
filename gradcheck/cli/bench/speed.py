"""Section (g), ``speed``: one point checked at every element, every witness, against the
checkers that verify one projection, on the layers of real sizes. Each workload runs in
a fresh interpreter (:mod:`.child`), once pinned to one thread (torch, and the BLAS and
OpenMP pools by their environment variables, set before anything is imported) and once
with the default threads; inside it, side by side in turns (:func:`.checkers.
side_by_side`, so that a ratio is measured under one load):

- ``torch fwd+bwd``: the same formula (the rule table's torch column, as the torch
  witness builds it) forward and backward once in float64: the unit of the ≤ 10× target;
- ``gradcheck``: :func:`gradcheck.checking.case.run_case` of the case at one point, no
  extreme point, every witness, float64, its reference compiled each run (SymPy's cache
  cleared: compile included);
- ``torch fast_mode``: ``torch.autograd.gradcheck(..., fast_mode=True)`` of the same
  function (one random projection uᵀJv against a finite-difference directional
  derivative), and at 4,096 inputs the full ``torch.autograd.gradcheck`` too;
- ``jax check_grads``: where JAX is importable (it is optional: the ``bench`` extra)
  and the workload has a JAX form (:mod:`.jaxforms`: every workload but the
  transformer block), ``jax.test_util.check_grads(f, args, order=1, modes=["rev"])``
  on the same formula written in jax.numpy at the same point, float64, not jitted,
  after one untimed call (JAX compiles each op per shape on its first call); XLA pinned
  to one thread in the one-thread process (:func:`.checkers.load_jax`), its own
  threads in the other. Where it is absent, the section's absent list says why.

Ratio rows: fast_mode's seconds over gradcheck's and JAX check_grads' over gradcheck's
(the speed of gradcheck in units of theirs: target ≥ 1.0 each), gradcheck's over one
forward and backward (target ≤ 10), and at 4,096 inputs torch full's over gradcheck's
(target ≥ 50)."""

from __future__ import annotations

import math

from ...process.threads import VARIABLES
from .child import run_child
from .config import CHECKED, LAYERS, Config, Row, Workload

#: the elementwise workload of the issue's table, beside :data:`LAYERS` and CHECKED
ELEMENTWISE = ("sum(sin(x) * exp(-x**2) + tanh(x))",
               ({"expr": "sum(sin(x) * exp(-x**2) + tanh(x))", "inputs": {"x": {}}},
                {"real": {"x": [1_000_000]}, "small": {"x": [1000]}}))
#: a transformer block as one formula: pre-norm attention with 4 heads and a GELU MLP,
#: d = 256, T = 128, batch 8 (checked with default settings, every element)
BLOCK_SHAPE = {"real": (8, 128, 256, 4), "small": (2, 4, 8, 2)}


def block(batch: int, t: int, d: int, heads: int) -> tuple[dict, dict]:
    """The transformer block's case keys and its inputs' shapes."""
    split = f"[{batch}, {t}, {heads}, {d // heads}]"
    let = {
        "mu1": "mean(x, axis=-1, keepdims=True)",
        "h": "(x - mu1) / sqrt(mean((x - mu1)**2, axis=-1, keepdims=True) + 0.00001) "
             "* g1 + b1",
        **{n: f"permute(reshape(h @ W{n}, {split}), [0, 2, 1, 3])" for n in "qkv"},
        "a": f"softmax(q @ transpose(k) / {(d // heads) ** 0.5:g}, axis=-1) @ v",
        "r": f"x + reshape(permute(a, [0, 2, 1, 3]), [{batch}, {t}, {d}]) @ Wo",
        "mu2": "mean(r, axis=-1, keepdims=True)",
        "h2": "(r - mu2) / sqrt(mean((r - mu2)**2, axis=-1, keepdims=True) + 0.00001) "
              "* g2 + b2",
    }
    gains = {"domain": [0.5, 1.5]}
    keys = {"let": let, "expr": "r + gelu(h2 @ W1) @ W2", "gradient": "random",
            "inputs": {"x": {}, "g1": gains, "b1": {}, "Wq": {}, "Wk": {}, "Wv": {},
                       "Wo": {}, "g2": gains, "b2": {}, "W1": {}, "W2": {}}}
    square = [d, d]
    shapes = {"x": [batch, t, d], "g1": [d], "b1": [d], "Wq": square, "Wk": square,
              "Wv": square, "Wo": square, "g2": [d], "b2": [d], "W1": [d, 4 * d],
              "W2": [4 * d, d]}
    return keys, shapes


TARGET_BLOCK_SECONDS = 10.0
TARGET_OVER_FAST_MODE = 1.0     # gradcheck at least as fast as fast_mode
TARGET_OVER_FWD_BWD = 10.0      # one point in at most 10 forward+backward passes
#: thread settings each workload is measured under: label -> threads (None: default)
THREADS = {"one thread": 1, "default threads": None}
#: the thread pools' variables, each pinned to 1 (process.threads names them; numexpr's
#: too, which SymPy's lambdify may use)
_ONE_THREAD = {v: "1" for v in (*VARIABLES, "NUMEXPR_NUM_THREADS")}


def workloads_of(cfg: Config) -> dict[str, tuple[dict, dict]]:
    """label -> (the case's keys, the inputs' shapes) of every workload at the config's
    sizes (of the layers it names: ``--quick`` measures the first alone)."""
    out = {}
    for label, (keys, shapes) in {**LAYERS, ELEMENTWISE[0]: ELEMENTWISE[1]}.items():
        if cfg.layer_names is None or label in cfg.layer_names:
            out[label] = (keys, shapes[cfg.layers])
    if cfg.layer_names is None:
        keys, shapes = LAYERS[CHECKED[0]]
        out[f"{CHECKED[0]}, the checkers' size"] = (keys, CHECKED[1][cfg.layers])
    return out


#: what each checker of a workload verified (gradcheck's, with its verdict: _rows)
WHAT = {
    "torch fwd+bwd": "nothing: the formula's forward and backward once (float64)",
    "torch fast_mode": "one random projection uᵀJv against a finite-difference "
                       "directional derivative (float64)",
    "torch full": "every element of the Jacobian against central differences (float64)",
    "gradcheck, finite differences at every point":
        "as gradcheck, the witnesses named: finite differences measured even where the "
        "engine and torch agree far inside their tolerances",
    "jax check_grads": "one random projection: ⟨u, Jᵀw⟩ from the VJP against a "
                       "central-difference JVP along u (order 1, modes ['rev'], float64; "
                       "not jitted, after a first call that compiles each op)",
}


def _rows(label: str, keys: dict, shapes: dict, threads_label: str, cfg: Config,
          notes: dict, absent: dict) -> list[Row]:
    threads = THREADS[threads_label]
    # (the CLI pins each pool to one thread where the user has not: the default
    # threads are the libraries' own, the variables removed)
    env = _ONE_THREAD if threads == 1 else {k: None for k in _ONE_THREAD}
    n = sum(math.prod(s) for i, s in shapes.items()
            if keys["inputs"][i].get("requires_grad", True))
    answer = run_child({"job": "speed", "label": label, "keys": keys, "shapes": shapes,
                        "threads": threads, "full": n <= 4096, "repeat": cfg.repeat,
                        "quick": cfg.quick, "budget": 2.0 if cfg.quick else 20.0},
                       timeout=3600, env=env)
    if answer.get("capped"):
        raise RuntimeError(f"{label} ran past an hour")
    _jax_said(answer["jax"], label, threads_label, notes, absent)
    sizes = {"n": n, "shapes": shapes}
    name = f"{label} ({answer['threads']} thread{'s' * (answer['threads'] > 1)})"
    secs = {k: s for k, (s, _) in answer["seconds"].items()}
    runs = {k: r for k, (_, r) in answer["seconds"].items()}
    what = {**WHAT, "gradcheck": f"every element of vᵀJ, every witness, one point, "
                                 f"float64, compile included (verdict: "
                                 f"{', '.join(answer['status'])})"}
    if "verdicts" in answer["jax"]:
        what["jax check_grads"] += (f" (verdict: "
                                    f"{'; '.join(sorted(set(answer['jax']['verdicts'])))})")
    rows = [Row("speed", f"{name}: {k}", sizes, s, what[k], runs[k]) for k, s in secs.items()]
    return rows + _ratio_rows(name, sizes, secs, cfg)


def _jax_said(jax: dict, label: str, threads_label: str, notes: dict,
              absent: dict) -> None:
    """What the child said of JAX: its version and threads to the section's notes, or
    why its row is absent to ``absent`` (each once)."""
    if "absent" in jax:
        # JAX missing is one entry for the section; a form missing or failing, one
        # for its workload
        entry = {"name": "jax check_grads" if jax.get("unimportable")
                 else f"{label}: jax check_grads",
                 "reason": jax["absent"]}
        said = absent["speed"]
    else:
        entry = (f"jax check_grads, {threads_label}: JAX {jax['version']} on the same "
                 "formula written by hand in jax.numpy (gradcheck/cli/bench/jaxforms.py) "
                 "at the same point, float64, order 1, modes ['rev'], not jitted, timed "
                 "after one call that compiles each op for these shapes; XLA "
                 + ("pinned to one thread (XLA_FLAGS)." if jax["pinned"]
                    else "with its own threads (not pinned)."))
        said = notes["speed"]
    if entry not in said:
        said.append(entry)


def _ratio_rows(name: str, sizes: dict, secs: dict, cfg: Config) -> list[Row]:
    """The targets' ratios: fast_mode's (and JAX's, torch full's where measured)
    seconds over gradcheck's, gradcheck's over one forward and backward."""
    over_pass = secs["gradcheck"] / secs["torch fwd+bwd"]
    rows = []
    for checker, short, its in (("torch fast_mode", "fast_mode", "fast_mode's"),
                                ("jax check_grads", "jax check_grads", "check_grads'")):
        if checker not in secs:
            continue
        over = secs[checker] / secs["gradcheck"]
        rows.append(Row("speed", f"{name}: {short} / gradcheck", sizes, None,
                        f"gradcheck's speed in units of {its}", ratio=over,
                        ratio_of=f"{checker} seconds / gradcheck seconds",
                        target=f"≥ {TARGET_OVER_FAST_MODE:g}×",
                        met=None if cfg.quick else over >= TARGET_OVER_FAST_MODE))
    rows.append(Row("speed", f"{name}: gradcheck / fwd+bwd", sizes, None,
                    "one point's check in forward+backward passes", ratio=over_pass,
                    ratio_of="gradcheck seconds / torch fwd+bwd seconds",
                    target=f"≤ {TARGET_OVER_FWD_BWD:g}×",
                    met=None if cfg.quick else over_pass <= TARGET_OVER_FWD_BWD))
    if "torch full" in secs:
        rows.append(Row("speed", f"{name}: torch full / gradcheck", sizes, None,
                        "gradcheck's speed in units of torch's full check's",
                        ratio=secs["torch full"] / secs["gradcheck"],
                        ratio_of="torch full seconds / gradcheck seconds",
                        target="≥ 50×",
                        met=None if cfg.quick else secs["torch full"] / secs["gradcheck"] >= 50))
    return rows


def _block_rows(cfg: Config) -> list[Row]:
    keys, shapes = block(*BLOCK_SHAPE[cfg.layers])
    answer = run_child({"job": "block", "keys": keys, "shapes": shapes}, timeout=3600,
                       env={k: None for k in _ONE_THREAD})
    if answer.get("capped"):
        raise RuntimeError("the transformer block ran past an hour")
    n = sum(math.prod(s) for s in shapes.values())
    return [Row("speed", "transformer block (pre-norm attention, 4 heads, GELU MLP), "
                "default settings, default threads", {"n": n, "shapes": shapes},
                answer["seconds"],
                f"every element of vᵀJ by every witness at the default points, float64, "
                f"compile included (verdict: {answer['status']}; witnesses: "
                + ", ".join(f"{w} {st}" for w, st in answer["witnesses"].items()) + ")",
                target=f"< {TARGET_BLOCK_SECONDS:g} s",
                met=None if cfg.quick else answer["seconds"] < TARGET_BLOCK_SECONDS)]


def speed_workloads(cfg: Config, notes: dict, absent: dict) -> list[Workload]:
    """The section's workloads: each layer under each thread setting, and the
    transformer block (not in ``--quick``); JAX's version goes to ``notes``, the
    reason a JAX row is absent to ``absent`` (both by section)."""
    plan = []
    for label, (keys, shapes) in workloads_of(cfg).items():
        for threads_label in THREADS:
            plan.append(Workload("speed", f"{label} ({threads_label})",
                                 lambda label=label, keys=keys, shapes=shapes,
                                 t=threads_label: _rows(label, keys, shapes, t, cfg,
                                                        notes, absent)))
    if not cfg.quick:
        plan.append(Workload("speed", "transformer block, default settings",
                             lambda: _block_rows(cfg)))
    return plan
