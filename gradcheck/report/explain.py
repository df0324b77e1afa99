"""``gradcheck explain``'s renderers: an :class:`~gradcheck.explanation.Explanation` as text
for a terminal or as JSON. They never compute."""

from __future__ import annotations

import json
import math

import numpy as np

from .scrub import json_safe, json_values
from .text import one_line

PRECISION = 4   # digits of the values shown in text (JSON has them all)


def _array(a) -> str:
    a = np.asarray(a)
    if a.ndim == 0:
        return f"{float(a):.{PRECISION}g}"
    return np.array2string(a, precision=PRECISION, separator=", ", suppress_small=True,
                           max_line_width=88)


def _block(label: str, a) -> list[str]:
    """``label = <array>``, a multi-line array indented under its label."""
    lines = _array(a).splitlines()
    pad = " " * (len(label) + 3)
    return [f"{label} = {lines[0]}"] + [pad + line for line in lines[1:]]


def _next(node) -> str:
    return ", ".join("-" if n is None else f"#{n}" for n in node.next) or "(leaf)"


def _same(a, b) -> bool:
    return [(n.name, n.next) for n in a] == [(n.name, n.next) for n in b]


def _graph_lines(e) -> list[str]:
    """The torch and engine graphs in one table when they have the same nodes and
    edges (their names side by side), else one table each."""
    tables = [("torch", e.torch_graph, e.engine_graph)] if _same(
        e.torch_graph, e.engine_graph) else [("torch", e.torch_graph, None),
                                            ("engine", e.engine_graph, None)]
    out = []
    for title, nodes, twin in tables:
        head = ["#", title] + (["engine"] if twin is not None else []) + [
            "of", "next_functions", "computes"]
        rows = []
        for i, n in enumerate(nodes):
            of = f"{n.of} {list(n.shape)}" if n.shape is not None else n.of
            computes = n.computes + (f"; {n.vjp}" if n.vjp else "")
            rows.append([f"#{n.index}", n.name] + (
                [twin[i].name] if twin is not None else []) + [of, _next(n), computes])
        widths = [max(len(r[k]) for r in [head] + rows) for k in range(len(head) - 1)]
        for r in [head] + rows:
            out.append("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths))
                       + "  " + r[-1])
    return out


def _short(why: str) -> str:
    """PyTorch's non-leaf warning cut to its first two sentences (JSON has it whole)."""
    end = "autograd.backward()."
    at = why.find(end)
    return why if at < 0 else why[: at + len(end)]


def _grad_lines(e) -> list[str]:
    out = []
    for g in e.grads:
        what = g.kind + (", retained" if g.kind == "intermediate" and g.retained else "")
        label = f"{g.name}.grad"
        if g.value is None:
            # (the reason out of brackets: PyTorch's words hold an apostrophe, and the
            # docs/explain.md quotes this text where Python tokenizes it)
            out.append(f"{label} = None   {what} {list(g.shape)}: {_short(g.why)}")
            continue
        out += _block(label, g.value)
        out.append(f"    ({what} {list(g.shape)}; max |torch - exact| = {g.error:.1e})"
                   if g.error is not None else f"    ({what} {list(g.shape)})")
    return out


def render_text(e) -> str:
    """The explanation for a terminal."""
    lines = [f"y = {e.expr}   shape {list(e.output_shape)}"]
    lines += [f"  where {name} = {text}" for name, text in e.lets]
    lines += ["", f"at one sampled point (float64, seed {e.seed}):"]
    for name in e.inputs:
        lines += ["  " + s for s in _block(name, e.point[name])]
    lines += ["  " + s for s in _block("y", e.value)]
    lines += ["", "exact gradients (ḡ is the cotangent of y: the v of y.backward(v), "
              "1 for a scalar y):"]
    lines += [f"  {s}" for s in e.shared]
    lines += [f"  {name} = {text}" for name, text in e.formulas.items()]
    lines += ["", "backward:"] + [f"  {s}" for s in e.backward]
    if "no_v" in e.errors:
        lines.append(f"  PyTorch, y.backward(): RuntimeError: {e.errors['no_v']}")
    if "wrong_shape" in e.errors:
        lines.append("  PyTorch, a v of another shape: RuntimeError: "
                     + e.errors["wrong_shape"])
    if e.output_shape != ():
        lines += ["  " + s for s in _block("v", e.v)]
    lines += ["", "grad_fn graph of PyTorch and of the engine, from y.grad_fn:"]
    if e.torch_graph:
        lines += _graph_lines(e)
        # (no bracket before the #: docs/explain.md quotes this, and Python tokenizes it)
        lines.append("  next_functions: #k is node k, - is no edge, to a constant operand; "
                     "ḡ in a VJP is the gradient arriving at the node")
    else:
        lines.append("  none: y.grad_fn is None (y is a leaf itself)")
    lines += ["", ".grad after backward (PyTorch):"]
    lines += ["  " + s for s in _grad_lines(e)]
    lines += ["", "Jacobian:" + ("" if e.jacobian else f" {e.jacobian_note}")]
    if e.jacobian:
        lines.append(f"  {e.jacobian_note}")
        for name, j in e.jacobian.items():
            lines += ["  " + s for s in _block(f"J[{name}] {list(j.shape)}", j)]
    return "\n".join(one_line(s) for s in lines) + "\n"


def _plain(x):
    """JSON-ready: arrays as nested lists, non-finite numbers as "nan"/"inf"/"-inf"."""
    if isinstance(x, np.ndarray):
        return _plain(x.tolist())
    if isinstance(x, (list, tuple)):
        return [_plain(i) for i in x]
    if isinstance(x, dict):
        return {str(k): _plain(w) for k, w in x.items()}
    if isinstance(x, (float, np.floating)):
        x = float(x)
        return x if math.isfinite(x) else repr(x)
    if isinstance(x, np.integer):
        return int(x)
    return x


def to_dict(e) -> dict:
    """The explanation as JSON's data (the schema is these keys)."""
    def node(n):
        return {"index": n.index, "name": n.name, "computes": n.computes,
                "next_functions": list(n.next), "of": n.of, "vjp": n.vjp,
                "shape": None if n.shape is None else list(n.shape)}

    return _plain({
        "expr": e.expr, "lets": dict(e.lets), "inputs": {k: list(s) for k, s in
                                                         e.inputs.items()},
        "output_shape": list(e.output_shape), "gradient": e.gradient, "seed": e.seed,
        "point": e.point, "value": e.value, "v": e.v,
        "formulas": {"shared": list(e.shared), **e.formulas},
        "backward": {"explanation": list(e.backward), "errors": e.errors},
        "graph": {"torch": [node(n) for n in e.torch_graph],
                  "engine": [node(n) for n in e.engine_graph]},
        "grads": [{"name": g.name, "kind": g.kind, "shape": list(g.shape),
                   "retained": g.retained, "value": g.value, "exact": g.exact,
                   "error": g.error, "why_none": g.why or None} for g in e.grads],
        "jacobian": {"note": e.jacobian_note, "matrices": dict(e.jacobian)},
    })


def render_json(e) -> str:
    return json_safe(json.dumps(json_values(to_dict(e)), indent=2, allow_nan=False,
                                ensure_ascii=False)) + "\n"
