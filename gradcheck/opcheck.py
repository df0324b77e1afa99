"""Checks of a user's custom op against the formula it claims to compute.

Each check is reported by name, as a witness result ``op.<check>``:

- ``op.forward``: the op's outputs against the reference's values;
- ``op.backward``: vᵀJ through autograd for random cotangents v, against the exact one;
- ``op.jacobian``: the same for every one-hot v (the whole Jacobian), for small outputs;
- ``op.zero``: a zero ``grad_output`` gives exact zeros (NaN and inf fail);
- ``op.determinism``: two backward calls with the same v agree (within ``nondet_tol``);
- ``op.shapes``: what the Function's own ``backward`` returns, by PyTorch's contract:
  what autograd rejects fails; what it accepts but changes (a gradient it sums back to
  its input's shape, trailing Nones, a gradient for an input that needs none) is a note,
  or a failure with ``strict_shapes``;
- ``op.inplace``: forward and backward leave every input and every ``grad_output``
  unchanged, and a second forward after a backward gives the same outputs;
- ``op.double`` (``order = 2``): double backward against the exact second derivatives:
  d(vᵀJ u)/dx (the Hessian-vector product) and d(vᵀJ u)/dv (= J u), as gradgradcheck.

Tolerances are per element (the table in :mod:`gradcheck.compare`): the rounding-error
bound of a correct computation of the reference formula in the op's dtype, or twice
what PyTorch's own autograd of that formula errs by in the same dtype (the peer),
whichever is larger. A failing check carries a diagnosis (:mod:`gradcheck.diagnose`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .backends.op import Runner, kind_of, load, to_numpy
from .compare import BOUND_FACTOR, Tally, model_tolerance, peer_tolerance
from .dtypes import round_to, unit_roundoff
from .diagnose import Sample
from .evaluation import Evaluation
from .result import FAILED, WitnessResult
from .sampling import case_points, case_rng

COTANGENTS = 2             # random v per point
JACOBIAN_LIMIT = 64        # output elements up to which every one-hot v is checked
CHECKS = ("forward", "backward", "jacobian", "zero", "determinism", "shapes", "inplace",
          "double")


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
    """Values and Σ_k v_kᵀ J_k of all outputs."""
    evals = [r.evaluate(point, v) for r, v in zip(refs, vs)]
    grads: dict = {}
    for e in evals:
        for name, g in e.grads.items():
            if g is None:
                grads.setdefault(name, None)
                continue
            grads[name] = g if grads.get(name) is None else grads[name] + g
    return Evaluation(value=None, grads=grads,
                      retained={f"out{k}": e.value for k, e in enumerate(evals)})


def _sum_outputs(per_output: list[dict], key: str = "value") -> dict:
    """Quantities of several outputs' evaluations as the op's: ``out{k}`` for each
    output's ``key`` entry, and each ``x.grad`` summed over the outputs (None as 0)."""
    out: dict = {}
    for k, q in enumerate(per_output):
        out[f"out{k}"] = q.get(key)
        for name, g in q.items():
            if name == key or g is None:
                continue
            out[name] = g if out.get(name) is None else out[name] + g
    return out


def _tensor_like(like, array):
    """``array`` as a torch tensor of ``like``'s dtype and device."""
    import torch

    return torch.tensor(np.asarray(array), dtype=like.dtype, device=like.device)


def _grad_quantities(grads: dict) -> dict:
    return {f"{n}.grad": g for n, g in grads.items()}


def _expandable(shape: tuple, grad: tuple) -> bool:
    """Whether a tensor of ``shape`` broadcasts to ``grad``'s shape: then autograd sums a
    gradient of that shape back to ``shape`` (at::is_expandable_to, the test in
    validate_outputs)."""
    return len(shape) <= len(grad) and all(
        n in (1, m) for n, m in zip(reversed(shape), reversed(grad)))


def _complex(dtype) -> bool:
    """A complex dtype, torch's or NumPy's (the engine's)."""
    return bool(getattr(dtype, "is_complex", False)) or getattr(dtype, "kind", "") == "c"


class OpCheck:
    """All checks of one op case in one dtype."""

    def __init__(self, case, dtype: str, cache: dict):
        self.case, self.dtype = case, dtype
        self.refs = references(case, cache)
        self.kind = kind_of(load(case.op, case.file) if isinstance(case.op, str) else case.op)
        self.runner = Runner(case, self.kind, dtype, case.device)
        # each output of the op as a formula case of its own, driven with its v: for the
        # rounding-error bounds and the peer baseline
        self.subcases = [dataclasses.replace(case, output=node, retain_grad=(),
                                             outputs=(node,), gradient="random")
                         for node in case.outputs]
        self.tallies = {c: Tally("op", dtype, case.atol, case.rtol) for c in CHECKS}
        self.at_point: dict = {}   # what the tolerances reuse at one point (see point)
        # every backward call at every point and v, for the diagnosis
        self.samples: list = []   # gradcheck.diagnose.Sample
        self.shape_notes: list[str] = []   # diagnoses of wrongly shaped raw gradients
        self.notes: dict[str, list[str]] = {c: [] for c in CHECKS}   # accepted, not failed

    def vs(self, index: int, draw: int) -> list[np.ndarray]:
        rng = case_rng(self.case, self.dtype, index, f"op-v{draw}")
        return [round_to(rng.standard_normal(n.shape), self.dtype) for n in self.case.outputs]

    def run(self) -> list[WitnessResult]:
        for i, point in enumerate(case_points(self.case, self.dtype)):
            self.point(i, point.values)
        return self.results()

    def point(self, i: int, point: dict) -> None:
        case, runner = self.case, self.runner
        self.at_point = {}   # the forward passes the tolerances reuse for every v here
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
        for draw in range(COTANGENTS):
            vs = self.vs(i, draw)
            exact = _exact(self.refs, point, vs)
            expected = _grad_quantities(exact.grads)
            tolerance = self.tolerance(point, vs, dict(exact.retained, **expected))
            if draw == 0:
                self.tallies["forward"].add_quantities(obtained_values, exact.retained, i,
                                                       tolerance)
            got = {n: to_numpy(g) for n, g in runner.vjp(leaves, outs, vs).items()}
            self.tallies["backward"].add_quantities(_grad_quantities(got), expected, i,
                                                    tolerance)
            # Every call after the point's first goes through a graph that has been
            # backpropagated before: a repeat, which shows state a backward modifies.
            self.samples.append(Sample(i, draw, got, exact.grads, exact_ones.grads, point,
                                       repeat=draw > 0))
            if draw == 0:
                again = {n: to_numpy(g) for n, g in runner.vjp(leaves, outs, vs).items()}
                self.samples.append(Sample(i, draw, again, exact.grads, exact_ones.grads,
                                           point, repeat=True))
                self.determinism(got, again, i)
                self.shapes(leaves, outs, vs, exact.grads)
                self.inplace(point, vs, obtained_values, i)
                if case.order == 2:
                    self.double(leaves, point, vs, i)
        self.jacobian(leaves, outs, point, i)
        # A zero grad_output must give exact zeros: a backward that computes 0 * inf or
        # 0 / 0 somewhere returns NaN, which training would then spread.
        got = {n: to_numpy(g) for n, g in runner.vjp(leaves, outs, zeros).items()}
        self.tallies["zero"].add_quantities(
            _grad_quantities(got),
            _grad_quantities({n: (None if exact_ones.grads.get(n) is None
                                  else np.zeros(case.input[n].shape)) for n in got}), i)

    # ------------------------------------------------------------------ tolerances
    def tolerance(self, point: dict, vs: list, exact: dict | None = None) -> dict:
        """Per-element tolerances of the op's values (``out{k}``) and vᵀJ (``x.grad``):
        the rounding-error model, and, given the exact quantities, the peer baseline
        (twice PyTorch's own error on the reference formula in this dtype)."""
        from .rounding import error_bounds

        bounds = [error_bounds(self.subcases[k], point, v, self.dtype, self.at_point)
                  for k, v in enumerate(vs)]
        model = model_tolerance(_sum_outputs(bounds), self.dtype)
        # A backward allowed to differ from itself by nondet_tol (atomics, reduction
        # order) may differ from the exact one by that much as well.
        model = {q: b + (self.case.nondet_tol if q.endswith(".grad") else 0.0)
                 for q, b in model.items()}
        if exact is None:
            return model
        peer = self.peer(point, vs)
        return model if peer is None else peer_tolerance(model, peer, exact, self.dtype)

    def peer(self, point: dict, vs: list) -> dict | None:
        """PyTorch's autograd of the reference formula, in the op's dtype, at this point:
        values and vᵀJ as quantities; None where torch cannot run it (an operation it
        lacks in this dtype or on this device)."""
        import torch

        from .backends import rebuild
        from .backends.torch import _numpy, applier, leaves as torch_leaves

        wanted = [s.name for s in self.case.inputs if s.requires_grad]
        per_output = []
        try:
            if "peer" not in self.at_point:   # the graph once per point, kept for each v
                leaves = torch_leaves(self.case, point, self.dtype)
                apply = applier(self.case, self.dtype)
                self.at_point["peer"] = leaves, [rebuild(node, leaves, apply)
                                                 for node in self.case.outputs]
            leaves, ys = self.at_point["peer"]
            for y, v in zip(ys, vs):
                grads = [None] * len(wanted)
                if y.requires_grad and wanted:
                    grads = torch.autograd.grad(
                        y, [leaves[n] for n in wanted], _tensor_like(y, v),
                        retain_graph=True, allow_unused=True)
                per_output.append(dict(value=_numpy(y), **{
                    f"{n}.grad": _numpy(g) for n, g in zip(wanted, grads)}))
        except Exception:   # no peer: the rounding-error model alone then decides
            return None
        return _sum_outputs(per_output)

    # ------------------------------------------------------------------ checks
    def inplace(self, point: dict, vs: list, outputs: dict, i: int) -> None:
        """Forward and backward leave the op's inputs and grad_outputs as they were, and
        a second forward after a backward returns what the first did."""
        runner, tally = self.runner, self.tallies["inplace"]
        leaves = runner.leaves(point)
        before = {n: to_numpy(t) for n, t in leaves.items()}
        outs = runner.forward(leaves)
        self._unchanged(before, leaves, "forward", i)
        cotangents = [runner.tensor(v) for v in vs]
        runner.vjp(leaves, outs, vs, tensors=cotangents)
        self._unchanged(before, leaves, "backward", i)
        for k, (v, t) in enumerate(zip(vs, cotangents)):
            if not np.array_equal(to_numpy(t), v, equal_nan=True):
                self.fail("inplace", f"backward modified grad_output of out{k} in place")
        again = runner.forward(runner.leaves(point))
        tally.atol, tally.rtol = self.case.nondet_tol, 0.0
        tally.add_quantities({f"out{k}": to_numpy(y) for k, y in enumerate(again)},
                             outputs, i)
        if tally.mismatched and not tally.problems:
            tally.problems.append("a second forward after a backward returns other "
                                  "values: state kept between calls?")

    def _unchanged(self, before: dict, leaves: dict, stage: str, i: int) -> None:
        tally = self.tallies["inplace"]
        for name, value in before.items():
            tally.checked += value.size
            if not np.array_equal(to_numpy(leaves[name]), value, equal_nan=True):
                self.fail("inplace", f"{stage} modified input {name} in place")

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
                tolerance = self.tolerance(point, vs, expected)
                self.tallies["jacobian"].add_quantities(
                    {rename[q]: g for q, g in _grad_quantities(got).items()},
                    {rename[q]: g for q, g in expected.items()}, i,
                    {rename[q]: b for q, b in tolerance.items() if q in rename})

    def shapes(self, leaves, outs, vs, exact: dict) -> None:
        """What the Function's own ``backward`` returns, judged by PyTorch's contract for
        it (PyNode::apply in torch/csrc/autograd/python_function.cpp, then
        validate_outputs in torch/csrc/autograd/engine.cpp; tests/test_op_shapes.py
        holds each rule against real autograd).

        What autograd rejects fails: more gradients than forward took arguments (unless
        the extra ones are None) or fewer, a gradient for a non-tensor argument, a shape
        its input's does not broadcast to, a complex gradient for a real input, a
        tensor on another device (unless 0-d). What autograd accepts but changes is a
        note, or a failure under ``strict_shapes``: trailing Nones (dropped), a gradient
        for an input that needs none (discarded unchecked), None for one that needs one
        (zero), a shape the input's broadcasts to (summed back to it), another dtype
        (cast)."""
        raw = self.runner.raw_backward(outs, vs)
        if raw is None:
            return
        self.tallies["shapes"].checked += 1
        strict = self.case.strict_shapes
        name = f"{self.kind.name}.backward"

        def accepted(message: str, autograd: str) -> None:
            if strict:   # the project wants backward's own return exact
                self.fail("shapes", message)
            else:
                self.notes["shapes"].append(f"{message}: {autograd}")

        tensors = len(self.case.inputs)
        count = tensors + len(self.case.args)       # forward's arguments after ctx
        if len(raw) > count and all(g is None for g in raw[count:]):
            accepted(f"{name} returned {len(raw)} gradients; forward was given {count} "
                     "arguments", "autograd drops the trailing None" + "s" * (
                         len(raw) - count > 1))
            raw = raw[:count]
        if len(raw) != count:
            self.fail("shapes", f"{name} returned {len(raw)} gradients; forward was "
                                f"given {count} arguments (autograd rejects this)")
            return
        for k, (arg, g) in enumerate(zip(self.case.args, raw[tensors:]), tensors + 1):
            if g is not None:
                self.fail("shapes", f"{name} returned a gradient for argument {k} "
                                    f"({arg!r}), which is not a tensor (autograd rejects "
                                    "this)")
        for spec, g in zip(self.case.inputs, raw):
            x = leaves[spec.name]
            if g is None:
                if spec.requires_grad:
                    accepted(f"{name} returned None for {spec.name}, which needs a "
                             "gradient", "autograd takes it as zero")
                continue
            if not spec.requires_grad:
                accepted(f"{name} returned a gradient for {spec.name}, which needs none "
                         "(ctx.needs_input_grad is False there)",
                         "autograd discards it unchecked")
                if not strict:
                    continue
            if not hasattr(g, "shape"):
                self.fail("shapes", f"{name} returned {type(g).__name__} for "
                                    f"{spec.name}, neither a tensor nor None")
                continue
            got, want = tuple(g.shape), tuple(x.shape)
            if got != want:
                message = (f"{name} returned a gradient of shape {list(got)} for "
                           f"{spec.name} of shape {list(want)}")
                if _expandable(want, got):
                    accepted(message, f"autograd sums it back to {list(want)} over the "
                                      "broadcast axes")
                else:
                    self.fail("shapes", f"{message}, which autograd rejects (the input's "
                                        "shape does not broadcast to it)")
                if strict or not _expandable(want, got):
                    self.shape_notes += self.diagnose({spec.name: to_numpy(g)},
                                                      {spec.name: exact.get(spec.name)})
            if g.dtype != x.dtype:
                message = (f"{name} returned a {g.dtype} gradient for {spec.name} of "
                           f"dtype {x.dtype}")
                if _complex(g.dtype) and not _complex(x.dtype):
                    self.fail("shapes", f"{message}, which autograd rejects (complex for "
                                        "a real input)")
                else:
                    accepted(message, f"autograd casts it to {x.dtype}")
            if getattr(g, "device", None) != getattr(x, "device", None):
                message = (f"{name} returned a gradient on {g.device} for {spec.name} on "
                           f"{x.device}")
                if g.ndim == 0:
                    accepted(message, f"autograd moves a 0-d gradient to {x.device}")
                else:
                    self.fail("shapes", f"{message}, which autograd rejects")

    def double(self, leaves, point, vs, i: int) -> None:
        """Second order, as gradgradcheck: differentiate s = Σ uᵀ(vᵀJ) with respect to
        the inputs (the Hessian-vector product of vᵀy along u) and to each grad_output
        v (J u, the Jacobian-vector product), against the exact ones."""
        import torch

        if self.kind.engine:
            self.fail("double", "order = 2 needs a torch op (the engine has no "
                                "double backward)")
            return
        runner, case = self.runner, self.case
        outs = runner.forward(leaves)
        cotangents = [runner.tensor(v).requires_grad_(True) for v in vs]
        grads = runner.vjp(leaves, outs, vs, create_graph=True, tensors=cotangents)
        names = [n for n, g in grads.items() if g is not None and g.requires_grad]
        rng = case_rng(case, self.dtype, i, "op-u")
        us = {n: round_to(rng.standard_normal(case.input[n].shape), self.dtype)
              for n in grads}
        targets = [leaves[n] for n in grads] + cotangents
        if names:
            second = torch.autograd.grad(
                [grads[n] for n in names], targets,
                grad_outputs=[runner.tensor(us[n]) for n in names], allow_unused=True)
        else:
            second = [None] * len(targets)
        got = {f"{n}.grad": to_numpy(g) for n, g in zip(grads, second)}
        got.update({f"d/d grad_output{k}": to_numpy(g)
                    for k, g in enumerate(second[len(grads):])})
        expected, size = {}, {}   # exact values, and the magnitudes they are sums of
        for k, (ref, v) in enumerate(zip(self.refs, vs)):
            for n, h in ref.hvp(point, v, us).items():
                expected[f"{n}.grad"] = h + expected.get(f"{n}.grad", 0.0)
            for n, h in ref.hvp(point, v, us, absolute=True).items():
                size[f"{n}.grad"] = h + size.get(f"{n}.grad", 0.0)
            expected[f"d/d grad_output{k}"] = ref.jvp(point, us)
            size[f"d/d grad_output{k}"] = ref.jvp(point, us, absolute=True)
        # No gradient where one is due is a zero gradient for this comparison: autograd
        # returns None when the first derivative does not depend on that input.
        got = {q: (np.zeros(np.shape(expected[q])) if g is None and q in expected else g)
               for q, g in got.items()}
        peer = self.peer_double(point, vs, us)
        u = unit_roundoff(self.dtype)
        # Second derivatives are computed through the first ones: sums whose terms are as
        # large as the magnitudes, each rounded at the op's dtype.
        tolerance = {q: BOUND_FACTOR * 4 * u * (np.abs(e) + size[q])
                     for q, e in expected.items()}
        if peer is not None:
            tolerance = peer_tolerance(tolerance, peer, expected, self.dtype)
        self.tallies["double"].add_quantities(got, expected, i, tolerance)

    def peer_double(self, point: dict, vs: list, us: dict) -> dict | None:
        """The same second derivatives by PyTorch's double backward of the reference
        formula in the op's dtype (the peer baseline at second order)."""
        import torch

        from .backends import rebuild
        from .backends.torch import _numpy, applier, leaves as torch_leaves
        from .dtypes import torch_dtype

        tdtype, device = torch_dtype(self.dtype), self.case.device
        try:
            leaves = torch_leaves(self.case, point, self.dtype)
            apply = applier(self.case, self.dtype)
            wanted = [s.name for s in self.case.inputs if s.requires_grad]
            out: dict = {}
            for k, (node, v) in enumerate(zip(self.case.outputs, vs)):
                y = rebuild(node, leaves, apply)
                vt = torch.tensor(v, dtype=tdtype, device=device, requires_grad=True)
                if not y.requires_grad:
                    continue
                first = torch.autograd.grad(y, [leaves[n] for n in wanted], vt,
                                            create_graph=True, allow_unused=True)
                pairs = [(g, n) for g, n in zip(first, wanted)
                         if g is not None and g.requires_grad]
                if not pairs:
                    continue
                second = torch.autograd.grad(
                    [g for g, _ in pairs], [leaves[n] for n in wanted] + [vt],
                    grad_outputs=[torch.tensor(us[n], dtype=tdtype, device=device)
                                  for _, n in pairs], allow_unused=True)
                for n, h in zip(wanted, second[:-1]):
                    if h is not None:
                        out[f"{n}.grad"] = _numpy(h) + out.get(f"{n}.grad", 0.0)
                if second[-1] is not None:
                    out[f"d/d grad_output{k}"] = _numpy(second[-1])
            return out
        except Exception:   # no peer: the model alone decides
            return None

    def fail(self, check: str, message: str) -> None:
        self.tallies[check].mismatched += 1
        self.tallies[check].problems.append(message)

    def diagnosis(self) -> str:
        """What the wrong gradients look like (see :func:`gradcheck.diagnose.summarize`)."""
        from .diagnose import summarize

        jacobian = self.tallies["jacobian"]
        return summarize(self.samples, self.dtype, reference=self.case.outputs,
                         jacobian_right=jacobian.checked > 0 and not jacobian.mismatched)

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
            result = dataclasses.replace(tally.result(), witness=f"op.{check}",
                                         notes=tuple(dict.fromkeys(self.notes[check])))
            if result.status == FAILED and check in ("backward", "jacobian", "determinism"):
                result = dataclasses.replace(result, diagnosis=self.diagnosis())
            if result.status == FAILED and check == "shapes" and self.shape_notes:
                result = dataclasses.replace(
                    result, diagnosis="; ".join(dict.fromkeys(self.shape_notes)))
            out.append(result)
        return out


def run_op_case(case, dtype: str, cache: dict) -> list[WitnessResult]:
    """Every check of ``case`` (which has ``op``) in ``dtype``."""
    return OpCheck(case, dtype, cache).run()
