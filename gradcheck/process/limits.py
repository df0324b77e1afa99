"""The run's own limits, which hold whatever a command line or a contributor's
pyproject.toml asks: how many worker processes (:func:`cap_jobs`), the ranges
``timeout`` and ``max-memory`` accept (:func:`timeout_problem`,
:func:`max_memory_problem`), and the memory each worker may take by default
(:func:`worker_share`, applied by :func:`gradcheck.process.budgets.limit_worker`).

The machine is read here (cores, ``MemAvailable``), once per call, from the standard
library and ``/proc/meminfo``: off Linux, where there is no such file, memory caps
nothing and only the cores do."""

from __future__ import annotations

import math
import os

from .budgets import ENV, WORKER_ENV, parse_size

__all__ = ["MAX_JOBS", "WORKER_BYTES", "MEMORY_SHARE", "MAX_TIMEOUT", "MIN_MAX_MEMORY",
           "MAX_MAX_MEMORY", "WORKER_ENV", "cores", "available_memory", "jobs_cap",
           "cap_jobs", "jobs_problem", "timeout_problem", "max_memory_problem",
           "worker_share", "worker_env"]

#: a ``jobs`` above this is no machine's (the largest CPUs have a few hundred cores):
#: a usage error, not a value to lower quietly
MAX_JOBS = 1024
#: resident memory of one worker once started (torch, SymPy and NumPy imported, a
#: kernel compiled: measured 257 MiB with torch 2.13 on Linux, its case process forked
#: from it sharing those pages), what each job costs before any case runs
WORKER_BYTES = 256 * 1024**2
#: the part of the available memory the workers' start-up may take together, and the
#: part the workers' default limits share (the rest stays for the parent, the page
#: cache and whatever else runs on the machine)
MEMORY_SHARE = 0.5
#: the longest time limit of one case (one day): a longer one is a typo, or ``inf``
MAX_TIMEOUT = 86_400.0
#: the range of ``max-memory``: below 1 MiB a worker cannot even run its case
#: process's loop; above 1 PiB the address-space arithmetic of ``setrlimit`` overflows
#: long before any machine has the memory
MIN_MAX_MEMORY = 1024**2
MAX_MAX_MEMORY = 1024**5


def cores() -> int:
    """The CPUs this process may run on (its affinity mask, where the system has one)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def available_memory() -> int | None:
    """``MemAvailable`` of ``/proc/meminfo`` in bytes (what can be allocated without
    swapping), or None where there is no such file."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def jobs_cap() -> tuple[int, str]:
    """The most worker processes this machine runs at once, and what sets it: its
    cores, or its available memory (:data:`MEMORY_SHARE` of it over
    :data:`WORKER_BYTES` a worker)."""
    by_cores = cores()
    memory = available_memory()
    if memory is None:
        return by_cores, f"{by_cores} CPU core{'s' if by_cores > 1 else ''}"
    by_memory = max(1, int(memory * MEMORY_SHARE // WORKER_BYTES))
    if by_memory < by_cores:
        return by_memory, (f"{memory / 1024**3:.1f} GiB of available memory at "
                           f"{WORKER_BYTES // 1024**2} MiB a worker")
    return by_cores, f"{by_cores} CPU core{'s' if by_cores > 1 else ''}"


def jobs_problem(jobs) -> str:
    """What is wrong with a ``jobs`` value ("" when nothing is): it must be an integer
    from 0 (one per core) to :data:`MAX_JOBS`."""
    if isinstance(jobs, bool) or not isinstance(jobs, int) or not 0 <= jobs <= MAX_JOBS:
        return (f"jobs must be an integer from 0 (one per CPU core) to {MAX_JOBS}, got "
                f"{jobs!r}")
    return ""


def cap_jobs(jobs: int) -> tuple[int, str]:
    """``jobs`` (0: one per core) as the workers actually started, within
    :func:`jobs_cap`, and a note saying why when it was lowered ("" when not).

    Raises:
        ValueError: ``jobs`` is out of range (:func:`jobs_problem`).
    """
    problem = jobs_problem(jobs)
    if problem:
        raise ValueError(problem)
    cap, why = jobs_cap()
    if jobs == 0:
        return cap, ""
    if jobs <= cap:
        return jobs, ""
    return cap, (f"jobs = {jobs} lowered to {cap}, the most this machine runs at once "
                 f"({why})")


def timeout_problem(seconds) -> str:
    """What is wrong with a time limit of ``seconds`` ("" when nothing is): it must be
    a number of seconds above 0 and at most :data:`MAX_TIMEOUT` (NaN and inf are not)."""
    number = isinstance(seconds, (int, float)) and not isinstance(seconds, bool)
    if number and 0 < seconds <= MAX_TIMEOUT:   # (False for NaN)
        return ""
    return (f"timeout must be a number of seconds above 0 and at most {MAX_TIMEOUT:,.0f} "
            f"(one day), got {seconds!r}")


def max_memory_problem(size) -> str:
    """What is wrong with a ``max-memory`` of ``size`` (bytes, or text such as "4G";
    "" when nothing is): it must be a size from 1M to 1P."""
    accepted = "a size from 1M to 1P (e.g. 4G, 512M, or a number of bytes)"
    try:
        if isinstance(size, bool) or not isinstance(size, (int, str)):
            raise ValueError(size)
        value = size if isinstance(size, int) else parse_size(size)
    except ValueError:
        return f"max-memory must be {accepted}, got {size!r}"
    if not MIN_MAX_MEMORY <= value <= MAX_MAX_MEMORY:
        return f"max-memory must be {accepted}, got {size!r}"
    return ""


def worker_share(jobs: int) -> int | None:
    """The bytes each of ``jobs`` workers may take past its start-up when no
    ``--max-memory`` is given: :data:`MEMORY_SHARE` of the available memory, less the
    workers' start-up, split between them (at least :data:`MIN_MAX_MEMORY`); None
    where the available memory is unknown (nothing is limited then)."""
    memory = available_memory()
    if memory is None:
        return None
    jobs = max(1, jobs)
    return max(MIN_MAX_MEMORY, math.floor(memory * MEMORY_SHARE / jobs) - WORKER_BYTES)


def worker_env(jobs: int) -> dict[str, str]:
    """What the parent adds to the environment of each of its ``jobs`` workers: their
    default memory limit (:func:`worker_share`), unless ``--max-memory`` is set, which
    limits each worker to itself instead (:func:`gradcheck.process.budgets.limit_worker`)."""
    share = None if os.environ.get(ENV) else worker_share(jobs)
    return {} if share is None else {WORKER_ENV: str(share)}
