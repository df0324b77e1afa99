"""The rounding model: how far a correct computation in a dtype may stray from the
exact value, per node and per cotangent, and the tolerances made from it."""
