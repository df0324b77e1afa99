"""The ``expand`` column of the complex table: each complex primitive lowered to rows of
the real table over the layout (a last axis of 2: real part, imaginary part).

Each function is ``f(b, args, given)``: ``b`` is the parser's lowering
(:class:`gradcheck.formula.complexes.Lowering`), ``args`` the operand nodes (a complex
one in the layout, ``b.re(z)``/``b.im(z)`` its parts), ``given`` the parameters as
written. The math, with z = a + ib, w = c + id:

- z w = (ac - bd) + i(ad + bc); z / w = ((ac + bd) + i(bc - ad)) / (c² + d²);
- |z| = hypot(a, b); arg z = atan2(b, a) (principal, in (-π, π]);
- exp z = eᵃ(cos b + i sin b); log z = log|z| + i arg z; z^p = |z|^p (cos pθ + i sin pθ)
  for a real p that is not an integer (principal, as torch: exp(p log z)); an integer
  power is repeated multiplication (z⁻ⁿ = 1 / zⁿ);
- a product of complex factors (matmul, einsum) is the sum over the choice of a real or
  imaginary part of each factor, with the sign iᵏ for k imaginary parts;
- every linear map that moves elements (sum, index, reshape, stack...) acts on both
  parts alike: the same real row, its axes those of the complex shape.

A real operand beside a complex one is promoted where torch promotes: as a column
against the layout (``x[..., None]``) where it scales both parts, with a zero imaginary
part where it is added.
"""

from __future__ import annotations

from ...base.shapes import ShapeError, normalize_axis
from ..keys import Slice, entries


# ---------------------------------------------------------------- arithmetic
def add(b, args, given):
    z, w = args
    return b.complex(b.row("add", [b.lift(z), b.lift(w)]))


def sub(b, args, given):
    z, w = args
    return b.complex(b.row("sub", [b.lift(z), b.lift(w)]))


def neg(b, args, given):
    return b.complex(b.row("neg", args))


def mul(b, args, given):
    z, w = args
    if not (z.complex and w.complex):   # a real factor scales both parts
        return b.complex(b.row("mul", [b.col(z), b.col(w)]))
    a, bi, c, d = b.re(z), b.im(z), b.re(w), b.im(w)
    return b.pack(b.row("sub", [b.row("mul", [a, c]), b.row("mul", [bi, d])]),
                  b.row("add", [b.row("mul", [a, d]), b.row("mul", [bi, c])]))


def div(b, args, given):
    z, w = args
    if not w.complex:   # z / x: both parts divided
        return b.complex(b.row("div", [z, b.col(w)]))
    c, d = b.re(w), b.im(w)
    norm = b.row("add", [b.row("mul", [c, c]), b.row("mul", [d, d])])   # |w|²
    if not z.complex:   # x / w = x conj(w) / |w|²
        return b.pack(b.row("div", [b.row("mul", [z, c]), norm]),
                      b.row("neg", [b.row("div", [b.row("mul", [z, d]), norm])]))
    a, bi = b.re(z), b.im(z)
    return b.pack(b.row("div", [b.row("add", [b.row("mul", [a, c]), b.row("mul", [bi, d])]),
                                norm]),
                  b.row("div", [b.row("sub", [b.row("mul", [bi, c]), b.row("mul", [a, d])]),
                                norm]))


def power(b, args, given):
    z, p = args
    if p.complex or not z.complex or p.const is None:
        raise b.fail("takes a complex base and a real constant exponent (z ** 3, "
                     "z ** 0.5); write exp(w * log(z)) for another")
    if abs(p.const) > b.max_exponent:
        raise b.fail(f"constant exponent {p.const:g} exceeds {b.max_exponent} in magnitude")
    if p.const != int(p.const):
        # (a folded constant such as 1 / 3 as its float: the engine names a pow by a
        # folded exponent PowBackward1, torch PowBackward0, as for a real x ** (1 / 3))
        return _polar(b, z, p if p.op == "const" else b.const(p.const))
    n = int(p.const)
    if n == 0:   # z ** 0 is 1 (torch: 1 + 0i), whatever z
        return b.lift(b.row("expand", [b.const(1)], shape=b.shape(z)))
    out = _integer_power(b, z, abs(n))
    return out if n > 0 else div(b, [b.const(1), out], {})


def _integer_power(b, z, n: int):
    """zⁿ by squaring and multiplying (at most 2 log₂ n complex products)."""
    out, square = None, z
    while n:
        if n & 1:
            out = square if out is None else mul(b, [out, square], {})
        n >>= 1
        if n:
            square = mul(b, [square, square], {})
    return out


def _polar(b, z, p):
    """z^p = |z|^p (cos pθ + i sin pθ), θ = arg z; ``p`` the exponent's constant node."""
    r, theta = b.row("hypot", [b.re(z), b.im(z)]), b.row("atan2", [b.im(z), b.re(z)])
    modulus = b.row("pow", [r, p])
    angle = b.row("mul", [p, theta])
    return b.pack(b.row("mul", [modulus, b.row("cos", [angle])]),
                  b.row("mul", [modulus, b.row("sin", [angle])]))


# ---------------------------------------------------------------- functions of z
def where(b, args, given):
    cond, z, w = args   # (the condition is real: a comparison, a mask)
    return b.complex(b.row("where", [_column_condition(b, cond), b.lift(z), b.lift(w)]))


def _column_condition(b, cond):
    """The condition against the layout: the same comparisons of its operands as
    columns (``x[..., None] < 0``; where's condition is a comparison, which the
    reference reads as such)."""
    if not cond.shape:
        return cond
    if cond.op in ("logical_and", "logical_or", "logical_not"):
        return b.row(cond.op, [_column_condition(b, c) for c in cond.args])
    return b.row(cond.op, [b.col(a) for a in cond.args])


def real(b, args, given):
    (z,) = args
    return b.re(z) if z.complex else z   # (torch.real of a real tensor: itself)


def imag(b, args, given):
    (z,) = args
    if not z.complex:
        raise b.fail("takes a complex operand (torch: imag is not implemented for real "
                     "tensors)")
    return b.im(z)


def conj(b, args, given):
    (z,) = args
    return b.pack(b.re(z), b.row("neg", [b.im(z)])) if z.complex else z


def absolute(b, args, given):
    (z,) = args
    return b.row("hypot", [b.re(z), b.im(z)])


def angle(b, args, given):
    (z,) = args
    if not z.complex:
        raise b.fail("takes a complex operand (the angle of a real x is 0 or π, with no "
                     "gradient)")
    return b.row("atan2", [b.im(z), b.re(z)])


def exp(b, args, given):
    (z,) = args
    scale = b.row("exp", [b.re(z)])
    return b.pack(b.row("mul", [scale, b.row("cos", [b.im(z)])]),
                  b.row("mul", [scale, b.row("sin", [b.im(z)])]))


def log(b, args, given):
    (z,) = args
    return b.pack(b.row("log", [b.row("hypot", [b.re(z), b.im(z)])]),
                  b.row("atan2", [b.im(z), b.re(z)]))


def sqrt(b, args, given):
    (z,) = args
    return _polar(b, z, b.const(0.5))


# ---------------------------------------------------------------- reductions, products
def reduction(op: str):
    def lowered(b, args, given):
        (z,) = args
        nd = b.ndim(z)
        if nd == 0:   # the sum (mean) of a complex scalar: itself
            return z
        axes = normalize_axis(given.get("axis"), nd)   # the complex shape's axes
        return b.complex(b.row(op, [z], axis=axes, keepdims=given.get("keepdims", False)))
    return lowered


def matmul(b, args, given):
    z, w = args
    if not w.complex:
        return b.pack(b.row("matmul", [b.re(z), w]), b.row("matmul", [b.im(z), w]))
    if not z.complex:
        return b.pack(b.row("matmul", [z, b.re(w)]), b.row("matmul", [z, b.im(w)]))
    a, bi, c, d = b.re(z), b.im(z), b.re(w), b.im(w)
    return b.pack(b.row("sub", [b.row("matmul", [a, c]), b.row("matmul", [bi, d])]),
                  b.row("add", [b.row("matmul", [a, d]), b.row("matmul", [bi, c])]))


MAX_EINSUM = 3   # complex einsum operands: 2ⁿ real products


def einsum(b, args, given):
    if len(args) > MAX_EINSUM:
        raise b.fail(f"takes at most {MAX_EINSUM} operands when one is complex "
                     f"(2ⁿ real products), got {len(args)}")
    choices = [[(0, b.re(a)), (1, b.im(a))] if a.complex else [(0, a)] for a in args]
    parts: dict[int, list] = {0: [], 1: []}   # real, imaginary: (sign, product)
    for picked in _product(choices):
        k = sum(j for j, _ in picked)   # iᵏ: 1, i, -1, -i
        term = b.row("einsum", [node for _, node in picked], subscripts=given["subscripts"])
        parts[k % 2].append((-1 if k % 4 >= 2 else 1, term))
    return b.pack(_signed_sum(b, parts[0]), _signed_sum(b, parts[1]))


def _product(choices):
    out = [[]]
    for options in choices:
        out = [[*done, o] for done in out for o in options]
    return out


def _signed_sum(b, terms):
    (sign, out), rest = terms[0], terms[1:]
    out = out if sign > 0 else b.row("neg", [out])
    for sign, term in rest:
        out = b.row("add" if sign > 0 else "sub", [out, term])
    return out


# ---------------------------------------------------------------- layout
# view_as_real and view_as_complex move no value: in the layout each is the identity,
# the node itself marked real or complex (so that fft of view_as_complex(x) is the fft
# row on x, and a formula drawn of fft alone applies no other row). An input keeps its
# own mark (its InputSpec's): a view of it is an alias, reshape's.

def view_as_real(b, args, given):
    (z,) = args
    if not z.complex:
        raise b.fail("takes a complex operand")
    if z.op == "input":
        return b.row("reshape", [z], shape=z.shape)   # the layout, as a real array
    return b.real_node(z)


def view_as_complex(b, args, given):
    (x,) = args
    if x.complex or not x.shape or x.shape[-1] != 2:
        raise b.fail("takes a real operand whose last axis has length 2 (real, imaginary)")
    return b.complex(b.row("reshape", [x], shape=x.shape) if x.op == "input" else x)


def index(b, args, given):
    (z,) = args
    key = entries(given["key"])   # the complex shape's key, then the layout's whole axis
    return b.complex(b.row("index", [z], key=(*key, Slice())))


def take(b, args, given):
    z, idx = args
    if idx.complex:
        raise b.fail("indexes by an integer input, not a complex one")
    return b.complex(b.row("take", [z, idx], axis=b.axis(given.get("axis", 0), b.ndim(z))))


def transpose(b, args, given):
    (z,) = args
    nd = b.ndim(z)
    if nd < 2 and "dim0" not in given:
        raise ShapeError(f"transpose needs at least two dimensions, got shape "
                         f"{list(b.shape(z))}")
    dims = {k: b.axis(given.get(k, d), nd) for k, d in (("dim0", -2), ("dim1", -1))}
    return b.complex(b.row("transpose", [z], **dims))


def permute(b, args, given):
    (z,) = args
    nd, axes = b.ndim(z), given.get("axes")
    axes = (axes,) if isinstance(axes, int) else tuple(axes or ())
    if len(axes) != nd:
        raise ShapeError(f"permute takes {nd} axes for a complex tensor of {nd} "
                         f"dimensions, got {list(axes)}")
    return b.complex(b.row("permute", [z], axes=(*(b.axis(a, nd) for a in axes), nd)))


def reshape(b, args, given):
    (z,) = args
    shape = given.get("shape")
    shape = (shape,) if isinstance(shape, int) else tuple(shape or ())
    return b.complex(b.row("reshape", [z], shape=(*shape, 2)))


def unsqueeze(b, args, given):
    (z,) = args
    return b.complex(b.row("unsqueeze", [z], axis=b.axis(given.get("axis"), b.ndim(z) + 1)))


def squeeze(b, args, given):
    (z,) = args
    axis = given.get("axis")   # (None: every axis of length 1; the layout's is 2)
    axis = None if axis is None else b.axis(axis, b.ndim(z))
    return b.complex(b.row("squeeze", [z], axis=axis))


def flip(b, args, given):
    (z,) = args
    return b.complex(b.row("flip", [z], axis=normalize_axis(given.get("axis"), b.ndim(z))))


def joined(op: str, extra: int):
    """stack (``extra`` 1: the result has a new axis) and concat, on the complex shape."""
    def lowered(b, args, given):
        parts = [b.lift(a) for a in args]
        axis = b.axis(given.get("axis", 0), b.ndim(parts[0]) + extra)
        return b.complex(b.row(op, parts, axis=axis))
    return lowered


# ---------------------------------------------------------------- Fourier transforms
def fourier(op: str, takes: str, gives: str):
    """fft, ifft (complex -> complex), rfft (real -> complex), irfft (complex -> real):
    the real table's row of that name, on the layout; a real operand of fft, ifft or
    irfft is promoted, as torch promotes it."""
    def lowered(b, args, given):
        (z,) = args
        if not b.has(op):
            raise b.fail("the Fourier transforms' real rows are not in this rule table")
        if takes == "real" and z.complex:
            raise b.fail("takes a real operand (torch.fft.rfft refuses a complex one); "
                         "use fft")
        operand = z if takes == "real" else b.lift(z)
        out = b.row(op, [operand], **given)
        return b.complex(out) if gives == "complex" else out
    return lowered
