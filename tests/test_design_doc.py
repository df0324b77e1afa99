"""docs/design.md §2 is kept true to the tree: every package of gradcheck is drawn in
its layout, the layers table names the layers of tests/test_architecture.py, and every
file the "Where to add things" table names exists."""

from __future__ import annotations

import re
from pathlib import Path

from test_architecture import LAYERS

ROOT = Path(__file__).resolve().parents[1]
DESIGN = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
LAYOUT = DESIGN[DESIGN.index("## 2. Layout"):DESIGN.index("## 3.")]
WHERE = LAYOUT[LAYOUT.index("### Where to add things"):]


def _expand(path: str) -> list[str]:
    """``a/{b,c}.py`` -> ``["a/b.py", "a/c.py"]``."""
    m = re.search(r"\{([^}]*)\}", path)
    if not m:
        return [path]
    return [p for part in m.group(1).split(",")
            for p in _expand(path[:m.start()] + part + path[m.end():])]


def named_files(text: str) -> list[str]:
    """The paths in backticks that name a file (``x/y.py``, ``tests/test_z.py``)."""
    out = []
    for quoted in re.findall(r"`([^`\s]+)`", text):
        if quoted.endswith(".py") and "/" in quoted:
            out += _expand(quoted)
    return out


def test_every_package_is_drawn_in_the_layout():
    packages = sorted(p.parent.relative_to(ROOT / "gradcheck").as_posix()
                      for p in (ROOT / "gradcheck").rglob("__init__.py")
                      if p.parent != ROOT / "gradcheck")
    missing = [p for p in packages if f"{p.rpartition('/')[2]}/" not in LAYOUT]
    assert not missing, f"packages not in docs/design.md §2: {missing}"


def test_the_layers_table_names_every_layer():
    for names in LAYERS:
        for name in names:
            spelled = f"`{name}/`" if (ROOT / "gradcheck" / name).is_dir() else (
                "`__init__.py`" if name == "" else f"`{name}.py`")
            assert spelled in LAYOUT, spelled


def test_every_file_the_extension_table_names_exists():
    files = named_files(WHERE)
    assert len(files) >= 15   # the table is really read
    missing = [f for f in files
               if not (ROOT / f).exists() and not (ROOT / "gradcheck" / f).exists()]
    assert not missing, f"files named in 'Where to add things' that do not exist: {missing}"


def test_a_missing_file_is_found():
    assert named_files("`rules/{a,b}.py` and `x.py`") == ["rules/a.py", "rules/b.py"]
