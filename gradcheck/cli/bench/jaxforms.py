"""Section (g)'s workloads written in jax.numpy, for ``jax.test_util.check_grads``: by the
workload's label (:func:`.speed.workloads_of`), the same formula as its case's, written
by hand from :data:`.config.LAYERS` and :data:`.speed.ELEMENTWISE` (the formula language's
``transpose`` swaps the last two axes; its reductions take ``axis`` and ``keepdims`` as
NumPy's). A workload without a form here (the transformer block) has no JAX row.

Each form takes ``(jax, jnp, v)``, ``v`` every input's value by name (the fixed ones,
requires_grad = false, among them), and returns the output; :func:`jax_function` makes
of it the function of the differentiated inputs alone, as the torch side's ``f``."""

from __future__ import annotations

from typing import Callable

from .config import CHECKED


def _tanh_matmul(jax, jnp, v):
    return jnp.sum(jnp.tanh(v["x"] @ v["W"]))


def _attention(jax, jnp, v):
    s = v["q"] @ jnp.swapaxes(v["k"], -2, -1) / 8
    return jnp.exp(s - jax.nn.logsumexp(s, axis=-1, keepdims=True)) @ v["v"]


def _layer_norm(jax, jnp, v):
    x = v["x"]
    mu = jnp.mean(x, axis=-1, keepdims=True)
    variance = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return (x - mu) / jnp.sqrt(variance + 0.00001) * v["gamma"] + v["beta"]


def _cross_entropy(jax, jnp, v):
    z, y = v["z"], v["y"]
    return jnp.mean(jax.nn.logsumexp(z, axis=-1) - jnp.sum(z * y, axis=-1))


def _elementwise(jax, jnp, v):
    x = v["x"]
    return jnp.sum(jnp.sin(x) * jnp.exp(-x ** 2) + jnp.tanh(x))


#: workload label -> its form (the labels of config.LAYERS, speed.ELEMENTWISE and the
#: checkers' size, written out: importing .speed here would close an import cycle
#: through the child's jobs; a test compares each with torch on every workload's case)
FORMS: dict[str, Callable] = {
    "sum(tanh(x @ W))": _tanh_matmul,
    "attention softmax(q kᵀ / 8) v": _attention,
    "layer norm with weight and bias": _layer_norm,
    "softmax cross-entropy": _cross_entropy,
    "sum(sin(x) * exp(-x**2) + tanh(x))": _elementwise,
    f"{CHECKED[0]}, the checkers' size": _tanh_matmul,
}


def jax_function(label: str, names: list[str], fixed: dict, mods) -> Callable | None:
    """The JAX function of the workload ``label`` (None: it has no form) of the inputs
    ``names``, in that order; ``fixed``: the other inputs' values (as ``jnp`` arrays).
    ``mods``: :func:`.checkers.load_jax`'s answer."""
    form = FORMS.get(label)
    if form is None:
        return None
    jax, jnp = mods[0], mods[1]

    def f(*xs):
        return form(jax, jnp, {**fixed, **dict(zip(names, xs))})

    return f
