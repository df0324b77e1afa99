"""The composite family of the rule table: rows built from several operations with
their own first-order rounding bounds (softmax, var, norm, cumsum, sort, topk,
einsum...)."""
