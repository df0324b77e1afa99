"""One BLAS/OpenMP thread per process, unless the user chose otherwise.

A check runs NumPy's OpenBLAS, SciPy's own copy of it (SciPy wheels bundle their
own) and torch's OpenMP pool in one process, and ``--jobs`` runs several such
processes: each pool starts a thread per core and spins waiting for work, so on a busy
or small machine they take the cores from each other. Measured on 2 cores with SciPy
imported, one stacked matmul ([4, 256, 64] @ [4, 64, 256]) took 66 ms with the default
threads and 0.7 ms with one. The limits are environment variables the libraries read
when they load, so they are set before NumPy is first imported, and only where the user
has not set them.
"""

from __future__ import annotations

import os
import sys

VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def one_thread_each() -> bool:
    """Set each of :data:`VARIABLES` to 1 where it is unset; False (nothing set) once
    NumPy is imported, when it is too late to matter."""
    if "numpy" in sys.modules:
        return False
    for name in VARIABLES:
        os.environ.setdefault(name, "1")
    return True


def after_fork() -> None:
    """In a process just forked from one that may have run torch: one intra-op thread.

    GNU OpenMP's thread pool does not survive a fork: the child of a process whose torch
    ran a parallel region waits forever, at its own first one, at a barrier for threads
    that are not there (a case process forked by a worker, an op's process forked by the
    judge, in a library call that set no thread limit). One thread runs no team."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)
