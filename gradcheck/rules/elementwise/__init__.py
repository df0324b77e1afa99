"""The elementwise family: rows of arithmetic, exponentials, trigonometry and where()
(:mod:`.rows`), and the comparisons that are where()'s conditions, with their columns."""
