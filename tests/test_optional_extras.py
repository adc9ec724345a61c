"""No test module needs an optional extra to be collected.

The README promises that ``pip install -e '.[test]' && python -m pytest`` passes on a
fresh machine, the framework tests skipping without PyTorch.  A test module that
imports ``torch`` at its top level breaks that promise for the whole run (collection
stops with ``ModuleNotFoundError``), and CI, which installs torch first, never sees
it.  This test reads every ``tests/*.py`` with :mod:`ast` (importing none of them)
and fails, naming the file and line, on a module-level import of anything that is
neither the standard library, a core dependency nor in the ``test`` extra of
pyproject.toml -- and on ``torch`` and ``transformers`` (the ``torch`` extra) in any
case.  It follows the ``symformer`` modules a test imports at its top level, since
their own top-level imports run at collection too.  Allowed: an import inside a
function (a test, a fixture), under ``try: ... except ImportError``, under
``if TYPE_CHECKING:``, and ``pytest.importorskip(...)`` (a skip, not an error).
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Import names of distributions whose name is not the import name.
IMPORT_NAMES = {"python-flint": ("flint",), "latexify-py": ("latexify",),
                "markdown-it-py": ("markdown_it",), "mdit-py-plugins": ("mdit_py_plugins",),
                "pytest-xdist": ("xdist",), "ruff": ()}
#: Handlers that make an import inside ``try`` optional.
_GUARDS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


def import_names(requirement: str) -> tuple[str, ...]:
    """``"python-flint>=0.6"`` -> ``("flint",)``."""
    name = re.match(r"[A-Za-z0-9._-]+", requirement)[0].lower()
    return IMPORT_NAMES.get(name, (name.replace("-", "_").replace(".", "_"),))


def packages(root: Path) -> tuple[set[str], set[str]]:
    """(allowed at a module's top level, optional whatever else says) from pyproject."""
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    extras = project.get("optional-dependencies", {})
    allowed = {n for r in project.get("dependencies", []) + extras.get("test", [])
               for n in import_names(r)}
    optional = {n for group, reqs in extras.items() if group != "test" for r in reqs
                for n in import_names(r)}
    return allowed - optional, optional


def top_level_imports(tree: ast.Module) -> Iterator[tuple[int, str, int]]:
    """(line, module, relative level) of every import that runs when the module is
    imported: not inside a function, an ``except ImportError`` guard or
    ``if TYPE_CHECKING``.  ``import_module("x")`` and ``__import__("x")`` count."""
    def calls(node: ast.AST) -> Iterator[tuple[int, str, int]]:
        for sub in ast.walk(node):
            if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(sub, ast.Call) and sub.args and \
                    isinstance(sub.args[0], ast.Constant) and \
                    isinstance(sub.args[0].value, str):
                func = sub.func
                name = func.attr if isinstance(func, ast.Attribute) else \
                    getattr(func, "id", "")
                if name in ("import_module", "__import__"):
                    yield sub.lineno, sub.args[0].value, 0

    def visit(body: list[ast.stmt]) -> Iterator[tuple[int, str, int]]:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield node.lineno, alias.name, 0
            elif isinstance(node, ast.ImportFrom):
                module = node.module or ""
                for alias in node.names:  # `from pkg import submodule` imports it too
                    yield node.lineno, f"{module}.{alias.name}" if module else alias.name, \
                        node.level
            elif isinstance(node, ast.Try):
                names = {n.id if isinstance(n, ast.Name) else getattr(n, "attr", "")
                         for h in node.handlers
                         for n in ([] if h.type is None else
                                   h.type.elts if isinstance(h.type, ast.Tuple)
                                   else [h.type])}
                guarded = any(h.type is None for h in node.handlers) or names & _GUARDS
                if not guarded:
                    yield from visit(node.body)
                for part in (*(h.body for h in node.handlers), node.orelse,
                             node.finalbody):
                    yield from visit(part)
            elif isinstance(node, ast.If):
                if "TYPE_CHECKING" not in ast.unparse(node.test):
                    yield from calls(node.test)
                    yield from visit(node.body)
                yield from visit(node.orelse)
            elif isinstance(node, (ast.With, ast.For, ast.While, ast.ClassDef)):
                yield from visit(node.body)
                yield from visit(getattr(node, "orelse", []))
            else:
                yield from calls(node)

    yield from visit(tree.body)


def _module_file(root: Path, dotted: str) -> Path | None:
    path = root.joinpath(*dotted.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _package_of(root: Path, file: Path) -> list[str]:
    parts = list(file.relative_to(root).with_suffix("").parts)
    return parts[:-1] if parts[-1] != "__init__" else parts[:-1]


def violations(root: Path) -> tuple[list[str], int]:
    """Every module-level import of an optional or undeclared package reached from
    ``root/tests/*.py`` (the message names the file, the line and the test that
    reaches it), and the number of files read."""
    allowed, optional = packages(root)
    local = {p.stem for p in (root / "tests").glob("*.py")} | {"tests", "symformer"}
    found: list[str] = []
    seen: set[Path] = set()
    queue = [(p, p.relative_to(root).as_posix()) for p in sorted((root / "tests").glob("*.py"))]
    while queue:
        file, via = queue.pop()
        if file in seen:
            continue
        seen.add(file)
        shown = file.relative_to(root).as_posix()
        reached = "" if shown == via else f" (imported at collection by {via})"
        tree = ast.parse(file.read_text(encoding="utf-8"), str(file))
        for line, name, level in top_level_imports(tree):
            if level:  # relative: a module of the same package
                package = _package_of(root, file)
                name = ".".join(package[:len(package) - level + 1] + ([name] if name else []))
            top = name.split(".")[0]
            if top in optional or (top not in allowed and top not in local
                                   and top not in sys.stdlib_module_names):
                what = "an optional extra" if top in optional else "not a dependency of " \
                    "the core or the test extra"
                found.append(f"{shown}:{line}: imports {top} at module level ({what}); "
                             f"import it inside the test with pytest.importorskip"
                             f"{reached}")
            elif top == "symformer":
                parts = name.split(".")
                for k in range(1, len(parts) + 1):  # the packages on the way, the module
                    target = _module_file(root, ".".join(parts[:k]))
                    if target is not None and target not in seen:
                        queue.append((target, via))
    return found, len(seen)


def test_no_test_module_needs_an_optional_extra_to_be_collected():
    found, read = violations(ROOT)
    assert not found, "\n".join(found)
    assert read > 100  # the tests and the symformer modules they reach


def _project(tmp_path: Path, files: dict[str, str]) -> Path:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\ndependencies = ["numpy>=1", "python-flint"]\n'
        '[project.optional-dependencies]\ntest = ["pytest", "transformers"]\n'
        'torch = ["torch>=2", "transformers"]\n')
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_the_guard_finds_what_breaks_collection(tmp_path):
    """Hand-written modules: each import that would stop collection without torch is
    named with its file and line; the allowed forms are not."""
    root = _project(tmp_path, {
        "tests/test_bad.py": "import os\nimport numpy\nimport torch\n",
        "tests/test_from.py": "from transformers import GPT2Config\n",
        "tests/test_undeclared.py": "import flint\n\nimport regex\n",
        "tests/test_class.py": "class T:\n    import torch.nn as nn\n",
        "tests/test_call.py": "import importlib\nT = importlib.import_module('torch')\n",
        "tests/test_via.py": "from symformer.frameworks import helper\n",
        "tests/test_good.py": (
            "import pytest\n"
            "torch = pytest.importorskip('torch', reason='PyTorch')\n"
            "try:\n    import transformers\nexcept ImportError:\n    transformers = None\n"
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    import torch\n"
            "def test_x():\n    import torch\n"
            "from tests.test_bad import x\nfrom float_ref import y\n"),
        "tests/float_ref.py": "import math\n",
        "symformer/__init__.py": "",
        "symformer/frameworks/__init__.py": "from .helper import f\n",
        "symformer/frameworks/helper.py": "import numpy\n\n\nimport torch\n",
    })
    found, _ = violations(root)
    assert sorted(f.split(" at module level")[0] for f in found) == [
        "symformer/frameworks/helper.py:4: imports torch",
        "tests/test_bad.py:3: imports torch",
        "tests/test_call.py:2: imports torch",
        "tests/test_class.py:2: imports torch",
        "tests/test_from.py:1: imports transformers",
        "tests/test_undeclared.py:3: imports regex",
    ], found
    assert any("(imported at collection by tests/test_via.py)" in f for f in found)
