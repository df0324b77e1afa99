"""The verdicts sweep moved to :mod:`gradcheck.bench.verdicts`; this module keeps the
names the CLI imports until its import says the new place."""

from .bench.verdicts import DEFAULT_SEEDS, DTYPES, markdown, run_verdicts, save

__all__ = ["DEFAULT_SEEDS", "DTYPES", "markdown", "run_verdicts", "save"]
