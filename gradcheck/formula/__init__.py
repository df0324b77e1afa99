"""The formula language: the parser, the DAG a formula becomes, its constructors,
its forward evaluation and its documentation (``gradcheck functions``)."""
