"""The witnesses' run functions, each computing the output and vᵀJ of a case at a point
its own way: ``torch`` (PyTorch autograd), ``engine`` (gradcheck's own engine),
``numeric`` (finite differences); and ``op`` (loading and calling a user's op).

Each run function has the one signature ``run(case, point, v, dtype, reference) ->
Evaluation``; the registry that names them, with the dtypes each runs in and its
tolerance rule, is :mod:`gradcheck.witnesses.registry`. ``drive`` (rebuilding a formula on an
autograd library and running its backward) is shared by torch and the engine.
"""

from .drive import drive, grad_fn_chain, rebuild

__all__ = ["drive", "grad_fn_chain", "rebuild"]
