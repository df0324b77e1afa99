"""Arguments nested 10,000 deep (tests/test_hostile_limits.py), each a list of
``gradcheck`` arguments: each must be a usage error (exit 2) with a message, never a
RecursionError's traceback. Built here rather than committed: each is 20,000
characters of brackets."""

DEPTH = 10_000


def nested(open_: str, close: str, inner: str = "1", depth: int = DEPTH) -> str:
    return open_ * depth + inner + close * depth


def probes() -> dict[str, list[str]]:
    """name -> argv (without the leading ``gradcheck``)."""
    explain = ["explain", "sum(x)", "--inputs", "x=[2]"]
    return {
        "explain --gradient [[[...]]]": explain + ["--gradient", nested("[", "]")],
        "explain --gradient [1,[1,...]]": explain + ["--gradient", nested("[1,", "]")],
        "explain --gradient ((...))": explain + ["--gradient", nested("(", ")")],
        "explain --gradient {...}": explain + ["--gradient", nested('{"a":', "}")],
        "explain EXPR ((x))": ["explain", nested("(", ")", "x", 9_000), "--inputs", "x=[2]"],
        "explain EXPR [[x]]": ["explain", nested("[", "]", "x", 9_000), "--inputs", "x=[2]"],
        "explain EXPR ----x": ["explain", "--inputs", "x=[2]", "--", "-" * 19_000 + "x"],
        "explain EXPR x**x**...": ["explain", "x" + "**x" * 5_000, "--inputs", "x=[2]"],
        "explain --let h=((x))": explain + ["--let", "h=" + nested("(", ")", "x", 9_000)],
        "explain --let h=sin(sin(...))": explain + ["--let",
                                                   "h=" + nested("sin(", ")", "x", 3_000)],
        "explain --inputs x=[[[...]]]": ["explain", "sum(x)", "--inputs",
                                         "x=" + nested("[", "]", "")],
        "explain --retain ((...": explain + ["--retain", "(" * DEPTH],
        "run -k ((...": ["run", "NOFILE.toml", "-k", "(" * DEPTH],
        "run --report json:a/a/...": ["run", "NOFILE.toml", "--report",
                                      "json:" + "a/" * 3_000 + "r.json"],
        "doctor ((...:f": ["doctor", "(" * DEPTH + ":f"],
        "doctor a.a.a...:f": ["doctor", "a." * DEPTH + "b:f"],
    }


def settings() -> dict[str, str]:
    """name -> a [tool.gradcheck] table nested 5,000 deep (TOML's parser recurses)."""
    return {
        "pyproject paths = [[[...]]]": "[tool.gradcheck]\npaths = " + nested("[", "]", "",
                                                                           5_000) + "\n",
        "pyproject paths = {a={a=...}}": "[tool.gradcheck]\npaths = " + nested(
            "{a=", "}", "1", 5_000) + "\n",
    }
