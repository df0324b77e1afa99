"""Custom ops on complex tensors (cases/ops/complex.toml): right ones, with backwards
written by hand in PyTorch's convention, and wrong twins.

PyTorch's convention for a complex input z and a real loss L: ``z.grad = dL/d(re z) +
i dL/d(im z)``, and a backward is handed ``grad_output`` in the same form. For a
holomorphic step w = f(z) the chain rule is then ``grad_z = grad_w * conj(f'(z))``: a
product z * w sends ``grad * conj(w)`` to z, not ``grad * w``.

Each op is written in the ``forward`` + ``setup_context`` style, with
``generate_vmap_rule`` (its backward is made of batched torch operations), so that
torch.func (op.vmap) can run it as well as autograd.
"""

import torch


class ComplexMul(torch.autograd.Function):
    """z * w: grad_z = g conj(w), grad_w = g conj(z)."""

    generate_vmap_rule = True

    @staticmethod
    def forward(z, w):
        return z * w

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, g):
        z, w = ctx.saved_tensors
        return g * w.conj(), g * z.conj()


class ComplexMulNoConj(ComplexMul):
    """WRONG: the conjugate forgotten (grad_z = g w), the slip of a backward written
    from the real rule."""

    @staticmethod
    def backward(ctx, g):
        z, w = ctx.saved_tensors
        return g * w, g * z


def _abs_squared_grads(g, A, z):
    """The gradients of y = |u|**2, u = A @ z, for the real cotangent g of y: through
    y = re(u)**2 + im(u)**2, dL/d(re u) + i dL/d(im u) = 2 g u; then u = A z sends
    grad_u conj(z)ᵀ to A and Aᴴ grad_u to z (the conjugate transpose)."""
    grad_u = 2 * g * (A @ z)
    grad_A = grad_u.unsqueeze(-1) * z.conj().unsqueeze(-2)
    grad_z = A.conj().mT @ grad_u.unsqueeze(-1)
    return grad_A, grad_z.squeeze(-1)


class AbsSquaredLinear(torch.autograd.Function):
    """abs(A @ z)**2, a complex linear map's power: real, of A's rows' length."""

    generate_vmap_rule = True

    @staticmethod
    def forward(A, z):
        return (A @ z).abs() ** 2

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, g):
        A, z = ctx.saved_tensors
        return _abs_squared_grads(g, A, z)


class AbsSquaredLinearRealGrad(AbsSquaredLinear):
    """WRONG: the imaginary part of each gradient dropped (the real part handed back as
    a complex tensor), as a backward that treats the input as real does."""

    @staticmethod
    def backward(ctx, g):
        A, z = ctx.saved_tensors
        grad_A, grad_z = _abs_squared_grads(g, A, z)
        return grad_A.real.to(A.dtype), grad_z.real.to(z.dtype)


def _bins(n: int, like):
    """How often each of rfft's n // 2 + 1 bins stands in irfft's sum: once for the
    zero frequency (and Nyquist's, n even), twice for the others (as itself and as its
    conjugate)."""
    m = torch.full((n // 2 + 1,), 2.0, dtype=like.real.dtype, device=like.device)
    m[0] = 1.0
    if n % 2 == 0:
        m[-1] = 1.0
    return m


class SpectralConv1d(torch.autograd.Function):
    """A 1-D spectral convolution: x real [B, N], w complex [N // 2 + 1],
    irfft(rfft(x) * w, n=N) along the last axis.

    Backward, for the real cotangent g: irfft's VJP is rfft(g) · m / N (m:
    :func:`_bins`; irfft counts the inner bins twice), that is rfft(g, norm="forward")
    · m; the product sends grad_Y conj(w) to rfft(x) and grad_Y conj(rfft(x)) to w
    (summed over the batch); rfft's VJP of grad_X is N · irfft(grad_X / m), so x's
    gradient is irfft(rfft(g) conj(w), n=N): a correlation with w."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x, w):
        n = x.shape[-1]
        return torch.fft.irfft(torch.fft.rfft(x) * w, n=n)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return _spectral_grads(g, x, w, "forward")


class SpectralConv1dUnnormalised(SpectralConv1d):
    """WRONG: irfft's VJP taken as rfft(g) · m, without its 1 / N (norm="backward" where
    "forward" is due): both gradients N times too large."""

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return _spectral_grads(g, x, w, "backward")


def _spectral_grads(g, x, w, norm: str):
    n = x.shape[-1]
    m = _bins(n, w)
    grad_y = torch.fft.rfft(g, norm=norm) * m
    grad_x = n * torch.fft.irfft(grad_y * w.conj() / m, n=n)
    grad_w = (grad_y * torch.fft.rfft(x).conj()).sum(dim=0)
    return grad_x, grad_w
