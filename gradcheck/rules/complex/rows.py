"""The complex table's rows (see :mod:`.row`): their lowering (:mod:`.expand`) and the
operation on complex torch tensors (torch is imported when a torch column is called)."""

from __future__ import annotations

from ..row import AXIS, BOOL, CHOICE, INT, INTS, KEY, TEXT, Param
from . import expand as e
from .row import ComplexRow

_AXES = (Param("axis", AXIS), Param("keepdims", BOOL, False))
_FFT = (Param("n", INT), Param("axis", INT, -1),
        Param("norm", CHOICE, "backward", ("backward", "ortho", "forward")))


def _torch():
    import torch

    return torch


def _promoted(tensors):
    """Real tensors beside complex ones in the complex dtype (torch.einsum promotes
    none)."""
    kind = next(t.dtype for t in tensors if t.is_complex())
    return [t if t.is_complex() else t.to(kind) for t in tensors]


def _reduce(name):
    def call(z, axis=None, keepdims=False):
        f = getattr(_torch(), name)
        return f(z) if axis is None else f(z, dim=axis, keepdim=keepdims)
    return call


def _fft(name):
    def call(z, n=None, axis=-1, norm="backward"):
        return getattr(_torch().fft, name)(z, n=n, dim=axis, norm=norm)
    return call


def _row(name, arity, expand, torch, doc, example, **more) -> ComplexRow:
    return ComplexRow(name=name, arity=arity, expand=expand, torch=torch, doc=doc,
                      example=example, **more)


ROWS: list[ComplexRow] = [
    _row("add", 2, e.add, lambda a, b: a + b, "sum; a real operand promoted", "z + w + x",
         symbol="+"),
    _row("sub", 2, e.sub, lambda a, b: a - b, "difference", "z - w - 1", symbol="-"),
    _row("mul", 2, e.mul, lambda a, b: a * b, "product (ac - bd) + i(ad + bc)",
         "z * w * x", symbol="*"),
    _row("div", 2, e.div, lambda a, b: a / b, "quotient", "z / w + x / w", symbol="/"),
    _row("neg", 1, e.neg, lambda a: -a, "negation", "-z", symbol="-"),
    _row("pow", 2, e.power, lambda a, p: a ** p,
         "power by a real constant (integers by multiplication, others principal)",
         "z ** 3 + z ** -2 + z ** 0.5", symbol="**"),
    _row("where", 3, e.where, lambda c, a, b: _torch().where(c, a, b),
         "a where the condition holds, else b (a real branch promoted)",
         "where(abs(z) > 1, z, 0)"),
    _row("real", 1, e.real, lambda z: _torch().real(z), "real part", "real(z)", only=True),
    _row("imag", 1, e.imag, lambda z: _torch().imag(z), "imaginary part", "imag(z)",
         only=True),
    _row("conj", 1, e.conj, lambda z: _torch().conj(z), "complex conjugate", "conj(z) * w",
         only=True),
    _row("abs", 1, e.absolute, lambda z: _torch().abs(z), "modulus hypot(re, im)", "abs(z)"),
    _row("angle", 1, e.angle, lambda z: _torch().angle(z), "argument atan2(im, re)",
         "angle(z)", only=True),
    _row("exp", 1, e.exp, lambda z: _torch().exp(z), "exponential", "exp(z)"),
    _row("log", 1, e.log, lambda z: _torch().log(z), "principal logarithm", "log(z)"),
    _row("sqrt", 1, e.sqrt, lambda z: _torch().sqrt(z), "principal square root", "sqrt(z)"),
    _row("sum", 1, e.reduction("sum"), _reduce("sum"), "sum over complex axes",
         "sum(z, axis=0)", params=_AXES),
    _row("mean", 1, e.reduction("mean"), _reduce("mean"), "mean over complex axes",
         "mean(z * w)", params=_AXES),
    _row("matmul", 2, e.matmul, lambda a, b: a @ b, "matrix product (4 real products)",
         "A @ z", symbol="@"),
    _row("einsum", 1, e.einsum,
         lambda *ops, subscripts: _torch().einsum(subscripts, *_promoted(ops)),
         "Einstein sum of at most 3 operands (2ⁿ real products)",
         'einsum("ij,j->i", A, z)', params=(Param("subscripts", TEXT),), variadic="star"),
    _row("view_as_real", 1, e.view_as_real, lambda z: _torch().view_as_real(z),
         "the layout: a last axis of (re, im)", "view_as_real(z)", only=True),
    _row("view_as_complex", 1, e.view_as_complex, lambda x: _torch().view_as_complex(x),
         "a real array's last axis of 2 as (re, im)",
         "view_as_complex(stack([v, u], axis=-1)) * z", only=True),
    _row("index", 1, e.index, lambda z, key: z[key], "subscript of the complex shape",
         "z[1:3]", params=(Param("key", KEY),)),
    _row("take", 2, e.take, lambda z, i, axis=0: _torch().index_select(z, axis, i),
         "elements at an integer input's indices", "z[idx]", params=(Param("axis", INT, 0),)),
    _row("transpose", 1, e.transpose,
         lambda z, dim0=-2, dim1=-1: _torch().transpose(z, dim0, dim1),
         "two complex axes swapped", "transpose(A)",
         params=(Param("dim0", INT, -2), Param("dim1", INT, -1))),
    _row("permute", 1, e.permute, lambda z, axes: z.permute(*axes),
         "complex axes reordered", "permute(A, [1, 0])", params=(Param("axes", INTS),)),
    _row("reshape", 1, e.reshape, lambda z, shape: z.reshape(shape),
         "the complex shape changed", "reshape(A, [-1])", params=(Param("shape", INTS),)),
    _row("unsqueeze", 1, e.unsqueeze, lambda z, axis: z.unsqueeze(axis),
         "a new complex axis of length 1", "unsqueeze(z, 0)", params=(Param("axis", INT),)),
    _row("squeeze", 1, e.squeeze,
         lambda z, axis=None: z.squeeze() if axis is None else z.squeeze(axis),
         "complex axes of length 1 removed", "squeeze(sum(A, axis=1, keepdims=True))",
         params=(Param("axis", INT),)),
    _row("flip", 1, e.flip,
         lambda z, axis=None: _torch().flip(z, [axis] if isinstance(axis, int) else
                                            list(range(z.dim())) if axis is None else axis),
         "complex axes reversed", "flip(z, 0)", params=(Param("axis", AXIS),)),
    _row("stack", 1, e.joined("stack", 1), lambda *zs, axis=0: _torch().stack(zs, axis),
         "joined along a new complex axis", "stack([z, w], axis=1)",
         params=(Param("axis", INT, 0),), variadic="list"),
    _row("concat", 1, e.joined("concat", 0), lambda *zs, axis=0: _torch().cat(zs, axis),
         "joined along a complex axis", "concat([z, x])", params=(Param("axis", INT, 0),),
         variadic="list"),
    _row("fft", 1, e.fourier("fft", "complex", "complex"), _fft("fft"),
         "discrete Fourier transform along axis", "fft(z)", params=_FFT, only=True),
    _row("ifft", 1, e.fourier("ifft", "complex", "complex"), _fft("ifft"),
         "inverse discrete Fourier transform", "ifft(z, norm=\"ortho\")", params=_FFT,
         only=True),
    _row("rfft", 1, e.fourier("rfft", "real", "complex"), _fft("rfft"),
         "Fourier transform of a real array: n // 2 + 1 frequencies", "rfft(x)",
         params=_FFT, only=True),
    _row("irfft", 1, e.fourier("irfft", "complex", "real"), _fft("irfft"),
         "inverse of rfft: a real array of n points", "irfft(z, n=8)", params=_FFT,
         only=True),
]
