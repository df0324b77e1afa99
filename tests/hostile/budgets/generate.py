"""The budgets' hostile inputs too big to commit, written on demand: ``generate(folder)``
writes them under ``folder`` and returns their paths (tests/test_hostile_budgets.py and
tests/hostile/measure.py call it). Each file's first line says what reading it must
give, as the committed files' do: ``# expect: TEXT`` (its one error holds TEXT) or
``# expect-run: TEXT`` (its cases read, and running each gives an error holding TEXT).
"""

from __future__ import annotations

import os
from pathlib import Path

HEAD = '[[case]]\nname = "x"\nexpr = "sum(x)"\ninputs.x = { shape = [3] }\n'
YAML_HEAD = "case:\n  - name: x\n    expr: sum(x)\n    inputs: {x: [3]}\n"
#: what the symbolic link of ``symlink-out.toml`` points to: its text must never show
SECRET = "secret-token-of-a-file-outside-the-project"


def generate(folder: Path) -> list[Path]:
    """Write the generated inputs under ``folder/project`` (a project: it holds a
    pyproject.toml) and one file outside it; the inputs' paths."""
    project = Path(folder) / "project"
    project.mkdir(parents=True, exist_ok=True)
    (project / "pyproject.toml").write_text("[project]\nname = 'hostile'\n")
    out = []

    def write(name: str, expect: str, text: str) -> None:
        path = project / name
        path.write_text(f"# {expect}\n{text}")
        out.append(path)

    write("long-key.toml", "expect: a dotted key of more than 16 parts",
          "# one key of 40,000 parts, 80 KB: tomllib took 137 s and 9.4 GB\n" + HEAD
          + "description." + ".".join(["a"] * 40_000) + " = 1\n")
    write("big.yaml", "expect: over the limit of 2.0 MiB",
          "# 5 MB of YAML: three passes of PyYAML took 190 s and 2.1 GB\n" + YAML_HEAD
          + "    description: [" + ", ".join(["1.5"] * 1_000_000) + "]\n")
    write("long-expr.toml", "expect: characters, over the limit of 100,000",
          HEAD.replace('"sum(x)"', '"' + "x + " * 50_000 + 'x"'))
    write("long-string.yaml", "expect: characters, over the limit of 100,000",
          YAML_HEAD + "    description: " + "a" * 200_000 + "\n")
    write("many-nodes.yaml", "expect: more than 100,000 values in one file",
          YAML_HEAD + "    description: [" + ", ".join(["0"] * 150_000) + "]\n")
    write("many-cases.toml", "expect: the file holds 10,001 cases",
          "[[case]]\n" * 10_001)
    # 200 MB on disk as far as stat() can tell, without writing them: a sparse file
    big = project / "big-value.toml"
    with open(big, "w") as f:
        f.write("# expect: over the limit of 2.0 MiB\n# a 200 MB value\n" + HEAD
                + "inputs.x.value = [")
        f.truncate(200 * 1024 * 1024)
    out.append(big)
    outside = Path(folder) / "outside" / "secret.toml"
    outside.parent.mkdir(exist_ok=True)
    outside.write_text(f'[[case]]\nname = "{SECRET}"\n{SECRET} = 1\n')
    link = project / "symlink-out.toml"
    if not link.is_symlink():
        os.symlink(os.path.relpath(outside, project), link)
    out.append(link)
    return out


def expectation(path: Path) -> tuple[str, str]:
    """(``"expect"`` or ``"expect-run"``, the text) of a hostile file's first line; the
    symbolic link's is not read (that is the point): it is refused."""
    if path.is_symlink():
        return "expect", "refused: a symbolic link"
    with open(path, encoding="utf-8") as f:
        first = f.readline()
    kind, _, text = first.lstrip("# ").partition(":")
    return kind, text.strip()
