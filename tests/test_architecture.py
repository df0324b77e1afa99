"""The package's shape, read from its source with ``ast`` (nothing is imported):

- **no import cycle** among the modules of ``gradcheck``. Every ``import`` and
  ``from ... import`` counts, at module level or inside a function (a deferred import is
  still a dependency), relative ones resolved against the importing module. Importing
  module ``a.b.c`` depends on ``a.b.c`` and on the packages ``a`` and ``a.b`` (their
  ``__init__`` runs first), except on the importer's own enclosing packages, which are
  being imported already. ``from p import n`` depends on ``p.n`` where that is a module,
  and on ``p`` itself otherwise (a name its ``__init__`` defines): so a package's
  ``__init__`` importing its submodules and a submodule importing a name from its
  package close a cycle. Imports by ``importlib`` at run time cannot be read and do not
  count.
- **layers**: every module sits in one layer of :data:`LAYERS` (by its package under
  ``gradcheck``, or its own name at the root) and imports only from its own package or a
  lower layer; two packages of one layer import neither of each other.
- **no module longer than** :data:`MAX_MODULE_LINES` lines.
- **no function longer than** :data:`MAX_FUNCTION_LINES` lines (its ``def`` line to its
  last line) **without its reason**: a comment ``# long: <why>`` on the line right above
  the ``def`` (or above its first decorator), or on the first line of its body (right
  after the signature, before the docstring if it has one), e.g.::

      # long: one table of the notes, text from top to bottom
      def static_notes(cfg):
"""

from __future__ import annotations

import ast
import re
import sys
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "gradcheck"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60
LONG_REASON = re.compile(r"#\s*long:\s*\S")


@dataclass(frozen=True)
class Module:
    name: str          # dotted, e.g. "gradcheck.cli.bench.run"
    path: Path
    is_package: bool   # an __init__.py

    @property
    def source(self) -> str:
        return self.path.read_text(encoding="utf-8")

    @property
    def package(self) -> str:
        """The package its relative imports start from."""
        return self.name if self.is_package else self.name.rpartition(".")[0]


def _modules() -> dict[str, Module]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        out[".".join(parts)] = Module(".".join(parts), path, is_package)
    return out


MODULES = _modules()


def _rel(path: Path) -> str:
    return str(path.relative_to(PACKAGE.parent))


# --------------------------------------------------------------------------- imports

def _enclosing(name: str) -> list[str]:
    """``a.b.c`` -> ``["a", "a.b"]``."""
    parts = name.split(".")
    return [".".join(parts[:k]) for k in range(1, len(parts))]


def _resolve(module: Module, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.package.split(".")
    base = base[:len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _targets(module: Module, node: ast.stmt) -> list[str]:
    """The modules of the package that one import statement makes ``module`` import."""
    if isinstance(node, ast.Import):
        wanted = [alias.name for alias in node.names]
    else:
        source = _resolve(module, node)
        wanted = [f"{source}.{a.name}" if f"{source}.{a.name}" in MODULES else source
                  for a in node.names]
    mine = set(_enclosing(module.name)) | {module.name}
    out = []
    for target in wanted:
        for name in _enclosing(target) + [target]:
            # an enclosing package is being imported already, unless a name is taken
            # from it (the target itself)
            if name in MODULES and (name not in mine or name == target != module.name):
                out.append(name)
    return out


def import_graph() -> dict[str, dict[str, int]]:
    """``{module: {imported module: line of its first import}}``."""
    graph: dict[str, dict[str, int]] = {}
    for name, module in MODULES.items():
        edges = graph.setdefault(name, {})
        for node in ast.walk(ast.parse(module.source, str(module.path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _targets(module, node):
                    edges.setdefault(target, node.lineno)
    return graph


def strongly_connected(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def shortest_cycle(graph: dict[str, dict[str, int]], component: list[str]) -> list[str]:
    """One shortest cycle through the component's first module, as a closed path."""
    start, members = component[0], set(component)
    parent: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue:
        v = queue.popleft()
        for w in sorted(graph[v]):
            if w == start:
                path = [v]
                while parent[path[-1]] is not None:
                    path.append(parent[path[-1]])
                return path[::-1] + [start]
            if w in members and w not in parent:
                parent[w] = v
                queue.append(w)
    raise AssertionError(f"no cycle through {start}")  # a component always has one


def _describe(graph, component: list[str]) -> str:
    cycle = shortest_cycle(graph, component)
    steps = [f"  {a} -> {b}   ({_rel(MODULES[a].path)}:{graph[a][b]})"
             for a, b in zip(cycle, cycle[1:])]
    return (f"{len(component)} modules in one cycle: {', '.join(component)}\n"
            "  e.g.\n" + "\n".join(steps))


def test_the_import_graph_has_no_cycle():
    graph = import_graph()
    components = strongly_connected(graph)
    assert not components, "import cycles:\n" + "\n".join(
        _describe(graph, c) for c in components)


# --------------------------------------------------------------------------- layers

#: the layers, lowest first: a module imports from its own package or a lower layer only.
#: Each entry is a package under ``gradcheck`` or a module at its root ("" is the root
#: package itself, whose ``__init__`` resolves the public names lazily into the faces
#: below it); packages of one layer are peers and import neither of each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("base",),                       # dtypes, shapes, arrays, errors, results, io
    ("process",),                    # heap, signals, time and memory limits, children
    ("project",),                    # the project's settings, where gradcheck may write
    ("report",),                     # renderers of results
    ("rules",),                      # the rule table
    ("engine",),                     # gradcheck's own autograd
    ("formula",),                    # the language: parser, tree, forward evaluation
    ("bounds", "sampling"),          # the rounding model; where points are drawn
    ("reference", "generate", "tracing"),  # the exact reference; generators; traced torch code
    ("witnesses",),                  # torch, engine, finite differences
    ("cases",),                      # case files, project settings, case memory
    ("checking",),                   # one case's check, comparisons, op checks
    ("session", "health"),           # runs of many cases; doctor
    ("testing",),                    # the public faces
    ("explanation", "strategies"),
    ("",),                           # gradcheck/__init__.py: the public names
    ("plugin",),                     # the pytest plugin, which offers them
    ("cli",),                        # the command line
    ("__main__",),
)


def layer_of(module: str) -> str:
    """``gradcheck.bounds.model`` -> ``bounds``; ``gradcheck.plugin`` -> ``plugin``;
    ``gradcheck`` -> ``""``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def upward_imports(graph: dict[str, dict[str, int]]) -> list[str]:
    """Every import that is not downward, as ``file:line: a (layer) -> b (layer)``; a
    module in no layer is one too."""
    rank = {name: i for i, names in enumerate(LAYERS) for name in names}
    out = []
    for a in sorted(graph):
        if layer_of(a) not in rank:
            out.append(f"{_rel(MODULES[a].path)}: {a} is in no layer of LAYERS")
            continue
        for b, line in sorted(graph[a].items()):
            if any(c.startswith(b + ".") and graph[a][c] == line for c in graph[a]):
                continue   # the package of a module the same line imports: said once
            la, lb = layer_of(a), layer_of(b)
            if la != lb and rank[la] <= rank.get(lb, len(LAYERS)):
                out.append(f"{_rel(MODULES[a].path)}:{line}: {a} ({la or 'root'}, layer "
                           f"{rank[la]}) imports {b} ({lb or 'root'}, layer "
                           f"{rank.get(lb, '?')})")
    return out


def test_every_import_goes_down_the_layers():
    bad = upward_imports(import_graph())
    assert not bad, "imports that do not go down the layers:\n  " + "\n  ".join(bad)


def test_at_most_a_few_modules_sit_at_the_root():
    root = [m for m in MODULES if m.count(".") == 1 and not MODULES[m].is_package]
    assert len(root) <= 8, root


# --------------------------------------------------------------------------- sizes

def test_no_module_is_longer_than_the_limit():
    long = [(len(m.source.splitlines()), _rel(m.path)) for m in MODULES.values()]
    over = sorted((n, path) for n, path in long if n > MAX_MODULE_LINES)
    assert not over, f"modules over {MAX_MODULE_LINES} lines:\n" + "\n".join(
        f"  {path}: {n} lines" for n, path in reversed(over))


def _has_reason(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    above = [lines[first - 2]] if first >= 2 else []
    # the first line of the body: the line after the signature's last line
    signature_end = node.body[0].lineno - 1
    while signature_end > node.lineno and lines[signature_end - 1].strip().startswith("#"):
        signature_end -= 1
    body_first = [lines[signature_end]] if signature_end < len(lines) else []
    return any(LONG_REASON.search(line) for line in above + body_first)


def long_functions() -> list[tuple[str, int, str, int]]:
    """``(file, line, name, lines)`` of every function over the limit without a reason."""
    out = []
    for module in MODULES.values():
        source = module.source
        lines = source.splitlines()
        for node in ast.walk(ast.parse(source, str(module.path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES and not _has_reason(lines, node):
                    out.append((_rel(module.path), node.lineno, node.name, length))
    return sorted(out)


def test_no_function_is_longer_than_the_limit_without_a_reason():
    over = long_functions()
    assert not over, (
        f"functions over {MAX_FUNCTION_LINES} lines without a '# long: <why>' comment "
        "above the def or on the first line of the body:\n" + "\n".join(
            f"  {path}:{line} {name}: {n} lines" for path, line, name, n in over))


# --------------------------------------------------------------------------- the checks

@pytest.fixture
def graph_of(tmp_path, monkeypatch):
    """The import graph of a made-up package ``gradcheck`` with the files given; the
    checks above then read that package."""
    me = sys.modules[__name__]

    def build(sources: dict[str, str]) -> dict:
        for rel, text in sources.items():
            path = tmp_path / "gradcheck" / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        monkeypatch.setattr(me, "PACKAGE", tmp_path / "gradcheck")
        monkeypatch.setattr(me, "MODULES", _modules())
        return import_graph()

    return build


def test_the_graph_counts_deferred_relative_and_package_imports(graph_of):
    graph = graph_of({
        "__init__.py": "from .a import f\n",
        "a.py": "def f():\n    from . import b\n",
        "b.py": "from gradcheck import f\n",          # a name from the package
        "p/__init__.py": "from .q import g\n",
        "p/q.py": "from .. import a\ndef g():\n    from ..p import r\n",
        "p/r.py": "import gradcheck.p.q\n",
    })
    assert set(graph["gradcheck"]) == {"gradcheck.a"}
    assert set(graph["gradcheck.a"]) == {"gradcheck.b"}
    assert set(graph["gradcheck.b"]) == {"gradcheck"}
    assert set(graph["gradcheck.p"]) == {"gradcheck.p.q"}
    assert set(graph["gradcheck.p.q"]) == {"gradcheck.a", "gradcheck.p.r"}
    assert set(graph["gradcheck.p.r"]) == {"gradcheck.p.q"}
    assert strongly_connected(graph) == [["gradcheck", "gradcheck.a", "gradcheck.b"],
                                         ["gradcheck.p.q", "gradcheck.p.r"]]
    assert shortest_cycle(graph, ["gradcheck.p.q", "gradcheck.p.r"]) == [
        "gradcheck.p.q", "gradcheck.p.r", "gradcheck.p.q"]


def test_a_long_function_passes_with_its_reason_only(graph_of):
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    graph_of({"__init__.py": "",
              "a.py": f"def bare():\n{body}\n\n# long: a table\n@staticmethod\n"
                      f"def above():\n{body}\n\ndef inside(\n        x):\n"
                      f"    # long: a table\n    '''doc'''\n{body}\n"
                      f"def short():\n    pass\n"})
    assert [name for _, _, name, _ in long_functions()] == ["bare"]


def test_an_upward_import_fails_the_layer_test(graph_of):
    ok = {"__init__.py": "", "base/__init__.py": "", "base/errors.py": "",
          "rules/__init__.py": "", "rules/row.py": "from ..base import errors\n",
          "cli/__init__.py": "", "cli/main.py": "def main():\n    from ..rules import row\n"}
    assert upward_imports(graph_of(ok)) == []
    # a deferred import from the rule table up into the command line, and a peer import
    bad = upward_imports(graph_of({
        "rules/row.py": "def f():\n    from ..cli import main\n",
        "bounds/__init__.py": "", "bounds/model.py": "from ..sampling import points\n",
        "sampling/__init__.py": "", "sampling/points.py": "", "stray.py": ""}))
    assert bad == [
        "gradcheck/bounds/model.py:1: gradcheck.bounds.model (bounds, layer 7) imports "
        "gradcheck.sampling.points (sampling, layer 7)",
        "gradcheck/rules/row.py:2: gradcheck.rules.row (rules, layer 4) imports "
        "gradcheck.cli.main (cli, layer 17)",
        "gradcheck/stray.py: gradcheck.stray is in no layer of LAYERS"]
