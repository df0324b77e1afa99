"""A run of many cases: :func:`~gradcheck.session.runner.run`, the executors (serial,
a pool of worker processes, Dask) and what a worker executes."""
