"""The witnesses: every way of computing a case's gradient that is compared with the
symbolic reference. :mod:`.registry` names them, with the dtypes each runs in and its
tolerance rule; each run function has the one signature ``run(case, point, v, dtype,
reference) -> Evaluation``: ``torch`` (PyTorch autograd), ``engine`` (gradcheck's own
engine), ``numeric`` (finite differences). ``drive`` (rebuilding a formula on an
autograd library and running its backward, :mod:`.recorder` keeping the branches it
took) is shared by torch and the engine. Importing this package imports none of them.
"""
