"""The structure family of the rule table: exact linear maps with 0/1 coefficients
(reshape, subscripts, concat, pad, gather...): rows, columns, the engine's VJPs and the
tensor-level adjoints."""
