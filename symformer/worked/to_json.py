"""Worked lines in machine-readable form: ``worked.json`` of ``export --format json``.

Each item is one printed rounding: ``expression`` is the right-hand side a reader
sees, as plain arithmetic over the printed literals (``+ - * / **``, parentheses,
``exp sqrt max erf tanh sin cos log``), and ``result`` the printed result.  Evaluated
exactly and rounded correctly to the digits ``result`` shows, ``expression``
gives ``result``.  ``operands`` says where each printed number comes from;
``exact`` (only when it differs) is the entry's correctly rounded exact value.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from symformer.worked.model import PI, Const, Item, Node, Num, Pow, Sym, children
from symformer.worked.render_text import TextPrinter, constant_text, text


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


def operands(node: Node) -> list[dict]:
    """Every number printed in an expression, in reading order, with where it comes
    from: ``{"value": "1.66", "stage": ..., "row": 1, "col": 0}`` for an entry of an
    earlier stage, ``{"value": "0.25", "parameter": "W_Q", "index": [0, 0]}`` for a
    weight or a named constant, ``{"value": "5.26", "worked": "exp(s_0)"}`` for a result
    printed earlier in the same block; ``{"value": "2"}`` for a number of the formula."""
    if isinstance(node, (Num, Const)):
        shown = node.text if isinstance(node, Num) else constant_text(node.value)
        out: dict = {"value": shown}
        where = node.source
        if where is not None and where.kind == "stage":
            out.update(stage=where.name, row=int(where.index[0]), col=int(where.index[1]))
        elif where is not None and where.kind == "parameter":
            out.update(parameter=where.name, index=[int(k) for k in where.index])
        elif where is not None:
            out["worked"] = where.name
        return [out]
    if isinstance(node, Pow) and isinstance(node.exp, Const) and node.exp.value.q != 1:
        return [*operands(node.base), {"value": f"{node.exp.value.p}/{node.exp.value.q}"}]
    return [o for child in children(node) for o in operands(child)]


def item_dict(item: Item) -> dict:
    """One item as the JSON object of ``worked.json``: ``exact`` is the entry's table
    value when the printed operands give another result (else absent)."""
    out = {"stage": item.stage, "row": item.row, "col": item.col,
           "symbol": text(item.symbol), "expression": plain(item.expression),
           "result": item.result.text, "operands": operands(item.expression)}
    if item.exact is not None:
        out["exact"] = item.exact.text
    return out


def worked_json(title: str, items: Iterable[Item]) -> str:
    """The ``worked.json`` document: ``{"title": ..., "worked": [...]}``."""
    data = {"title": title, "worked": [item_dict(i) for i in items]}
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"
