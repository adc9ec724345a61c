"""The package's modules import each other without cycles, and no private names cross modules.

The graph is read from the source (``ast``), not from ``sys.modules``: every
``import`` statement counts, at module level or inside a function (a deferred
import that breaks a cycle at run time is still a cycle in the design).  Imports
under ``if TYPE_CHECKING:`` are never executed and are left out.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import pkgutil
from pathlib import Path

import pytest

import symformer

PACKAGE = "symformer"


def _modules() -> dict[str, Path]:
    found = {PACKAGE: Path(symformer.__file__)}
    for info in pkgutil.walk_packages(symformer.__path__, f"{PACKAGE}."):
        spec = importlib.util.find_spec(info.name)
        found[info.name] = Path(spec.origin)
    return found


MODULES = _modules()


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, typing: bool = False):
    """Every import statement of ``tree``, except those under ``if TYPE_CHECKING:``
    (``typing``: those too)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node) and not typing:
            yield from (n for child in node.orelse for n in _imports_of(child))
            continue
        yield from _imports_of(node, typing)


def _imports_of(node: ast.AST, typing: bool = False):
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        yield node
    else:
        yield from _imports(node, typing)


def _resolve(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    is_package = MODULES[module].name == "__init__.py"
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> set[str]:
    """The package's modules one import statement runs.

    Importing ``a.b.c`` runs the packages ``a`` and ``a.b`` first: those count too,
    except the packages the importing module sits in (a package's ``__init__``
    that re-exports its own modules is not a cycle).
    """
    if isinstance(node, ast.Import):
        named = {a.name for a in node.names if a.name in MODULES}
    else:
        source = _resolve(module, node)
        named = set()
        for alias in node.names:
            sub = f"{source}.{alias.name}"
            if sub in MODULES:
                named.add(sub)
            elif source in MODULES:
                named.add(source)
    own = _packages(module)
    return named | {p for name in named for p in _packages(name) if p not in own}


def _packages(name: str) -> set[str]:
    """The packages ``name`` sits in (run before it when it is imported)."""
    parts = name.split(".")
    return {".".join(parts[:k]) for k in range(2, len(parts))}


def _graph(typing: bool = False) -> dict[str, set[str]]:
    """Each module's imports of the package (``typing``: the type checker's too)."""
    graph = {}
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        graph[name] = set().union(*(_targets(name, n) for n in _imports(tree, typing))) \
            - {name}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph (as a path that returns to its start), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        state[node] = 2
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_graph_is_read_from_the_source():
    graph = _graph()
    # Independent spot checks of the reader: known edges, at module level and deferred.
    assert "symformer.engine.graph" not in graph["symformer.ops.base"]  # TYPE_CHECKING only
    assert "symformer.engine.arbmath" in graph["symformer.ops.softmax"]
    assert "symformer.ops.base" in graph["symformer.ops.softmax"]
    assert "symformer.errors" in graph["symformer.example.loader"]


def test_cycle_finder_finds_a_deferred_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycle(graph) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_every_module_imports():
    for name in MODULES:
        if not name.endswith(".__main__"):  # running it runs the command line
            importlib.import_module(name)


def test_no_import_cycle():
    cycle = _cycle(_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


#: The example file's parsers that still hold a part of the schema (a dataclass the
#: schema names), so the schema imports them for its types: none left, and it stays so.
SCHEMA_IN_PARSER: set[str] = set()


def test_the_example_schema_imports_no_parser():
    """Schema apart from parsing: the example's dataclasses (``example/schema.py``) import
    no module that parses a table (one defining a ``parse_*`` function), not even for
    type checking, and the example package's modules -- type checking included -- form
    no cycle (but through :data:`SCHEMA_IN_PARSER`)."""
    graph = _graph(typing=True)
    # the schema's own display (summary.py), which Example.__repr__ reads on use, is not
    # a parser: left out
    example = {m for m in MODULES if m.startswith("symformer.example.")} \
        - {"symformer.example.summary"}
    parsers = {m for m in example if any(
        isinstance(n, ast.FunctionDef) and n.name.startswith("parse_")
        for n in ast.parse(MODULES[m].read_text(encoding="utf-8")).body)}
    assert {"symformer.example.decoder", "symformer.example.loss",
            "symformer.example.stages", "symformer.example.loader"} <= parsers
    assert graph["symformer.example.schema"] & parsers == SCHEMA_IN_PARSER
    inside = {m: graph[m] & example - (SCHEMA_IN_PARSER if m.endswith(".schema") else set())
              for m in example}
    cycle = _cycle(inside)
    assert cycle is None, "import cycle (type checking included): " + " -> ".join(cycle)


#: The bottom floor: what the operations, the equations and every renderer read (errors,
#: SymPy on first use, scripts on symbols, a symbol's notation, the operations' registry).
BOTTOM = {"symformer.errors", "symformer.lazy", "symformer.math_scripts",
          "symformer.notation_types", "symformer.registry"}


def test_the_bottom_floor_imports_nothing_above_it():
    graph = _graph()
    for name in sorted(BOTTOM):
        assert graph[name] <= BOTTOM, f"{name} imports {sorted(graph[name] - BOTTOM)}"
    # the notation every operation declares is defined there, not in the operations
    from symformer.ops import Notation
    assert Notation.__module__ == "symformer.notation_types"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_private_name_imported_from_another_module(name):
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    private = [f"{_resolve(name, n)}.{a.name}" for n in _imports(tree)
               if isinstance(n, ast.ImportFrom) for a in n.names
               if a.name.startswith("_") and a.name != "__version__"
               and _resolve(name, n) != "__future__"]
    assert not private, f"{name} imports private names: {', '.join(private)}"


def test_derive_imports_only_what_it_runs():
    """``symformer derive`` imports its own command, not the exporters, the tracer, the
    figures or the other commands (a faster start; see README, Performance)."""
    import subprocess
    import sys

    code = ("import sys, runpy; sys.argv = ['symformer', 'derive']\n"
            "try:\n    runpy.run_module('symformer', run_name='__main__')\n"
            "except SystemExit as e:\n    assert not e.code, e.code\n"
            "print('MODULES', *sorted(m for m in sys.modules if m.startswith('symformer')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=Path(symformer.__file__).parent.parent)
    loaded = set(out.stdout.split("MODULES", 1)[1].split())
    assert "symformer.cli.derive" in loaded and "symformer.engine.rounding" in loaded
    for absent in ("symformer.latex", "symformer.trace", "symformer.figures",
                   "symformer.cli.export", "symformer.cli.check", "symformer.verify.check"):
        assert absent not in loaded, absent
