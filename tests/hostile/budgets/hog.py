"""An op that takes far more memory than its case's shapes say: 1 GiB of its own,
touched, before it computes x * x. Under ``--max-memory 256M`` its worker process runs
out of address space, and the case must end as its own clear error."""

import numpy as np


def hog(x):
    scratch = np.ones(1 << 27)   # 2**27 float64: 1 GiB
    del scratch
    return x * x

