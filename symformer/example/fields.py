"""The field readers every table of an example file uses, with located error messages.

``Where`` names a place in the input (``file.toml, layer 1, head 2``); each reader
checks one key of a TOML table (a matrix's shape, a choice among options, the
known keys of a table) and raises :class:`~symformer.errors.InputError` naming
that place.  The loader (encoder side) and the ``[decoder]`` table share them.
"""

from __future__ import annotations

import difflib
from typing import Any

from flint import fmpq

from symformer.errors import InputError
from symformer.example.exact import ExactMatrix
from symformer.example.literals import exact_value
from symformer.example.schema import Head
from symformer.lazy import sympy

#: The keys of a ``[[layer.head]]`` table (and of the decoder's heads).
HEAD_KEYS = {"W_Q", "W_K", "W_V", "b_Q", "b_K", "b_V"}


def vocab_and_tokens(data: dict[str, Any], here: Where, vocab_name: str = "vocab"
                     ) -> tuple[list[str], list[str]]:
    """Read ``vocab`` (no duplicates) and ``tokens`` (each in the vocabulary)."""
    vocab = string_list(data, "vocab", here)
    if len(set(vocab)) != len(vocab):
        dup = next(v for v in vocab if vocab.count(v) > 1)
        raise InputError(f"{here}: vocab lists {dup!r} more than once")
    tokens = string_list(data, "tokens", here)
    for position, token in enumerate(tokens):
        if token not in vocab:
            raise InputError(
                f"{here}: token {token!r} (position {position}) is not in {vocab_name} "
                f"{list(vocab)}"
            )
    return vocab, tokens


class Where:
    """A location in the input, for error messages: ``file.toml, layer 1, head 2``."""

    def __init__(self, *parts: str) -> None:
        self.parts = parts

    def sub(self, part: str) -> Where:
        """The place ``part`` inside this one."""
        return Where(*self.parts, part)

    def __str__(self) -> str:
        return ", ".join(self.parts)


def no_unknown_keys(table: dict[str, Any], known: set[str], here: Where) -> None:
    """Refuse a key of ``table`` that is not in ``known``, suggesting the closest one
    (``causual`` -> ``causal``), else naming the known ones."""
    unknown = sorted(set(table) - known)
    if unknown:
        same_case = [k for k in sorted(known) if k.lower() == unknown[0].lower()]
        close = same_case or difflib.get_close_matches(unknown[0], sorted(known), n=1,
                                                       cutoff=0.6)
        hint = (f"did you mean {close[0]!r}?" if close
                else f"known keys: {', '.join(sorted(known))}")
        raise InputError(f"{here}: unknown key {unknown[0]!r} ({hint})")


def string_list(data: dict[str, Any], key: str, here: Where) -> list[str]:
    """``data[key]``: a non-empty list of strings."""
    value = data.get(key)
    if value is None:
        raise InputError(f"{here}: missing key {key!r}")
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InputError(f"{here}: {key} must be a list of strings")
    if not value:
        raise InputError(f"{here}: {key} is empty; give at least one entry")
    return value


def choice(data: dict[str, Any], key: str, options: tuple[str, ...], here: Where,
           default: str) -> str:
    """``data[key]`` (``default`` when absent), which must be one of ``options``."""
    value = data.get(key, default)
    if value not in options:
        raise InputError(
            f"{here}: {key} must be one of {', '.join(map(repr, options))}; found {value!r}"
        )
    return value


def matrix(table: dict[str, Any], key: str, here: Where, rows: int | None = None,
           cols: int | None = None, required: bool = True) -> sympy.Matrix | None:
    """Read ``table[key]`` as an exact matrix, checking that it is rectangular.

    ``rows``/``cols`` are the expected shape (None: any); a mismatch names both shapes.
    """
    value = table.get(key)
    if value is None:
        if required:
            raise InputError(f"{here}: missing key {key!r}")
        return None
    if isinstance(value, ExactMatrix):  # weights read from a file (weights_file.py)
        return _given(value, key, here, rows, cols, vector=False)
    if not isinstance(value, list) or not value or not all(isinstance(r, list) for r in value):
        raise InputError(f"{here}: {key} must be a non-empty list of rows (a matrix)")
    widths = {len(r) for r in value}
    if len(widths) != 1:
        bad = next(i for i, r in enumerate(value) if len(r) != len(value[0]))
        raise InputError(
            f"{here}: {key} is ragged: row 0 has {len(value[0])} entries but row {bad} "
            f"has {len(value[bad])}"
        )
    found = (len(value), len(value[0]))
    if found[1] == 0:
        raise InputError(f"{here}: {key} has empty rows")
    expected = (rows if rows is not None else found[0], cols if cols is not None else found[1])
    if found != expected:
        raise InputError(
            f"{here}: {key} has shape {found[0]}x{found[1]}, expected "
            f"{_shape_text(rows)}x{_shape_text(cols)}"
        )
    return ExactMatrix([
        [exact_value(v, f"{here}: {key}[{i}][{j}]") for j, v in enumerate(row)]
        for i, row in enumerate(value)
    ])


def vector(table: dict[str, Any], key: str, here: Where, width: int,
           default: int | None = None) -> sympy.Matrix:
    """Read ``table[key]`` as an exact row vector of the given width."""
    value = table.get(key)
    if value is None:
        if default is None:
            raise InputError(f"{here}: missing key {key!r}")
        return ExactMatrix([[fmpq(default)] * width])
    if isinstance(value, ExactMatrix):  # weights read from a file (weights_file.py)
        return _given(value, key, here, 1, width, vector=True)
    if not isinstance(value, list) or any(isinstance(v, list) for v in value):
        raise InputError(f"{here}: {key} must be a list of {width} numbers")
    if len(value) != width:
        raise InputError(f"{here}: {key} has {len(value)} entries, expected {width}")
    return ExactMatrix([[exact_value(v, f"{here}: {key}[{j}]")
                         for j, v in enumerate(value)]])


def _given(value: ExactMatrix, key: str, here: Where, rows: int | None, cols: int | None,
           vector: bool) -> ExactMatrix:
    """A matrix (or vector) given already built, from a weights file: its shape checked
    as a written one's."""
    if getattr(value, "vector", not vector) != vector:
        found = "a vector" if not vector else "a matrix"
        raise InputError(f"{here}: {key} must be {'a vector' if vector else 'a matrix'}, "
                         f"found {found} of shape {value.rows}x{value.cols}")
    if vector and value.cols != cols:
        raise InputError(f"{here}: {key} has {value.cols} entries, expected {cols}")
    if not value.rows or not value.cols:
        raise InputError(f"{here}: {key} has no entries")
    if not vector and (rows not in (None, value.rows) or cols not in (None, value.cols)):
        raise InputError(f"{here}: {key} has shape {value.rows}x{value.cols}, expected "
                         f"{_shape_text(rows)}x{_shape_text(cols)}")
    return value


def _shape_text(n: int | None) -> str:
    return "?" if n is None else str(n)


def head(data: Any, here: Where, d_model: int, d_memory: int | None = None) -> Head:
    """One attention head's table: ``W_Q``, ``W_K`` (same width), ``W_V`` and their
    optional biases ``b_Q``, ``b_K``, ``b_V``; ``d_memory``: the rows of ``W_K`` and
    ``W_V`` when keys and values read another width (cross-attention's memory)."""
    if not isinstance(data, dict):
        raise InputError(f"{here}: must be a table")
    no_unknown_keys(data, HEAD_KEYS, here)
    d_kv = d_model if d_memory is None else d_memory
    W_Q = matrix(data, "W_Q", here, rows=d_model)
    W_K = matrix(data, "W_K", here, rows=d_kv, cols=W_Q.cols)
    W_V = matrix(data, "W_V", here, rows=d_kv)
    return Head(W_Q=W_Q, W_K=W_K, W_V=W_V, b_Q=optional_vector(data, "b_Q", here, W_Q.cols),
                b_K=optional_vector(data, "b_K", here, W_K.cols),
                b_V=optional_vector(data, "b_V", here, W_V.cols))


def sub_table(data: dict[str, Any], key: str, here: Where, known: set[str]
              ) -> tuple[dict[str, Any], Where] | None:
    """The table ``data[key]`` (its keys among ``known``) and its place, or None when
    absent."""
    if key not in data:
        return None
    table, where = data[key], here.sub(key)
    if not isinstance(table, dict):
        raise InputError(f"{where}: must be a table")
    no_unknown_keys(table, known, where)
    return table, where


def optional_vector(data: dict[str, Any], key: str, here: Where, width: int
                    ) -> sympy.Matrix | None:
    """``data[key]`` as a row vector of ``width`` exact numbers, or None when absent."""
    return vector(data, key, here, width) if key in data else None
