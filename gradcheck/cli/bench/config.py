"""What the bench measures (:class:`Config`, the workloads' fixed formulas, the targets)
and what a measurement is (:class:`Row`, :class:`Report`, :class:`Workload`): data only."""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Callable

ELEMENTWISE = "sum(log(1 + exp(x)) * tanh(x) + sigmoid(x)**2)"


def _bundled() -> Path:
    """Where the bundled cases live: the installed package's own copy (a wheel carries
    the repository's cases/ as gradcheck/bundled_cases/: setup.py), else the checkout's
    cases/, beside the package (a clone, an editable install). A folder on the disk, not
    any resource: an op case's module is imported from its case file's folder."""
    shipped = Path(str(files("gradcheck"))) / "bundled_cases"
    return shipped if shipped.is_dir() else Path(__file__).resolve().parents[3] / "cases"


BUNDLED = _bundled()
VERSION = 2

SECTIONS = {
    "checkers": "(a) Gradient checkers side by side",
    "memory": "(b) Every witness on a large input: time and peak memory",
    "compile": "(c) Symbolic compile time against formula size",
    "engine": "(d) Engine overhead against PyTorch",
    "tensor": "(e) Layers at real sizes",
    "opchecks": "(f) What each newer op check costs on the bundled ops",
    "speed": "(g) One point at every element against one projection (fast_mode)",
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

#: Section (e)'s layers: label -> (the case's keys, each input's keys but its shape),
#: and the inputs' shapes by :attr:`Config.layers`. The cross-entropy's y is a fixed
#: input (requires_grad = false) drawn in [0, 1], not a one-hot literal: a 1024×1000
#: literal takes seconds to parse.
LAYERS = {
    "sum(tanh(x @ W))": (
        {"expr": "sum(tanh(x @ W))", "inputs": {"x": {}, "W": {}}},
        {"real": {"x": [256, 512], "W": [512, 512]}, "small": {"x": [4, 6], "W": [6, 5]}}),
    "attention softmax(q kᵀ / 8) v": (
        {"let": {"s": "q @ transpose(k) / 8"},
         "expr": "exp(s - logsumexp(s, axis=-1, keepdims=True)) @ v",
         "gradient": "random", "inputs": {"q": {}, "k": {}, "v": {}}},
        {"real": {n: [16, 256, 64] for n in "qkv"}, "small": {n: [2, 4, 3] for n in "qkv"}}),
    "layer norm with weight and bias": (
        {"let": {"mu": "mean(x, axis=-1, keepdims=True)",
                 "variance": "mean((x - mu)**2, axis=-1, keepdims=True)"},
         "expr": "(x - mu) / sqrt(variance + 0.00001) * gamma + beta", "gradient": "random",
         "inputs": {"x": {}, "gamma": {"domain": [0.5, 1.5]}, "beta": {}}},
        {"real": {"x": [4096, 1024], "gamma": [1024], "beta": [1024]},
         "small": {"x": [4, 8], "gamma": [8], "beta": [8]}}),
    "softmax cross-entropy": (
        {"expr": "mean(logsumexp(z, axis=-1) - sum(z * y, axis=-1))",
         "inputs": {"z": {}, "y": {"requires_grad": False, "domain": [0, 1]}}},
        {"real": {"z": [1024, 1000], "y": [1024, 1000]}, "small": {"z": [4, 5], "y": [4, 5]}}),
}
#: Section (e)'s checker comparison: this formula at 4096 inputs.
CHECKED = ("sum(tanh(x @ W))", {"real": {"x": [32, 64], "W": [64, 32]},
                                "small": {"x": [4, 6], "W": [6, 4]}})


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
    layers: str = "real"                # (e): the shapes of :data:`LAYERS` ("small")
    layer_names: tuple[str, ...] | None = None  # (e): which of LAYERS (None: all)
    cache_cases: str = ""               # (e): the file below cases/ run ("": all)
    cache_keyword: str | None = None    # (e): and its -k
    cli_cap: float = 300.0              # (e): seconds one `gradcheck run` may take
    op_files: tuple[str, ...] = ()      # (f): the files of cases/ops run (): all)
    op_keyword: str | None = None       # (f): and their -k
    op_dtype: str | None = None         # (f): and their --dtype (None: the cases' own)
    repeat: int = 3                     # runs per measurement (the median is kept)
    once_over: float = 5.0              # a run longer than this is not repeated
    quick: bool = False


FULL = Config()
QUICK = Config(sizes=(10, 100), big=1000, memory_n=10_000, depths=(2, 3), large_ops=60,
               chain=(100, 8), layers="small", layer_names=("sum(tanh(x @ W))",),
               cache_cases="layers.toml", cache_keyword="dot-product",
               op_files=("paths.toml",), op_keyword="custom-op-swish", op_dtype="float64",
               repeat=1, quick=True)

# Targets, at the full configuration's sizes.
TARGET_MEMORY_SECONDS = 10.0
TARGET_MEMORY_RATIO = 20.0
TARGET_DEPTH = 8
TARGET_DEPTH_SECONDS = 2.0
TARGET_LARGE_SECONDS = 10.0
TARGET_BACKWARD_FORWARD = 3.0
TARGET_ENGINE_TORCH = 2.0
TARGET_LAYER_SECONDS = 10.0
TARGET_LAYER_MEMORY = 20.0
TARGET_OVER_FULL = 20.0       # torch's full check's seconds / gradcheck's, at least
TARGET_OVER_FAST = 5.0        # gradcheck's seconds / torch fast_mode's, at most


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
