"""Ops of the limits probes (tests/test_hostile_limits.py)."""

import numpy as np


def _available() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    raise OSError("no MemAvailable")


def address_hog(x):
    """Asks for nine tenths of the machine's available memory, untouched (so nothing is
    used even where no limit stops it): a worker's default limit, half the available
    memory, refuses the mapping at once, and the case must end as its own error."""
    scratch = np.empty(int(_available() * 0.9) // 8)
    del scratch
    return x * x


def surrogates(x):
    """Raises with lone surrogates in its message, which no UTF-8 encoder writes."""
    raise ValueError("lone \ud800 high and \udfff low surrogates, and a pair \ud83d\ude00")


def linked(x):
    """Raises with every kind of text GitHub's Markdown would turn into a link."""
    raise ValueError("see http://evil.example/x, https://evil.example, www.evil.example, "
                     "mailto:a@evil.example, xmpp:b@evil.example, c@evil.example and "
                     "javascript:alert(1)")
