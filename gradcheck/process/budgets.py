"""Budgets: the limits that keep what a case file asks for bounded in work and memory,
all in one place (docs/design.md, "Budgets", explains each).

- **Case files**, checked on the text before the TOML or YAML parser sees it
  (:mod:`gradcheck.cases.scan`): the file's size, a dotted key's parts, how deeply
  brackets, braces or YAML collections nest, the length of one string, the nodes of a
  YAML file; and, after parsing, how deeply the data nests.
- **A case's memory**, estimated from its inputs, outputs, points and intermediates
  (the formula DAG's node shapes) before any point is sampled (:func:`gradcheck.cases.memory.check_case`):
  ``--max-memory SIZE`` (default :data:`DEFAULT_MAX_MEMORY`), which also limits the
  address space of each worker process (:func:`limit_worker`); without it each worker
  is limited to a share of the machine's available memory (:mod:`gradcheck.process.limits`).
  The budget travels to worker processes in the environment variable :data:`ENV`, as
  ``--no-cache`` does, the share in :data:`WORKER_ENV`.

- **SymPy's work on the element-expanded reference** where double backward (``order =
  2``) is built from it (:func:`sympy_work`): Python calls, counted, not seconds, so a
  formula whose expanded second derivatives would blow up (a threshold over a sort's
  cumulative sum: minutes on 18 elements) is refused the same way on any machine.

Python's own limits are turned into the case's error here too: a ``MemoryError`` (or
torch's out-of-memory error) and a ``RecursionError`` are never an internal error.
"""

from __future__ import annotations

import contextlib
import gc
import math
import os
import re
import sys
import threading

from ..base.errors import GradcheckError

# --------------------------------------------------------------------------- case files

#: bytes of one case file: the bundled files are under 10 KiB; a pinned value of a few
#: hundred thousand numbers still fits (TOML parses 2 MiB in about 1.5 s)
MAX_FILE_BYTES = 2 * 1024 * 1024
#: characters of one string (an expression is limited to 20,000 by the parser)
MAX_STRING_CHARS = 100_000
#: parts of one dotted key or table header (``inputs.x.domain`` has 3): tomllib's
#: work grows with the square of a key's parts (40,000 parts: minutes, gigabytes)
MAX_KEY_PARTS = 16
#: brackets and braces open at once in TOML, collections in YAML (an input's value has
#: at most 8 dimensions, inside a few tables)
MAX_NESTING = 32
#: depth of the parsed data: tables and lists in tables and lists (Python's repr, copy
#: and pickle recurse through it)
MAX_DEPTH = 32
#: scalars and collections of one YAML file (its composer builds an object for each)
MAX_YAML_NODES = 100_000
#: cases in one file
MAX_CASES = 10_000

# --------------------------------------------------------------------------- memory

#: a case's estimated memory may not exceed this without ``--max-memory``
DEFAULT_MAX_MEMORY = 2 * 1024**3
#: bytes per element of the inputs and outputs for each point held at once (its sample
#: and cotangent in float64): the point being checked, and up to :data:`KEPT_POINTS`
#: that failed, kept for a diagnosis (a large formula's points are drawn one at a time; a small
#: one's are drawn together, which its size makes nothing)
POINT_BYTES = 16
#: bytes per element of the inputs and outputs while one point is checked: the
#: reference's values and gradients, the rounding bounds, each witness's tensors
#: (measured: 95 to 160 bytes, a layer norm to a chain of elementwise functions)
WORK_BYTES = 128
#: bytes per element of the formula's largest intermediate (a value no input or output
#: holds: ``x * ones([10**7])`` over a scalar x) while one point is checked: its value,
#: its gradient and the witnesses' temporaries around it (measured: 54 bytes, the
#: engine alone or with torch and numeric)
LARGEST_BYTES = 64
#: bytes per element of every intermediate: one float64 value each, as an autograd
#: witness keeps the values its backward reads until the backward (16 terms of
#: ``sum(exp(x * ones([10**7])))`` took 3.9 GB: 127 MB a term, two values of 10^7)
KEPT_BYTES = 8
#: larger points that disagreed whose samples a check keeps for its diagnosis; later
#: ones are counted, as the ``unseen`` points of a diagnosis (a case of 1000 points at
#: 10⁶ elements that failed everywhere held them all)
KEPT_POINTS = 3
#: where ``--max-memory`` puts the budget for this process and its workers
ENV = "GRADCHECK_MAX_MEMORY"
#: the bytes each worker may take by default (no ``--max-memory``), set by the parent in
#: the environment of the workers it starts (:func:`gradcheck.process.limits.worker_env`)
WORKER_ENV = "GRADCHECK_WORKER_MEMORY"

_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4,
          "P": 1024**5}


class BudgetError(GradcheckError):
    """A case would need more than its budget: it is refused before it runs."""


def parse_size(text: str) -> int:
    """Bytes of ``"4G"``, ``"512M"``, ``"1.5GiB"``, ``"2000000"`` (binary units).

    Raises:
        ValueError: not a positive size.
    """
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*([KMGTP]?)(?:i?B)?\s*", str(text), re.IGNORECASE)
    if not m:
        raise ValueError(f"not a size: {text!r} (write e.g. 4G, 512M or 2000000)")
    scaled = float(m.group(1)) * _UNITS[m.group(2).upper()]
    if not math.isfinite(scaled):   # more digits than a float holds: no size
        raise ValueError(f"not a size: {text!r} (too large)")
    size = int(scaled)
    if size <= 0:
        raise ValueError(f"a size must be positive, got {text!r}")
    return size


def format_size(size: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def max_memory() -> int:
    """The memory budget of one case: ``--max-memory`` (:data:`ENV`), else the default."""
    given = os.environ.get(ENV)
    if given:
        try:
            return parse_size(given)
        except ValueError:
            pass   # the CLI checks the flag; a stray variable is not a case's problem
    return DEFAULT_MAX_MEMORY


@contextlib.contextmanager
def memory_budget(size: str | int | None):
    """Inside the block, ``size`` (bytes or ``"4G"``; None: leave it) is the budget of
    every case, in this process and the worker processes it starts; the variable as it
    was after. It makes :func:`limit_worker` limit the workers' address space."""
    if size is None:
        yield
        return
    before = os.environ.get(ENV)
    os.environ[ENV] = str(parse_size(size) if isinstance(size, str) else int(size))
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = before


# --------------------------------------------------------------------------- SymPy's work

#: input elements up to which order = 2 falls back to the element-expanded reference
#: where the tensor level has no second derivative (a case may ask for it at any size:
#: ``second_order = "expanded"``)
EXPANDED_SECOND_ELEMENTS = 48
#: Python calls SymPy may make building the expanded reference's first and second
#: derivatives and compiling them (measured: 0.3 to 6.7 million for the small layers of
#: tests/test_second_order.py, 1 to 3 seconds per million while counted; a sparsemax
#: over [3, 6] does not finish lowering in 10 minutes)
EXPANDED_SECOND_CALLS = 10_000_000


#: the count of the block running in this thread (a profile hook is per thread)
_counting = threading.local()


class _Exceeded(BaseException):
    """Raised by the counter inside SymPy (a BaseException, so that no ``except
    Exception`` on the way swallows it); :func:`sympy_work` turns it into BudgetError."""


@contextlib.contextmanager
def sympy_work(what: str, calls: int | None = None):
    """Inside the block, at most ``calls`` Python calls (default
    :data:`EXPANDED_SECOND_CALLS`), counted by a profile hook (a profiler already set
    still sees every event); past them, the block stops with a :class:`BudgetError` that
    says ``what`` was being built. A block inside another counts against the outer's
    budget. Calls, not seconds: the same refusal on a busy machine as on an idle one.
    Under a profiler written in C (cProfile), whose hook Python cannot chain, nothing
    is counted. Yields the count so far (a one-element list).

    Raises:
        BudgetError: the block made more calls than its budget.
    """
    previous = sys.getprofile()
    if getattr(_counting, "count", None) is not None or not (previous is None
                                                             or callable(previous)):
        # counted already, against the outer block's budget; or not countable
        yield getattr(_counting, "count", None) or [0]
        return
    limit = EXPANDED_SECOND_CALLS if calls is None else calls
    count = _counting.count = [0]
    collecting = gc.isenabled()

    def counter(frame, event, arg):
        if previous is not None:
            previous(frame, event, arg)
        if event == "call":
            count[0] += 1
            if count[0] > limit:
                raise _Exceeded()

    def refusal() -> BudgetError:
        return BudgetError(
            f"{what} took more than {limit:,} steps of SymPy (Python calls) and was "
            "stopped: its expanded formula is too large to differentiate twice element by "
            "element")

    # The cyclic collector is off in the block: a finalizer it runs (a __del__ or a
    # weakref callback of whatever earlier code left behind) is a Python call too, and
    # an _Exceeded raised in one is swallowed ("Exception ignored in ...") while CPython
    # unsets the profile hook that raised: the block would run on unbudgeted, for
    # minutes, or not, by what ran before it in the process.
    gc.disable()
    sys.setprofile(counter)
    try:
        yield count
    except _Exceeded:
        raise refusal() from None
    finally:
        sys.setprofile(previous)
        _counting.count = None
        if collecting:
            gc.enable()
    if count[0] > limit:   # raised where something swallowed it: refused all the same
        raise refusal()


# --------------------------------------------------------------------------- exhausted

def out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` says memory ran out: a ``MemoryError`` (NumPy's too), torch's
    ``OutOfMemoryError`` or its CPU allocator's failure (a ``RuntimeError``)."""
    if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":
        return True
    text = str(exc) if isinstance(exc, RuntimeError) else ""
    return "can't allocate memory" in text or "not enough memory" in text


def exhausted(exc: BaseException) -> str | None:
    """The case's error for a limit of Python's that ``exc`` hit (memory, recursion),
    or None when it is something else."""
    if out_of_memory(exc):
        budget, share = os.environ.get(ENV, ""), os.environ.get(WORKER_ENV, "")
        where = (f"the limit of --max-memory {format_size(int(budget))}"
                 if budget.isdigit() else
                 f"a worker's default limit of {format_size(int(share))} (a share of "
                 "the machine's available memory)" if share.isdigit()
                 else "the memory available")
        return (f"the case ran out of memory ({type(exc).__name__}: {_first_line(exc)}): "
                f"it needs more than {where}; use fewer points or smaller shapes, or "
                "raise --max-memory")
    if isinstance(exc, RecursionError):
        return ("the case nests too deeply to be checked (RecursionError: Python's "
                "recursion limit was reached): write the formula with fewer nested "
                "operations, or split it with let")
    return None


def _first_line(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:
        text = ""
    return (text.splitlines() or [""])[0][:200]


# --------------------------------------------------------------------------- workers

def limit_worker() -> None:
    """In a worker process, after its start-up imports: limit its address space to what
    it has mapped now plus ``--max-memory`` (:data:`ENV`) or, without the flag, plus
    the share of the machine's available memory its parent gave it
    (:data:`WORKER_ENV`, see :func:`gradcheck.process.limits.worker_share`),
    so that a case that allocates past it fails with a ``MemoryError`` (that case's
    error) instead of drawing the OOM killer onto the machine's other processes. The
    limit is on address space, which torch, OpenBLAS and CUDA reserve beyond what they
    use: the share leaves room for that. Off Linux nothing is limited."""
    given = os.environ.get(ENV) or os.environ.get(WORKER_ENV)
    if not given:
        return
    try:
        import resource

        budget = parse_size(given)
        with open("/proc/self/status") as f:
            mapped = next(int(line.split()[1]) * 1024 for line in f
                          if line.startswith("VmSize:"))
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        soft = mapped + budget
        if hard != resource.RLIM_INFINITY:
            soft = min(soft, hard)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    except (ImportError, OSError, ValueError, OverflowError, StopIteration):
        return   # no /proc (not Linux) or no such limit: the estimate still holds
