"""The base layer: what every other part of gradcheck stands on and that stands on
nothing of gradcheck's: dtypes and their facts, shapes, array helpers, errors, the
results (frozen data), an :class:`~gradcheck.base.evaluation.Evaluation` of a witness,
and writing report files."""

__version__ = "0.1.0"
