"""Worked lines in machine-readable form: ``worked.json`` of ``export --format json``.

Each item is one printed rounding: ``expression`` is the right-hand side a reader
sees, as plain arithmetic over the printed literals (``+ - * / **``, parentheses,
``exp sqrt max erf tanh sin cos log``), and ``result`` the printed result.  Evaluated
exactly and rounded correctly to the digits ``result`` shows, ``expression``
gives ``result``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from symformer.worked.model import PI, Item, Node, Sym
from symformer.worked.render_text import TextPrinter, text


class PlainPrinter(TextPrinter):
    """ASCII arithmetic a program can evaluate: ``*`` and ``**``, no symbols."""

    times = "*"
    power = "**"

    def symbol(self, node: Sym) -> str:
        if node == PI:
            return "pi"
        raise TypeError(f"a machine-readable expression has no symbol ({node.text})")


_PLAIN = PlainPrinter()


def plain(node: Node) -> str:
    """A tree as plain arithmetic over its printed literals."""
    return _PLAIN.print(node)


def item_dict(item: Item) -> dict:
    """One item as the JSON object of ``worked.json``."""
    return {"stage": item.stage, "row": item.row, "col": item.col,
            "symbol": text(item.symbol), "expression": plain(item.expression),
            "result": item.result.text}


def worked_json(title: str, items: Iterable[Item]) -> str:
    """The ``worked.json`` document: ``{"title": ..., "worked": [...]}``."""
    data = {"title": title, "worked": [item_dict(i) for i in items]}
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"
