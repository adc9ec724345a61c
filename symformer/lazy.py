"""SymPy, imported on first use.

Importing SymPy takes about a quarter of a second, most of a short command's run, and
evaluation does not need it: the balls, the rounding and the tables are python-flint and
integers.  Only closed forms, proofs, local formulas and exact forward passes are SymPy.
So every module of symformer writes ``from symformer.lazy import sympy`` instead of
``import sympy``: the name is bound at once, and SymPy itself is imported the first time
one of its attributes is read (``sympy.Matrix``), then each attribute is kept here, so a
later read costs what a module attribute costs.

Nothing at a module's top level may read an attribute of ``sympy`` (a constant is
built in a function, cached); ``tests/test_imports.py`` checks that ``symformer derive``
runs without importing SymPy.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any


class LazyModule(types.ModuleType):
    """A module imported on first attribute access (then each attribute kept)."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)  # copy, pickle, inspect probe these: no import
        value = getattr(importlib.import_module(self.__name__), name)
        setattr(self, name, value)
        return value

    def __repr__(self) -> str:
        state = "imported" if self.__name__ in sys.modules else "not imported yet"
        return f"<lazy module {self.__name__!r} ({state})>"


if TYPE_CHECKING:
    import sympy
else:
    sympy = LazyModule("sympy")

