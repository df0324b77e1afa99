"""The trust chain of a traced reference: a PyTorch function traced to formula text
(:func:`gradcheck.tracing.trace.trace`), read as a case, and its exact reference (value
and vᵀJ) compared with torch's own float64 autograd through the function itself."""

from __future__ import annotations

import numpy as np
import torch

from gradcheck.cases import case_from_dict
from gradcheck.reference import kind_of
from gradcheck.tracing.trace import Argument, trace


def traced_case(fn, arguments, domains=None, frozen=()):
    """The case whose expr and lets are ``fn`` traced over ``arguments`` (``frozen``:
    float inputs that require no gradient, as torch's class weights)."""
    domains = domains or {}
    translation = trace(fn, arguments)
    assert len(translation.outputs) == 1, translation.outputs
    inputs = {}
    for a in arguments:
        spec = {"shape": list(a.shape)}
        if a.kind != "float":
            spec["dtype"] = "int64" if a.kind == "int" else "bool"
        if a.name in frozen:
            spec["requires_grad"] = False
        if a.name in domains:
            spec["domain"] = list(domains[a.name])
        inputs[a.name] = spec
    table = {"name": "traced", "expr": translation.outputs[0], "inputs": inputs}
    if translation.lets:
        table["let"] = dict(translation.lets)
    return case_from_dict(table), translation


def _draw(rng, a: Argument, domain):
    if a.kind == "bool":
        return rng.integers(0, 2, a.shape).astype(bool)
    if a.kind == "int":
        lo, hi = domain
        return rng.integers(int(lo), int(hi), a.shape)
    lo, hi = domain if domain is not None else (-2.0, 2.0)
    return rng.uniform(lo, hi, a.shape)


def assert_traced_matches_torch(fn, arguments, domains=None, seed=0, rtol=1e-9,
                                atol=1e-11, frozen=()):
    """``fn``'s traced reference equals torch's float64 value and vᵀJ at a random
    point, for every float input; returns the translation."""
    domains = domains or {}
    case, translation = traced_case(fn, arguments, domains, frozen)
    rng = np.random.default_rng(seed)
    point = {a.name: _draw(rng, a, domains.get(a.name)) for a in arguments}
    tensors = [torch.tensor(point[a.name], requires_grad=a.kind == "float"
                            and a.name not in frozen)
               for a in arguments]
    out = fn(*tensors)
    v = rng.standard_normal(tuple(out.shape))
    out.backward(torch.tensor(v))
    ref = kind_of(case)(case)
    got = ref.evaluate(point, np.asarray(v))
    np.testing.assert_allclose(np.asarray(got.value, dtype=float),
                               out.detach().numpy(), rtol=rtol, atol=atol)
    for a, t in zip(arguments, tensors):
        if a.kind != "float" or a.name in frozen:
            continue
        exact = got.grads.get(a.name)
        exact = np.zeros(a.shape) if exact is None else exact
        mine = np.zeros(a.shape) if t.grad is None else t.grad.numpy()
        np.testing.assert_allclose(exact, mine, rtol=rtol, atol=atol,
                                   err_msg=f"{a.name}.grad of {translation.outputs[0]}")
    return translation
