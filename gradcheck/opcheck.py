"""Checks of a user's custom op against the formula it claims to compute.

Each check is reported by name, as a witness result ``op.<check>``:

- ``op.forward``: the op's outputs against the reference's values;
- ``op.backward``: vᵀJ through autograd for random cotangents v, against the exact one;
- ``op.jacobian``: the same for every one-hot v (the whole Jacobian), for small outputs;
- ``op.zero``: a zero ``grad_output`` gives zero gradients;
- ``op.determinism``: two backward calls with the same v agree (within ``nondet_tol``);
- ``op.shapes``: what the Function's own ``backward`` returns: one gradient per input,
  each of its input's shape, dtype and device, ``None`` where the input needs no grad;
- ``op.double`` (``order = 2``): double backward against the exact Hessian-vector product.

Tolerances come from the dtype and the reference's conditioning: an element may be off
by :data:`CONDITION_FACTOR` units of the dtype's epsilon times ``|v|ᵀ|J|`` (gradients) or
``|y| + |J|·|x|`` (values), the sizes rounding errors in any correct implementation are
proportional to. A failing check carries a diagnosis (:mod:`gradcheck.diagnose`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .backends.op import Runner, kind_of, load, to_numpy
from .compare import Tally
from .evaluation import Evaluation
from .result import FAILED, WitnessResult
from .sampling import case_rng, sample

CONDITION_FACTOR = 64      # units of eps(dtype) times the conditioning
COTANGENTS = 2             # random v per point
JACOBIAN_LIMIT = 64        # output elements up to which every one-hot v is checked
CHECKS = ("forward", "backward", "jacobian", "zero", "determinism", "shapes", "double")
#: (rtol, atol) under which a diagnosis calls an element right, by dtype: float32
#: arithmetic is off by more than float64's 1e-6 relative where terms cancel.
def references(case, cache: dict) -> list:
    """One compiled symbolic reference per output of the op."""
    from .symbolic import Reference

    key = ("op", id(case))
    if key not in cache:
        cache[key] = [Reference(dataclasses.replace(case, output=node, retain_grad=(),
                                                    outputs=(node,)))
                      for node in case.outputs]
    return cache[key]


def _exact(refs, point, vs) -> Evaluation:
    """Values and Σ_k v_kᵀ J_k of all outputs, with their conditioning."""
    evals = [r.evaluate(point, v) for r, v in zip(refs, vs)]
    grads, scale = {}, {}
    for e in evals:
        for name, g in e.grads.items():
            if g is None:
                grads.setdefault(name, None)
                continue
            grads[name] = g if grads.get(name) is None else grads[name] + g
            key = f"{name}.grad"
            scale[key] = e.scale[key] if key not in scale else scale[key] + e.scale[key]
    for k, e in enumerate(evals):
        scale[f"out{k}"] = e.scale["value"]
    return Evaluation(value=None, grads=grads, scale=scale,
                      retained={f"out{k}": e.value for k, e in enumerate(evals)})


def _bounds(exact: Evaluation, dtype: str, keys) -> dict:
    eps = float(np.finfo(dtype).eps)
    return {k: CONDITION_FACTOR * eps * exact.scale[k] for k in keys if k in exact.scale}


def _grad_quantities(grads: dict) -> dict:
    return {f"{n}.grad": g for n, g in grads.items()}


class OpCheck:
    """All checks of one op case in one dtype."""

    def __init__(self, case, dtype: str, cache: dict):
        self.case, self.dtype = case, dtype
        self.refs = references(case, cache)
        self.kind = kind_of(load(case.op, case.file) if isinstance(case.op, str) else case.op)
        self.runner = Runner(case, self.kind, dtype, case.device)
        self.tallies = {c: Tally("op", dtype, case.atol, case.rtol) for c in CHECKS}
        # (obtained, expected, expected with v = ones) per point and v, for diagnosis
        self.samples: list[tuple[dict, dict, dict]] = []
        self.messages: dict[str, list[str]] = {c: [] for c in CHECKS}
        self.shape_notes: list[str] = []   # diagnoses of wrongly shaped raw gradients

    def vs(self, index: int, draw: int) -> list[np.ndarray]:
        from .dtypes import round_to

        rng = case_rng(self.case, self.dtype, index, f"op-v{draw}")
        return [round_to(rng.standard_normal(n.shape), self.dtype) for n in self.case.outputs]

    def run(self) -> list[WitnessResult]:
        for i in range(self.case.points):
            self.point(i, sample(self.case, self.dtype, i).values)
        return self.results()

    def point(self, i: int, point: dict) -> None:
        case, runner = self.case, self.runner
        leaves = runner.leaves(point)
        outs = runner.forward(leaves)
        if len(outs) != len(self.refs):
            self.fail("forward", f"the op returned {len(outs)} outputs; reference has "
                                 f"{len(self.refs)}")
            return
        zeros = [np.zeros(n.shape) for n in case.outputs]
        ones = [np.ones(n.shape) for n in case.outputs]
        exact_ones = _exact(self.refs, point, ones)
        obtained_values = {f"out{k}": to_numpy(y) for k, y in enumerate(outs)}
        self.tallies["forward"].add_quantities(
            obtained_values, exact_ones.retained, i,
            _bounds(exact_ones, self.dtype, obtained_values))
        for draw in range(COTANGENTS):
            vs = self.vs(i, draw)
            exact = _exact(self.refs, point, vs)
            got = {n: to_numpy(g) for n, g in runner.vjp(leaves, outs, vs).items()}
            expected = _grad_quantities(exact.grads)
            self.tallies["backward"].add_quantities(
                _grad_quantities(got), expected, i, _bounds(exact, self.dtype, expected))
            self.samples.append((got, exact.grads, exact_ones.grads))
            if draw == 0:
                again = {n: to_numpy(g) for n, g in runner.vjp(leaves, outs, vs).items()}
                self.determinism(got, again, i)
                self.shapes(leaves, outs, vs, exact.grads)
                if case.order == 2:
                    self.double(leaves, point, vs, i)
        self.jacobian(leaves, outs, point, i)
        got = {n: to_numpy(g) for n, g in runner.vjp(leaves, outs, zeros).items()}
        self.tallies["zero"].add_quantities(
            _grad_quantities({n: (np.zeros_like(g) if g is not None else None)
                              for n, g in got.items()}),
            _grad_quantities({n: np.zeros(case.input[n].shape) for n in got}), i)

    def determinism(self, first: dict, second: dict, i: int) -> None:
        tally = self.tallies["determinism"]
        tally.atol, tally.rtol = self.case.nondet_tol, 0.0
        tally.add_quantities(_grad_quantities(second), _grad_quantities(first), i)

    def jacobian(self, leaves, outs, point, i: int) -> None:
        sizes = [int(np.prod(n.shape, dtype=np.int64)) for n in self.case.outputs]
        if sum(sizes) > JACOBIAN_LIMIT:
            return
        for k, node in enumerate(self.case.outputs):
            for flat in range(sizes[k]):
                vs = [np.zeros(n.shape) for n in self.case.outputs]
                vs[k].reshape(-1)[flat] = 1.0
                idx = ",".join(map(str, np.unravel_index(flat, node.shape)))
                exact = _exact(self.refs, point, vs)
                got = {n: to_numpy(g) for n, g in
                       self.runner.vjp(leaves, outs, vs).items()}
                rename = {f"{n}.grad": f"d out{k}[{idx}] / d {n}" for n in got}
                expected = _grad_quantities(exact.grads)
                self.tallies["jacobian"].add_quantities(
                    {rename[q]: g for q, g in _grad_quantities(got).items()},
                    {rename[q]: g for q, g in expected.items()}, i,
                    {rename[q]: b for q, b in _bounds(exact, self.dtype, expected).items()})

    def shapes(self, leaves, outs, vs, exact: dict) -> None:
        raw = self.runner.raw_backward(outs, vs)
        if raw is None:
            return
        self.tallies["shapes"].checked += 1
        inputs = [leaves[s.name] for s in self.case.inputs] + list(self.case.args)
        name = f"{self.kind.name}.backward"
        if len(raw) != len(inputs):
            self.fail("shapes", f"{name} returned {len(raw)} gradients; forward took "
                                f"{len(inputs)} inputs")
            return
        for spec, g in zip(self.case.inputs, raw):
            x = leaves[spec.name]
            if g is None:
                if spec.requires_grad:
                    self.fail("shapes", f"{name} returned None for {spec.name}, which "
                                        "needs a gradient")
                continue
            if not spec.requires_grad:
                self.fail("shapes", f"{name} returned a gradient for {spec.name}, which "
                                    "needs none (ctx.needs_input_grad is False there)")
            if tuple(g.shape) != tuple(x.shape):
                self.fail("shapes", f"{name} returned a gradient of shape {list(g.shape)} "
                                    f"for {spec.name} of shape {list(x.shape)}")
                self.shape_notes += self.diagnose({spec.name: to_numpy(g)},
                                                  {spec.name: exact.get(spec.name)})
            if g.dtype != x.dtype:
                self.fail("shapes", f"{name} returned a {g.dtype} gradient for "
                                    f"{spec.name} of dtype {x.dtype}")
            if getattr(g, "device", None) != getattr(x, "device", None):
                self.fail("shapes", f"{name} returned a gradient on {g.device} for "
                                    f"{spec.name} on {x.device}")

    def double(self, leaves, point, vs, i: int) -> None:
        import torch

        if self.kind.engine:
            self.fail("double", "order = 2 needs a torch op (the engine has no "
                                "double backward)")
            return
        outs = self.runner.forward(leaves)
        grads = self.runner.vjp(leaves, outs, vs, create_graph=True)
        names = [n for n, g in grads.items() if g is not None and g.requires_grad]
        rng = case_rng(self.case, self.dtype, i, "op-u")
        us = {n: np.asarray(rng.standard_normal(self.case.input[n].shape),
                            dtype=self.dtype).astype(float) for n in grads}
        if names:
            second = torch.autograd.grad(
                [grads[n] for n in names], [leaves[n] for n in grads],
                grad_outputs=[self.runner.tensor(us[n]) for n in names], allow_unused=True)
            got = {n: to_numpy(g) for n, g in zip(grads, second)}
        else:
            got = dict.fromkeys(grads)
        expected = {}
        for ref, v in zip(self.refs, vs):
            for n, h in ref.hvp(point, v, us).items():
                expected[n] = h if n not in expected else expected[n] + h
        got = {n: (np.zeros(self.case.input[n].shape) if g is None else g)
               for n, g in got.items()}
        eps = float(np.finfo(self.dtype).eps)
        bounds = {f"{n}.grad": CONDITION_FACTOR * eps * (np.abs(e) + 1) for n, e in
                  expected.items()}
        self.tallies["double"].add_quantities(_grad_quantities(got),
                                              _grad_quantities(expected), i, bounds)

    def fail(self, check: str, message: str) -> None:
        self.tallies[check].mismatched += 1
        self.tallies[check].problems.append(message)

    def diagnosis(self) -> str:
        """What the wrong gradients look like (see :func:`gradcheck.diagnose.summarize`)."""
        from .diagnose import summarize

        return summarize(self.samples, self.dtype)

    def diagnose(self, got: dict, exact: dict, ones: dict | None = None) -> list[str]:
        from .diagnose import TOLERANCES, diagnose

        rtol, atol = TOLERANCES[self.dtype]
        return diagnose(got, exact, ones_vjp=ones, rtol=rtol, atol=atol)

    def results(self) -> list[WitnessResult]:
        out = []
        for check in CHECKS:
            tally = self.tallies[check]
            if tally.checked == 0 and not tally.mismatched:
                continue
            result = dataclasses.replace(tally.result(), witness=f"op.{check}")
            if result.status == FAILED and check in ("backward", "jacobian"):
                result = dataclasses.replace(result, diagnosis=self.diagnosis())
            if result.status == FAILED and check == "shapes" and self.shape_notes:
                result = dataclasses.replace(
                    result, diagnosis="; ".join(dict.fromkeys(self.shape_notes)))
            out.append(result)
        return out


def run_op_case(case, dtype: str, cache: dict) -> list[WitnessResult]:
    """Every check of ``case`` (which has ``op``) in ``dtype``."""
    return OpCheck(case, dtype, cache).run()
