"""Start-up: ``--help``, ``--version`` and ``list`` import neither torch, SymPy, SciPy nor
gradcheck's engine (they are what makes a run slow to start), and the rule table still
builds the same SymPy, NumPy, torch and engine values once its columns are called.

Each check runs in a fresh interpreter, since this process has imported everything."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "sympy", "scipy", "gradcheck.engine")


def _heavy(modules) -> list[str]:
    """The modules of ``modules`` that are, or are inside, one of HEAVY."""
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


def _python(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("argv", [["--help"], ["run", "--help"], ["list", "--help"],
                                  ["--version"], ["list", "cases/"]],
                         ids=lambda argv: " ".join(argv))
def test_command_imports_nothing_heavy(argv):
    proc = _python("-X", "importtime", "-m", "gradcheck", *argv)
    assert proc.returncode == 0, proc.stderr[-2000:]
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:")}
    assert "gradcheck.cli.main" in imported        # the import log is really there
    assert _heavy(imported) == []
    if argv == ["list", "cases/"]:
        assert "gradcheck.cases" in imported
        assert proc.stdout.splitlines()[-1].endswith(" cases")
    elif argv == ["--version"]:
        assert proc.stdout.startswith("gradcheck ")
    else:
        assert proc.stdout.startswith("usage: gradcheck")


def test_main_list_leaves_the_heavy_modules_unimported():
    script = textwrap.dedent("""
        import contextlib, io, json, sys
        from gradcheck.cli.main import main
        with contextlib.redirect_stdout(io.StringIO()) as out:
            code = main(["list", "cases/"])
        print(json.dumps({"code": code, "out": out.getvalue(),
                          "modules": sorted(sys.modules)}))
        """)
    proc = _python("-c", script)
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen = json.loads(proc.stdout)
    assert seen["code"] == 0
    assert "gradcheck.cases" in seen["modules"] and "gradcheck.rules" in seen["modules"]
    assert _heavy(seen["modules"]) == []
    assert seen["out"].splitlines()[-1].endswith(" cases")


def test_the_table_imports_its_backends_only_when_called():
    # Importing the table and parsing (constants included) costs no SymPy; calling a
    # column then gives exactly what SymPy, NumPy and the engine give directly.
    script = textwrap.dedent("""
        import json, sys
        import numpy as np
        from gradcheck.formula.parser import parse
        from gradcheck.rules import RULES
        from gradcheck.formula.tree import Node

        x = Node("input", shape=(3,), name="x")
        node = parse("-pi * x + 0.1 * sum(erf(x)) - -E", {"x": x})
        before = sorted(sys.modules)

        import sympy
        from gradcheck.engine import Tensor, sin

        s = sympy.Symbol("s")
        (pi_x, tenth_sum), minus_e = node.args[0].args, node.args[1]
        pi, tenth = pi_x.args[0], tenth_sum.args[0]
        same = {
            "exp": RULES["exp"].sympy(s) == sympy.exp(s),
            "abs": RULES["abs"].sympy(s) == sympy.Abs(s),
            "maximum": RULES["maximum"].sympy(s, 2) == sympy.Max(s, 2),
            "lt": RULES["lt"].sympy(s, 1) == sympy.StrictLessThan(s, 1),
            # (written piecewise so that exp never overflows; the same function)
            "sigmoid": RULES["sigmoid"].sympy(s).subs(s, sympy.Rational(7, 10)).evalf(30)
                       == (1 / (1 + sympy.exp(-sympy.Rational(7, 10)))).evalf(30),
            "sum": RULES["sum"].sympy(np.array([s, 2 * s], dtype=object), (0,),
                                      False)[()] == 3 * s,
            "constants": [pi.value == -sympy.pi, tenth.value == sympy.Rational(1, 10),
                          minus_e.value == -sympy.E],
            "erf": float(RULES["erf"].numpy(0.5)) == 0.5204998778130465,
            "engine": sin(Tensor([0.0])).data.tolist() == [0.0],
        }
        print(json.dumps({"before": before, "same": same}))
        """)
    proc = _python("-c", script)
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen = json.loads(proc.stdout)
    assert _heavy(seen["before"]) == []
    assert seen["same"] == {"exp": True, "abs": True, "maximum": True, "lt": True,
                            "sigmoid": True, "sum": True, "constants": [True, True, True],
                            "erf": True, "engine": True}
