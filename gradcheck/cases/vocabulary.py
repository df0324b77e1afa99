"""The values a case file's keys may take and the counts it defaults to: names only,
no NumPy, so that the command line reads them for its help before anything heavy
loads (one BLAS thread per process is set then, :mod:`gradcheck.process.threads`)."""

from __future__ import annotations

from ..base import dtypes
from ..base.result import OP_CHECKS   # (the names case files switch off)

DTYPES = dtypes.NAMES     # float64, float32, float16, bfloat16
DEVICES = ("cpu", "cuda")
GRADIENTS = ("scalar", "ones", "random")
#: how op.double's exact second derivatives are built (order = 2): at tensor level
#: (reverse mode over the gradients' own tensor program), or element by element (SymPy's
#: second derivatives of the expanded formula, small formulas only)
SECOND_ORDERS = ("tensor", "expanded")
SUFFIXES = (".toml", ".yaml", ".yml")
MAX_POINTS = 1000
EXTREME_POINTS = 2   # points at large and small magnitudes, after the bulk (gradcheck.sampling.points)
KINK_POINTS = 2      # points close to the formula's kinks, after the extremes (gradcheck.sampling.kinks)


#: the checks of an op case (``op.<name>``) that a case, ``[defaults]``,
#: ``[tool.gradcheck]`` or ``--skip-check`` may switch off: all but op.forward and
#: op.backward (OP_CHECKS, every check in report order, is gradcheck.base.result's,
#: below the renderers, which lay an op case's checks out in its order too)
SKIPPABLE = OP_CHECKS[2:]
#: the backends op.compile may run torch.compile with (``compile_backend``): aot_eager
#: (AOTAutograd's forward and backward graphs, run eagerly: what compile does to
#: autograd, without a code generator), eager (Dynamo's graph alone), inductor (the
#: code torch.compile generates by default; a C++ compiler on CPU)
COMPILE_BACKENDS = ("aot_eager", "eager", "inductor")


#: dtypes an input may declare besides the case's float dtype: integer and boolean
#: inputs are exact constants of the formula (never differentiated, never perturbed)
INPUT_DTYPES = ("int64", "int32", "bool")
