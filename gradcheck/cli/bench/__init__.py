"""``gradcheck bench``: fixed workloads measured side by side, one comparison table.

Seven sections, each a list of :class:`Row` (data only; printing is the caller's):

(a) ``checkers`` (:mod:`.checkers`): gradcheck's full check against
    ``torch.autograd.gradcheck`` (slow and fast mode) and, when JAX is importable,
    ``jax.test_util.check_grads``, on one elementwise formula at growing sizes. Each row
    says what that checker verified.
(b) ``memory`` (:mod:`.memory`): the million-element check with every witness, in a
    fresh process: wall time and peak resident memory against the input's size.
(c) ``compile`` (:mod:`.compile_time`, formulas from :mod:`.formulas`): building and
    evaluating the symbolic reference (``Reference``) against formula size, and plain
    ``sympy.diff`` + ``lambdify`` of the same expression, each in a fresh process under a
    time cap.
(d) ``engine`` (:mod:`.overhead`): gradcheck's engine against PyTorch on chains of
    elementwise ops.
(e) ``tensor`` (:mod:`.tensor`, fresh ``gradcheck run`` processes from :mod:`.clirun`):
    formulas that mix elements (matmul, attention, layer norm, cross-entropy) at real
    sizes: wall time and peak memory; ``sum(tanh(x @ W))`` at 4096 inputs against
    ``torch.autograd.gradcheck`` and JAX; the bundled cases once, and their compile.
(f) ``opchecks`` (:mod:`.opcost`): the bundled op cases with every check, and with each
    of the newer ones (op.jvp and those after it in OP_CHECKS) switched off in turn:
    seconds, and what each check adds to each case run.
(g) ``speed`` (:mod:`.speed`, measured in fresh processes by :mod:`.speed_jobs`): one
    point checked at every element against torch fwd+bwd, ``torch.autograd.gradcheck``
    (fast_mode; the full check at 4,096 inputs) and, when JAX is importable,
    ``jax.test_util.check_grads`` on the same formula in jax.numpy (:mod:`.jaxforms`),
    per layer, on one thread and on the default threads.

Rows with a target say whether it was met (``met``); in a ``--quick`` run the sizes are
too small for the targets, which are then not assessed (``met`` is ``None``).

The other modules: :mod:`.config` (what is measured, the data types), :mod:`.run` (the
plan and the command), :mod:`.child` and :mod:`.jobs` (the fresh processes and what they
run), :mod:`.notes` and :mod:`.render` (the report's text). :mod:`.verdicts` is the
``--section verdicts`` sweep, run by the CLI on its own.
"""

from .config import (CHAINS, ELEMENTWISE, FULL, QUICK, SECTIONS, TEMPLATES, VERSION, Config,
                     Report, Row, Workload)
from .formulas import count_ops, formula_of_size, random_formula, size_goal
from .render import markdown, to_json
from .run import main, run_bench

__all__ = ["CHAINS", "ELEMENTWISE", "FULL", "QUICK", "SECTIONS", "TEMPLATES", "VERSION",
           "Config", "Report", "Row", "Workload", "count_ops", "formula_of_size", "main",
           "markdown", "random_formula", "run_bench", "size_goal", "to_json"]
