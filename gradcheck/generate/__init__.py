"""Formula generators: the templates the property tests and ``gradcheck.strategies``
draw formulas from, and the inputs they need."""
