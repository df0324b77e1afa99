"""Settings out of range (tests/test_hostile_limits.py): each must be a usage error
(exit 2) naming the value and the range accepted, before any worker starts.

``COMMAND_LINE``: name -> (arguments after ``gradcheck run CASES``, words the error
must hold). ``TABLE``: name -> (the ``[tool.gradcheck]`` table's text, words)."""

TIMEOUT = "at most 86,400 (one day)"
MEMORY = "from 1M to 1P"
JOBS = "from 0 (one per CPU core) to 1024"

COMMAND_LINE = {
    "--timeout inf": (["--timeout", "inf"], ["got inf", TIMEOUT]),
    "--timeout nan": (["--timeout", "nan"], ["got nan", TIMEOUT]),
    "--timeout 0": (["--timeout", "0"], ["got 0.0", TIMEOUT]),
    "--timeout -5": (["--timeout=-5"], ["got -5.0", TIMEOUT]),
    "--timeout 1e9": (["--timeout", "1e9"], ["got 1000000000.0", TIMEOUT]),
    "--max-memory 0": (["--max-memory", "0"], ["got '0'", MEMORY]),
    "--max-memory -1G": (["--max-memory=-1G"], ["got '-1G'", MEMORY]),
    "--max-memory 10**30": (["--max-memory", "1" + "0" * 30], ["got '1000000", MEMORY]),
    "--max-memory 10**400": (["--max-memory", "1" + "0" * 400], ["got '1000000", MEMORY]),
    "--max-memory 2P": (["--max-memory", "2P"], ["got '2P'", MEMORY]),
    "--max-memory 16E": (["--max-memory", "16E"], ["got '16E'", MEMORY]),
    "--max-memory lots": (["--max-memory", "lots"], ["got 'lots'", MEMORY]),
    "--max-memory 512K": (["--max-memory", "512K"], ["got '512K'", MEMORY]),
    "--jobs 1000000": (["--jobs", "1000000"], ["got 1000000", JOBS]),
    "--jobs -1": (["--jobs=-1"], ["got -1", JOBS]),
}

TABLE = {
    "timeout = inf": ("timeout = inf", ["got inf", TIMEOUT]),
    "timeout = nan": ("timeout = nan", ["got nan", TIMEOUT]),
    "timeout = -inf": ("timeout = -inf", ["got -inf", TIMEOUT]),
    "timeout = 0": ("timeout = 0", ["got 0", TIMEOUT]),
    "timeout = 1e12": ("timeout = 1e12", ["got 1000000000000.0", TIMEOUT]),
    "timeout = true": ("timeout = true", ["got True", TIMEOUT]),
    "max-memory = 0": ("max-memory = 0", ["got 0", MEMORY]),
    "max-memory = -1": ("max-memory = -1", ["got -1", MEMORY]),
    "max-memory = 2**63-1": ("max-memory = 9223372036854775807",
                             ["got 9223372036854775807", MEMORY]),
    "max-memory = \"10**400\"": (f'max-memory = "1{"0" * 400}"', ["got '1000", MEMORY]),
    "max-memory = \"99999T\"": ('max-memory = "99999T"', ["got '99999T'", MEMORY]),
    "max-memory = \"lots\"": ('max-memory = "lots"', ["got 'lots'", MEMORY]),
    "max-memory = 1.5e9": ("max-memory = 1.5e9", ["got 1500000000.0", MEMORY]),
    "jobs = 100000": ("jobs = 100000", ["got 100000", JOBS]),
    "jobs = -1": ("jobs = -1", ["got -1", JOBS]),
    "jobs = 2.0": ("jobs = 2.0", ["got 2.0", JOBS]),
}
