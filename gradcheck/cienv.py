"""The CI control variables a user's code (an op, a doctor factory) must not see: the
files through which a GitHub Actions step sets the next steps' environment, outputs,
``PATH``, state and job summary, and the runner's tokens. Removing them from a child's
environment is a guard, not a wall: the files' folder is on the disk the child can read,
and the parent's ``/proc/PID/environ`` is readable by the same user (README, Security)."""

from __future__ import annotations

#: GitHub Actions' file commands and the runner's tokens and service addresses
CONTROL = frozenset({
    "GITHUB_ENV", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY", "GITHUB_PATH", "GITHUB_STATE",
    "ACTIONS_RUNTIME_TOKEN", "ACTIONS_RUNTIME_URL", "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_URL", "ACTIONS_CACHE_URL", "ACTIONS_RESULTS_URL",
    "GITHUB_TOKEN"})


def without_control(env: dict) -> dict:
    """``env`` without :data:`CONTROL`'s variables."""
    return {k: v for k, v in env.items() if k not in CONTROL}
