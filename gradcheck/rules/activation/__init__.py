"""The activation family of the rule table: elementwise rows with their own columns
(hypot, xlogy, floor, round, gelu, silu...)."""
