"""Section (d), ``engine``: gradcheck's engine against PyTorch on chains of elementwise
ops: forward and backward seconds, and two ratios with their targets."""

from __future__ import annotations

import statistics
import time

from .config import CHAINS, TARGET_BACKWARD_FORWARD, TARGET_ENGINE_TORCH, Config, Row, Workload


def _chain(lib, x, length: int, ops: tuple[str, ...]):
    """``length`` elementwise ops in a chain, cycling through ``ops``, then a sum."""
    steps = {"sin": lib.sin, "tanh": lib.tanh, "scale": lambda t: t * 1.01,
             "shift": lambda t: t + 0.1, "expneg": lambda t: lib.exp(-t)}
    for i in range(length):
        x = steps[ops[i % len(ops)]](x)
    return lib.sum(x)


#: runs of each chain on each library, in turns (the median is kept): a chain takes
#: tens of milliseconds, where the other core's load moves one run by a third
CHAIN_RUNS = 9


def chain_runs(cfg: Config) -> int:
    return cfg.repeat if cfg.quick else max(cfg.repeat, CHAIN_RUNS)


def _pass_times(label: str, cfg: Config) -> dict[str, float]:
    """Median seconds of each pass (``engine forward``, ``torch backward``, ...)."""
    import numpy as np
    import torch

    from ... import engine

    n, length = cfg.chain
    ops = CHAINS[label]
    data = np.random.default_rng(0).standard_normal(n)
    times: dict[str, list[float]] = {k: [] for k in ("engine forward", "engine backward",
                                                     "torch forward", "torch backward")}
    for _ in range(chain_runs(cfg)):
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
    return {k: statistics.median(v) for k, v in times.items()}


def engine_rows(label: str, cfg: Config) -> list[Row]:
    """Forward and backward of one chain on the engine and on torch (float64), and the
    two ratios with their targets."""
    n, length = cfg.chain
    sizes = {"n": n, "ops": length, "chain": label}
    t, runs = _pass_times(label, cfg), chain_runs(cfg)
    rows = [Row("engine", k, sizes, t[k], "forward pass" if "forward" in k
                else "backward pass (all leaf gradients)", runs) for k in t]
    assess = not cfg.quick
    bf = t["engine backward"] / t["engine forward"]
    et = ((t["engine forward"] + t["engine backward"])
          / (t["torch forward"] + t["torch backward"]))
    rows += [
        Row("engine", "engine backward / engine forward", sizes, None,
            "ratio of the two engine passes above", runs, ratio=bf,
            ratio_of="engine backward seconds / engine forward seconds",
            target=f"<= {TARGET_BACKWARD_FORWARD:g}",
            met=bf <= TARGET_BACKWARD_FORWARD if assess else None),
        Row("engine", "engine / torch (forward + backward)", sizes, None,
            "ratio of the engine's and torch's forward + backward", runs, ratio=et,
            ratio_of="engine seconds / torch seconds",
            target=f"<= {TARGET_ENGINE_TORCH:g}",
            met=et <= TARGET_ENGINE_TORCH if assess else None),
    ]
    return rows


def engine_workloads(cfg: Config) -> list[Workload]:
    return [Workload("engine", f"chain of {cfg.chain[1]} ops ({label}) on "
                     f"{cfg.chain[0]} elements",
                     lambda label=label: engine_rows(label, cfg)) for label in CHAINS]
