"""Plain PyTorch code as a formula: a function traced to its ATen graph and each ATen op
mapped to rows of the rule table (:mod:`.aten`, the one mapping), written as formula
text that the safe parser reads (:mod:`.trace`)."""

from .values import TraceError, Traced  # noqa: F401
