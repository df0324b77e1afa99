"""The project gradcheck runs in: its own settings (the ``[tool.gradcheck]`` table of
its ``pyproject.toml``), the ``allow-op-modules`` patterns refused, where gradcheck may
write and read (inside the project), and command-line values bounded as a case file's.
Light on purpose: the command line reads it before NumPy loads (one BLAS thread per
process is set then, :mod:`gradcheck.process.threads`)."""
