"""The bilinear family's matrix products: matmul and dot (:mod:`.rows`); the convolutions,
bilinear too, are in :mod:`gradcheck.rules.conv`."""
