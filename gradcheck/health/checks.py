"""The doctor's checks, each reading one run of the user's loss (and training step) and
returning findings; :func:`diagnose` runs them in order."""

from __future__ import annotations

import copy

import torch

from .findings import Finding
from .trace import ModuleNames, Recorder, finite, graph_nodes


def is_frozen(name: str, frozen) -> bool:
    """``name`` is declared frozen: named itself, or a module above it is."""
    return any(name == f or name.startswith(f + ".") for f in frozen)


def _shape(t) -> tuple | None:
    return tuple(t.shape) if isinstance(t, torch.Tensor) else None


def targets(batch) -> list[Finding]:
    """A batch element after the first (a target, a label, a mask) that requires grad."""
    return [Finding("target-requires-grad", f"batch[{i}]", _shape(t),
                    f"batch[{i}] (shape {list(t.shape)}) has requires_grad=True: the loss "
                    "then also trains the target, and its .grad is filled every step")
            for i, t in enumerate(batch) if i and isinstance(t, torch.Tensor)
            and t.requires_grad]


def held_frozen(named: dict, optimizer, frozen) -> list[Finding]:
    """Parameters the optimizer holds that can never change: requires_grad=False."""
    if optimizer is None:
        return []
    names = {id(p): n for n, p in named.items()}
    out = []
    for group in optimizer.param_groups:
        for p in group["params"]:
            name = names.get(id(p), "?")
            if not p.requires_grad and not is_frozen(name, frozen):
                out.append(Finding("param-frozen", name, _shape(p),
                                   f"{name} has requires_grad=False but the optimizer "
                                   "holds it: it never gets a gradient and never changes"))
    return out


def bad_values(batch, named: dict) -> list[Finding]:
    """NaN or inf already in the data or the weights, before any op runs."""
    out = [Finding("non-finite", f"batch[{i}]", _shape(t), f"batch[{i}] holds NaN or inf "
                   "before the model runs (the data itself)")
           for i, t in enumerate(batch) if not finite(t)]
    return out + [Finding("non-finite", n, _shape(p), f"parameter {n} holds NaN or inf "
                          "(an earlier step diverged, or its initialisation)")
                  for n, p in named.items() if not finite(p)]


def no_graph(loss, rec: Recorder, named: dict) -> Finding:
    cut = rec.cuts[-1] if rec.cuts else None
    if cut is not None:
        why = (f"the graph was cut by {cut.op} in {cut.where} at {cut.line} "
               f"(it held {', '.join(sorted(cut.params)[:3])})")
    elif not any(p.requires_grad for p in named.values()):
        why = "no parameter has requires_grad=True"
    else:
        why = "no parameter that requires grad reached the loss"
    what = (f"tensor with grad_fn=None (shape {list(loss.shape)})"
            if isinstance(loss, torch.Tensor) else f"{type(loss).__name__}, not a tensor")
    return Finding("no-graph", "loss", _shape(loss),
                   f"the loss is a {what}: backward() would raise 'element 0 of tensors "
                   f"does not require grad and does not have a grad_fn'; {why}")


def forward_findings(loss, rec: Recorder) -> list[Finding]:
    """Non-finite values born in the forward, and broadcasts on the path to the loss."""
    out = []
    if not finite(loss):
        value = "NaN" if bool(torch.isnan(loss).any()) else "inf"
        e = rec.origin(loss)
        out.append(Finding("non-finite", "loss", _shape(loss), f"the loss is {value}")
                   if e is None else
                   Finding("non-finite", f"{e.where}:{e.op}", e.shapes,
                           f"the loss is {value}: first produced by {e.op} in {e.where} "
                           f"at {e.line} (output shape {list(e.shapes)})"))
    if loss.grad_fn is not None:
        path = graph_nodes(loss.grad_fn)
        for e in rec.broadcasts:
            if id(e.node) in path:
                a, b, r = (list(s) for s in e.shapes)
                out.append(Finding("loss-broadcast", f"{e.where}:{e.op}", e.shapes[2],
                                   f"{e.op} in {e.where} at {e.line} combines shapes {a} "
                                   f"and {b}, broadcast to {r}: every element meets "
                                   "every other, which trains, wrongly"))
    return out


def _cause(name: str, rec: Recorder) -> str:
    for cut in rec.cuts:
        if name in cut.params:
            return f"cut from the graph by {cut.op} in {cut.where} at {cut.line}"
    return "unused: it never reaches the loss"


def grad_findings(named: dict, rec: Recorder, frozen, bad_node) -> list[Finding]:
    """Each trainable parameter's .grad after backward: None, zero, or non-finite."""
    out = []
    for name, p in named.items():
        if not p.requires_grad or is_frozen(name, frozen):
            continue
        if p.grad is None:
            out.append(Finding("param-no-grad", name, _shape(p),
                               f"{name} requires grad but its .grad is None after "
                               f"backward: {_cause(name, rec)}"))
        elif not finite(p.grad):
            where = (f"; first produced by the backward of {bad_node.op} in "
                     f"{bad_node.where}" if bad_node is not None else "")
            out.append(Finding("non-finite", name, _shape(p),
                               f"the gradient of {name} holds NaN or inf{where}"))
        elif not bool(p.grad.any()):
            out.append(Finding("grad-zero", name, _shape(p),
                               f"the gradient of {name} is exactly zero everywhere: "
                               "it never changes"))
    return out


def backward(loss, rec: Recorder):
    """``loss.backward()`` with hooks on the nodes of the forward: returns the first
    node (in backward order) whose gradients in are finite and out are not."""
    first = []

    def hook(grad_inputs, grad_outputs, event):
        if not first and all(map(finite, grad_outputs)) \
                and not all(map(finite, grad_inputs)):
            first.append(event)
    handles = [e.node.register_hook(lambda gi, go, e=e: hook(gi, go, e))
               for e in rec.nodes.values()]
    try:
        loss.backward()
    finally:
        for h in handles:
            h.remove()
    return first[0] if first else None


def accumulation(named: dict, batch, train_step, optimizer, model) -> list[Finding]:
    """The training step twice from the same weights, optimizer state and random state:
    a step that zeroes its gradients gives the same .grad twice; one that does not
    gives twice the first."""
    params = {n: p for n, p in named.items() if p.requires_grad}
    weights = {n: p.detach().clone() for n, p in params.items()}
    state = copy.deepcopy(optimizer.state_dict()) if optimizer is not None else None
    rng = torch.get_rng_state()
    # a CUDA model's dropout draws from the devices' generators (read only when CUDA
    # is in use already: reading them would initialise it)
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None

    def rewind():
        with torch.no_grad():
            for n, p in params.items():
                p.copy_(weights[n])
        if state is not None:
            optimizer.load_state_dict(copy.deepcopy(state))
        torch.set_rng_state(rng)
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)
    for p in params.values():
        p.grad = None
    try:
        train_step(model, *batch)
        first = {n: p.grad.detach().clone() for n, p in params.items()
                 if p.grad is not None and bool(p.grad.any())}
        rewind()
        train_step(model, *batch)
        summed = [n for n, g in first.items() if params[n].grad is not None
                  and torch.allclose(params[n].grad, 2 * g, rtol=1e-4, atol=1e-12)
                  and not torch.allclose(params[n].grad, g, rtol=1e-4, atol=1e-12)]
    finally:
        rewind()
    if not summed:
        return []
    shown = ", ".join(summed[:3]) + (f" and {len(summed) - 3} more" if len(summed) > 3
                                     else "")
    name = getattr(train_step, "__name__", "train_step")
    return [Finding("grad-accumulates", name, None,
                    f"{name} run twice on the same batch from the same weights: the "
                    f"second call's .grad is the sum of both calls' gradients (twice the "
                    f"first) for {shown}; gradients are never zeroed")]


def diagnose(model, loss_fn, batch, optimizer, train_step, frozen) -> list[Finding]:
    """Every finding of one run, in :data:`~.findings.KINDS` order."""
    from .findings import KINDS

    named = dict(model.named_parameters())
    bad = bad_values(batch, named)
    found = targets(batch) + held_frozen(named, optimizer, frozen) + bad
    saved = {n: p.grad for n, p in named.items()}
    rng = torch.get_rng_state()   # dropout draws: the user's next draw is unchanged
    for p in named.values():
        p.grad = None
    try:
        later = _forward_backward(model, loss_fn, batch, named, frozen)
        if bad:   # NaN in the data or the weights: what follows from it says nothing new
            later = [f for f in later if f.kind not in ("non-finite", "grad-zero")]
        found += later
        if train_step is not None and not any(f.kind == "no-graph" for f in found):
            found += accumulation(named, batch, train_step, optimizer, model)
    finally:
        for n, p in named.items():
            p.grad = saved[n]
        torch.set_rng_state(rng)
    return sorted(found, key=lambda f: KINDS.index(f.kind))


def _forward_backward(model, loss_fn, batch, named, frozen) -> list[Finding]:
    rec = Recorder({id(p): n for n, p in named.items()})
    with ModuleNames(model, rec), rec:
        loss = loss_fn(model, *batch)
    if not isinstance(loss, torch.Tensor) or loss.grad_fn is None:
        return [no_graph(loss, rec, named)]
    if loss.numel() != 1:
        raise ValueError(f"loss_fn returned a tensor of shape {list(loss.shape)}; the "
                         "doctor needs the scalar loss (reduce it with .mean() or .sum())")
    found = forward_findings(loss, rec)
    bad_node = backward(loss, rec)
    grads = grad_findings(named, rec, frozen, bad_node)
    if any(f.kind == "non-finite" for f in found):   # the forward's NaN explains them
        grads = [g for g in grads if g.kind not in ("non-finite", "grad-zero")]
    return found + grads
