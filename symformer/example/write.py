"""An example file with some weights replaced: what ``train --write`` saves.

The example's own TOML text is read again (:func:`~symformer.example.loader.read_toml`,
every decimal kept as its literal text), the trained weights are put in (rationals as
``"p/q"`` strings, integers as integers) and the whole is written back as TOML.
Comments are not kept.  Weights are found by their names: ``layer1.head2.W_Q`` is
``[[layer]]`` 1's ``[[layer.head]]`` 2's ``W_Q``, ``layer1.add_norm2.gamma`` its
``gamma_2`` (``gamma`` alone: the final norm's ``gamma_f``), ``W_vocab`` is
``[lm_head]``'s (or ``[decoder]``'s), ``embedding_table`` the ``embeddings``,
``positional_embeddings`` the learned table, ``token_type_table`` the
``token_type_embeddings`` (``embedding_norm.gamma`` is ``[embedding_norm]``'s
``gamma``); a decoder's
``decoder.layer1.self.head2.W_Q`` is ``[[decoder.layer]]`` 1's
``[[decoder.layer.self_head]]`` 2's ``W_Q`` and ``decoder.layer1.cross.W_O`` its
``W_O_cross``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from symformer.errors import NotSupportedError
from symformer.example.literals import DecimalText
from symformer.example.loader import builtin_text, read_text_file, read_toml
from symformer.example.schema import Example
from symformer.lazy import sympy

_INDEXED = re.compile(r"([A-Za-z_]+?)(\d+)")
_NORM = re.compile(r"(?:add_)?norm(\d)|final_norm")
_BARE = re.compile(r"[A-Za-z0-9_-]+")


def updated_example(example: Example, weights: dict[str, sympy.Matrix | list[list[str]]],
                    note: str | None = None) -> str:
    """The example's TOML text with each named weight (``layer1.W_1``) replaced: exact
    rationals, or rows of decimal text written as they are (rounded weights); ``note``
    becomes comment lines at the top (what the numbers are)."""
    if example.source == "<built-in>":
        text = builtin_text()
    else:
        text = read_text_file(Path(example.source), "an example .toml file")
    data = read_toml(text, example.source)
    keyed = isinstance(data.get("embeddings"), dict)  # a table keyed by word
    for name, value in weights.items():
        if name == "theta" and isinstance(data.get("objective"), dict):
            _objective_start(data["objective"], value)  # the lesson's parameters, by name
            continue
        table, key = _place(data, name)
        vector = key.startswith(("b_", "gamma", "beta"))
        if isinstance(value, list):  # decimal text, kept as written
            rows = [[DecimalText(v) for v in row] for row in value]
            table[key] = rows[0] if vector and len(rows) == 1 else rows
        else:
            table[key] = _numbers(value, vector=vector)
        if key == "embeddings" and keyed and table is data:  # the rows under their words
            table[key] = dict(zip(example.table_vocab, table[key]))
    head = "".join(f"# {line}\n" for line in note.splitlines()) + "\n" if note else ""
    return head + dump(data)


def _objective_start(table: dict[str, Any], value: sympy.Matrix | list[list[str]]) -> None:
    """An optimiser lesson's trained row θ: each parameter's starting value, by name."""
    names = [k for k in table if k not in ("f", "gradients")]
    row = [DecimalText(v) for v in value[0]] if isinstance(value, list) else [
        _number(v) for v in value.row(0)]
    for name, v in zip(names, row):
        table[name] = v


def _place(data: dict[str, Any], name: str) -> tuple[dict[str, Any], str]:
    """The table holding weight ``name``, and its key there."""
    *path, key = name.split(".")
    norm = _NORM.fullmatch(path[-1]) if path and key in ("gamma", "beta") else None
    if norm:  # layer1.add_norm2.gamma is [[layer]] 1's gamma_2; final_norm's gamma_f
        path, key = path[:-1], f"{key}_{norm[1] or 'f'}"
    elif not path and key in ("gamma", "beta"):  # the final norm's (stage final_norm)
        key = f"{key}_f"
    if key == "embedding_table":
        key = "embeddings"
    elif key == "token_type_table":  # BERT's token types (example/bert_extras.py)
        key = "token_type_embeddings"
    if path and path[-1] in ("self", "cross"):  # decoder.layer1.self.W_O: W_O_self
        path, key = path[:-1], f"{key}_{path[-1]}"
    elif len(path) > 1 and path[-2] in ("self", "cross"):  # ...self.head2: self_head2
        path = [*path[:-2], f"{path[-2]}_{path[-1]}"]
    if not path and key in ("W_vocab", "b_vocab"):
        if key == "W_vocab" and data.get("lm_head", {}).get("tied"):
            raise NotSupportedError("--write: the language-model head is tied to the "
                                    "embeddings (tied = true); the trained W_vocab is not")
        path = ["lm_head"] if "lm_head" in data else ["decoder"]
    node: Any = data
    for part in path:
        match = _INDEXED.fullmatch(part)
        try:
            node = node[match[1]][int(match[2]) - 1] if match else node[part]
        except (KeyError, IndexError, TypeError):
            raise NotSupportedError(f"--write: cannot place the weight {name} in the "
                                    f"example file (no such table)") from None
    if not isinstance(node, dict):
        raise NotSupportedError(f"--write: cannot place the weight {name} in the example file")
    return node, key


def _numbers(value: sympy.Matrix, vector: bool) -> list[Any]:
    rows = [[_number(v) for v in value.row(i)] for i in range(value.rows)]
    return rows[0] if vector and value.rows == 1 else rows


def _number(v: sympy.Expr) -> int | str:
    v = sympy.Rational(v)
    return int(v) if v.q == 1 else f"{v.p}/{v.q}"


class InlineTable(dict):
    """A table :func:`dump` writes inline (``{ tensor = "...", columns = [0, 64] }``)."""


def dump(data: dict[str, Any], prefix: tuple[str, ...] = ()) -> str:
    """``data`` (as :func:`read_toml` returns it) as TOML text."""
    lines, tables = [], []
    for key, value in data.items():
        if isinstance(value, dict) and not isinstance(value, InlineTable):
            tables.append((key, [value], False))
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            tables.append((key, value, True))
        else:
            lines.append(f"{_key(key)} = {_value(value)}")
    text = "\n".join(lines) + ("\n" if lines else "")
    for key, items, array in tables:
        path = ".".join(_key(k) for k in (*prefix, key))
        for item in items:
            header = f"[[{path}]]" if array else f"[{path}]"
            text += f"\n{header}\n" + dump(item, (*prefix, key))
    return text


def _key(key: str) -> str:
    return key if _BARE.fullmatch(key) else json.dumps(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, DecimalText):
        return str(value)  # a decimal's own literal text
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        if value and all(isinstance(v, list) for v in value):
            return "[\n" + "".join(f"  {_value(v)},\n" for v in value) + "]"
        return "[" + ", ".join(_value(v) for v in value) + "]"
    return json.dumps(str(value))
