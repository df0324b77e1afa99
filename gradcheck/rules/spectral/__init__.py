"""The spectral rows of the rule table: the discrete Fourier transforms (fft, ifft,
rfft, irfft) as exact linear maps on the ``torch.view_as_real`` layout, rows of the
composite family (each states its own rounding bound)."""
