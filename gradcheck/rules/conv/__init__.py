"""The convolution-like family of the rule table (convolutions, pooling): rows,
columns, the engine's VJPs and the tensor-level adjoints."""
