"""No dead code in symformer/: vulture finds no unused name but the reviewed few.

vulture reads the package's source (importing none of it) and reports every function,
class, method, attribute and variable nothing in the package uses.  The names it
cannot see used -- protocol methods such as ``_repr_html_``, latexify-py's hooks,
dataclass fields read through ``getattr``, the few public names only tests,
benchmarks and docs read -- are in ``tests/vulture_allowlist.py``, each with its
reader.  Functions registered with ``@singledispatch``'s ``.register`` are used by
their dispatcher.  The test fails naming each new unused name (delete it, or, when
something reads it that vulture cannot see, add it to the allowlist saying who), and
on an allowlist entry vulture no longer reports (delete the entry).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ALLOWLIST = Path(__file__).with_name("vulture_allowlist.py")
#: Decorators whose functions are called by what they register with.
IGNORE_DECORATORS = ["@*.register"]


def _entry(node: ast.stmt) -> str | None:
    """The name an allowlist statement uses: ``_.name`` or a bare ``name``."""
    value = node.value if isinstance(node, ast.Expr) else None
    if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) \
            and value.value.id == "_":
        return value.attr
    return value.id if isinstance(value, ast.Name) else None


def _statements() -> list[ast.stmt]:
    """The allowlist's statements after its docstring."""
    return ast.parse(ALLOWLIST.read_text(encoding="utf-8")).body[1:]


def allowed_names() -> set[str]:
    """The names the allowlist uses."""
    return {name for node in _statements() if (name := _entry(node)) is not None}


def test_every_allowlist_statement_is_an_entry():
    """Nothing in the allowlist is code the test would not read as an entry."""
    odd = [ast.unparse(node) for node in _statements() if _entry(node) is None]
    assert odd == []
    assert {"_repr_html_", "binary", "filename"} <= allowed_names()


def test_no_unused_name_in_the_package():
    vulture = pytest.importorskip("vulture", reason="vulture is in the test extra")
    scanner = vulture.Vulture(ignore_decorators=IGNORE_DECORATORS)
    scanner.scavenge([str(ROOT / "symformer")])
    unused = scanner.get_unused_code(min_confidence=0)
    allowed = allowed_names()
    new = sorted(f"{Path(item.filename).relative_to(ROOT)}:{item.first_lineno}: "
                 f"{item.message}" for item in unused if item.name not in allowed)
    assert not new, "unused code (delete it, or allowlist it in tests/vulture_allowlist.py " \
                    "saying who reads it):\n" + "\n".join(new)
    stale = sorted(allowed - {item.name for item in unused})
    assert not stale, f"allowlist entries vulture no longer reports (delete them): {stale}"
