"""The reduction family: sum, mean, prod, max, min and logsumexp over ``axis=`` (:mod:`.rows`)."""
