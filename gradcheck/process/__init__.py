"""Process plumbing: the heap between repeated evaluations, interrupts, time and
memory limits, budgets, BLAS threads, starting workers, child processes and the
data-only channel to an op's process."""
