"""The CI control variables a user's code (an op, a doctor factory) must not see: the
files through which a GitHub Actions step sets the next steps' environment, outputs,
``PATH``, state and job summary, and the runner's tokens. Removing them from a child's
environment is a guard, not a wall: the files' folder is on the disk the child can read,
and the parent's ``/proc/PID/environ`` is readable by the same user (docs/security.md)."""

from __future__ import annotations

#: GitHub Actions' file commands and the runner's tokens and service addresses, named
CONTROL = frozenset({
    "GITHUB_ENV", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY", "GITHUB_PATH", "GITHUB_STATE",
    "ACTIONS_RUNTIME_TOKEN", "ACTIONS_RUNTIME_URL", "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_URL", "ACTIONS_CACHE_URL", "ACTIONS_RESULTS_URL",
    "GITHUB_TOKEN"})
#: and every variable of these families: all of GitHub's (``GITHUB_*``, ``ACTIONS_*``,
#: ``RUNNER_*``: none is a user's code's business), GitLab's and Buildkite's tokens
PREFIXES = ("GITHUB_", "ACTIONS_", "RUNNER_", "CI_JOB_TOKEN", "CI_JOB_JWT",
            "CI_REGISTRY_PASSWORD", "BUILDKITE_AGENT_ACCESS_TOKEN")


def controlled(name: str) -> bool:
    """Whether ``name`` is a CI control variable a user's code must not see."""
    return name in CONTROL or name.startswith(PREFIXES)


def without_control(env) -> dict:
    """``env`` without the CI control variables (:func:`controlled`)."""
    return {k: v for k, v in env.items() if not controlled(k)}
