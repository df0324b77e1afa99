"""The spectral rows of the rule table: fft, ifft, rfft and irfft, rows of the composite
family (each states its rounding bound, :mod:`.bounds`, registered in
:data:`gradcheck.rules.composite.bounds.BOUNDS`). Their columns are in :mod:`.columns`,
their VJPs in :mod:`.vjps`, their tensor-level adjoints in :mod:`.tensor`. The engine
records each as PyTorch does (:mod:`gradcheck.engine.spectral`): view_as_complex, the
padding or slice of ``n``, the transform's node, view_as_real.

A complex operand or result is in the ``torch.view_as_real`` layout (a last axis of 2);
the user-facing complex spelling (``fft(z)`` of a complex input) is the complex table's,
which lowers to these rows.
"""

from __future__ import annotations

from . import columns as sc
from .tensor import tensor_rule
from .vjps import VJPS
from ..composite.bounds import BOUNDS
from ..row import CHOICE, COMPOSITE, INT, EngineRule, Param, Rule

PARAMS = (Param("n", INT, None), Param("axis", INT, -1),
          Param("norm", CHOICE, "backward", choices=sc.NORMS))

#: PyTorch's node of each transform (torch.fft's _fft_c2c, _fft_r2c, _fft_c2r); of
#: these only FftR2CBackward0 saves a tensor (its operand, for its length), so that a
#: second backward through it needs retain_graph.
GRAD_FN = {"fft": "FftC2CBackward0", "ifft": "FftC2CBackward0", "rfft": "FftR2CBackward0",
           "irfft": "FftC2RBackward0"}

#: (doc, example) of each row, as a formula spells it: the complex table's call (torch.fft's,
#: of a complex value; a real one promoted), whose lowering applies the row to the layout
_DOCS = {
    "fft": ("discrete Fourier transform along axis of a complex array (a real one "
            "promoted), n points", 'fft(z, n=6, norm="ortho")'),
    "ifft": ("inverse discrete Fourier transform along axis of a complex array, n points",
             "view_as_real(ifft(view_as_complex(stack([x, y], axis=-1)), axis=0))"),
    "rfft": ("Fourier transform of a real array along axis: the complex bins 0..n//2",
             "rfft(x, axis=1)"),
    "irfft": ("inverse of rfft: a real array of n = 2*(m-1) points from the complex bins "
              "0..m-1 along axis", "irfft(z, n=6)"),
}


def spectral_row(name: str) -> Rule:
    doc, example = _DOCS[name]
    return Rule(
        name=name, family=COMPOSITE, arity=1, sympy=sc.SYMPY[name], numpy=sc.NUMPY[name],
        torch=sc.TORCH[name], params=PARAMS, shape=sc.SHAPES[name],
        engine=EngineRule(GRAD_FN[name], (VJPS[name],), saves=name == "rfft"),
        tensor=tensor_rule(name), rounding=BOUNDS[name], example=example, doc=doc)


ROWS: list[Rule] = [spectral_row(name) for name in sc.NAMES]
