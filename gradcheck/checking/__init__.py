"""One case's check: the witnesses against the reference at each point, the
comparisons and their tolerances, error maps, verdicts, the diagnosis of a failure and
the checks of a custom op (:mod:`.opcheck`)."""
