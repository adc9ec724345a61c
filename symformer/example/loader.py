"""Read an example TOML file into a validated :class:`~symformer.example.schema.Example`.

Every problem is reported as an :class:`~symformer.errors.InputError` whose message
names the file, the key, the layer and head, and the expected and found shapes.
"""

from __future__ import annotations

import re
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

import sympy

from symformer.errors import InputError
from symformer.example.numbers import exact_number, parse_float_text
from symformer.example.schema import (
    ACTIVATIONS,
    LAYER_NORMS,
    NORM_PLACEMENTS,
    POSITIONAL_ENCODINGS,
    Example,
    Head,
    Layer,
)

BUILTIN_NAME = "builtin.toml"

_TOP_KEYS = {
    "title", "tokens", "vocab", "embeddings", "positional_encoding", "causal", "eps",
    "layer", "mask", "layer_norm", "norm", "activation", "decoder", "description",
    "loss",
}
_LAYER_KEYS = {
    "head", "W_O", "W_1", "b_1", "W_2", "b_2", "activation", "norm", "eps", "layer_norm",
    "gamma_1", "beta_1", "gamma_2", "beta_2",
}
_HEAD_KEYS = {"W_Q", "W_K", "W_V"}
#: C0 and C1 controls with DEL, the line and paragraph separators, the bidi overrides.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def builtin_text() -> str:
    """The TOML text of the built-in example (the blog post's sentence and weights)."""
    return resources.files("symformer.example").joinpath(BUILTIN_NAME).read_text("utf-8")


def packaged_examples() -> dict[str, Path]:
    """The example files shipped in ``symformer/examples/``, by name (no ``.toml``)."""
    folder = resources.files("symformer").joinpath("examples")
    return {Path(f.name).stem: Path(str(f)) for f in folder.iterdir()
            if f.name.endswith(".toml") and f.name != "post_claims.toml"}


def load_example(path: str | Path | None = None) -> Example:
    """Load an example file; ``None`` gives the built-in example.

    A bare name of a packaged example (``encoder_decoder``, ``course_module``) that is
    not a file here loads the packaged file, so the examples work from any folder.
    """
    if path is None:
        return parse_example(builtin_text(), source="<built-in>")
    path = Path(path)
    packaged = packaged_examples()
    if not path.exists() and str(path) in packaged:
        path = packaged[str(path)]
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        names = ", ".join(sorted(packaged))
        raise InputError(f"{path}: no such file (packaged examples: {names})") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, expected an example .toml file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read the file ({exc})") from None
    return parse_example(text, source=str(path))


def read_toml(text: str, source: str) -> dict[str, Any]:
    """Parse TOML text, keeping every float as its literal text (no binary doubles)."""
    try:
        return tomllib.loads(text, parse_float=parse_float_text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{source}: invalid TOML: {exc}") from None


def parse_example(text: str, source: str = "<string>") -> Example:
    """Parse and validate the TOML text of an example."""
    return example_from_dict(read_toml(text, source), source)


def example_from_dict(data: dict[str, Any], source: str) -> Example:
    """Validate a parsed TOML table and build the :class:`Example`."""
    here = _Where(source)
    _no_unknown_keys(data, _TOP_KEYS, here)
    _printable_names(data, here)
    vocab, tokens = vocab_and_tokens(data, here)
    embeddings = matrix(data, "embeddings", here, rows=len(vocab))
    d_model = embeddings.cols
    pe = _choice(data, "positional_encoding", POSITIONAL_ENCODINGS, here, "sinusoidal")
    causal = data.get("causal", False)
    if not isinstance(causal, bool):
        raise InputError(f"{here}: causal must be true or false, found {causal!r}")
    defaults = {
        "eps": exact_number(data.get("eps", "1e-6"), f"{here}: eps"),
        "activation": _choice(data, "activation", ACTIVATIONS, here, "relu"),
        "norm": _choice(data, "norm", NORM_PLACEMENTS, here, "post"),
        "layer_norm": _choice(data, "layer_norm", LAYER_NORMS, here, "biased"),
    }
    if defaults["eps"] < 0:
        raise InputError(f"{here}: eps must not be negative, found {defaults['eps']}")
    layers_data = data.get("layer")
    if not isinstance(layers_data, list) or not layers_data:
        raise InputError(f"{here}: expected at least one [[layer]] table")
    layers = tuple(
        _layer(layer, here.sub(f"layer {n}"), d_model, defaults)
        for n, layer in enumerate(layers_data, start=1)
    )
    decoder = None
    if "decoder" in data:
        from symformer.example.decoder import parse_decoder  # it imports this module

        decoder = parse_decoder(data["decoder"], here.sub("decoder"), d_model, defaults, pe)
    loss = None
    if "loss" in data:
        from symformer.example.loss import parse_loss  # it imports this module

        loss = parse_loss(data["loss"], here.sub("loss"), data, len(tokens), d_model, decoder)
    title = data.get("title", "Untitled example")
    if not isinstance(title, str):
        raise InputError(f"{here}: title must be a string, found {title!r}")
    return Example(
        title=title,
        tokens=tuple(tokens),
        vocab=tuple(vocab),
        embeddings=embeddings,
        layers=layers,
        positional_encoding=pe,
        causal=causal,
        mask_value=_mask(data, here),
        source=source,
        decoder=decoder,
        loss=loss,
    )


def vocab_and_tokens(data: dict[str, Any], here: _Where, vocab_name: str = "vocab"
                     ) -> tuple[list[str], list[str]]:
    """Read ``vocab`` (no duplicates) and ``tokens`` (each in the vocabulary)."""
    vocab = _string_list(data, "vocab", here)
    if len(set(vocab)) != len(vocab):
        dup = next(v for v in vocab if vocab.count(v) > 1)
        raise InputError(f"{here}: vocab lists {dup!r} more than once")
    tokens = _string_list(data, "tokens", here)
    for position, token in enumerate(tokens):
        if token not in vocab:
            raise InputError(
                f"{here}: token {token!r} (position {position}) is not in {vocab_name} "
                f"{list(vocab)}"
            )
    return vocab, tokens


class _Where:
    """A location in the input, for error messages: ``file.toml, layer 1, head 2``."""

    def __init__(self, *parts: str) -> None:
        self.parts = parts

    def sub(self, part: str) -> _Where:
        return _Where(*self.parts, part)

    def __str__(self) -> str:
        return ", ".join(self.parts)


def _printable_names(data: dict[str, Any], here: _Where) -> None:
    """Refuse control characters in the title and in every vocab and token name.

    C0 and C1 controls (newline, tab, ESC, DEL, ...), the line and paragraph separators
    and the bidirectional overrides would reach terminals and documents as commands,
    not as text.  Wrongly typed entries are left to the checks that follow.
    """
    tables = [(data, here, ("title", "vocab", "tokens"))]
    if isinstance(data.get("decoder"), dict):
        tables.append((data["decoder"], here.sub("decoder"), ("vocab", "tokens")))
    for table, where, keys in tables:
        for key in keys:
            value = table.get(key)
            entries = enumerate(value) if isinstance(value, list) else [(None, value)]
            for i, name in entries:
                bad = _CONTROL.search(name) if isinstance(name, str) else None
                if bad is not None:
                    entry = key if i is None else f"{key} entry {i}"
                    shown = repr(name if len(name) <= 40 else name[:40] + "...")
                    raise InputError(f"{where}: {entry} {shown} contains the control "
                                     f"character U+{ord(bad[0]):04X}; names must be "
                                     "printable text")


def _no_unknown_keys(table: dict[str, Any], known: set[str], here: _Where) -> None:
    unknown = sorted(set(table) - known)
    if unknown:
        raise InputError(
            f"{here}: unknown key {unknown[0]!r} (known keys: {', '.join(sorted(known))})"
        )


def _string_list(data: dict[str, Any], key: str, here: _Where) -> list[str]:
    value = data.get(key)
    if value is None:
        raise InputError(f"{here}: missing key {key!r}")
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InputError(f"{here}: {key} must be a list of strings")
    if not value:
        raise InputError(f"{here}: {key} is empty; give at least one entry")
    return value


def _choice(data: dict[str, Any], key: str, options: tuple[str, ...], here: _Where,
            default: str) -> str:
    value = data.get(key, default)
    if value not in options:
        raise InputError(
            f"{here}: {key} must be one of {', '.join(map(repr, options))}; found {value!r}"
        )
    return value


def _mask(data: dict[str, Any], here: _Where) -> sympy.Rational | None:
    value = data.get("mask", "-inf")
    if isinstance(value, str) and value.strip() in {"-inf", "-infinity"}:
        return None
    number = exact_number(value, f"{here}: mask")
    if number >= 0:
        raise InputError(f"{here}: mask must be \"-inf\" or a negative number such as -1e9")
    return number


def matrix(table: dict[str, Any], key: str, here: _Where, rows: int | None = None,
           cols: int | None = None, required: bool = True) -> sympy.Matrix | None:
    """Read ``table[key]`` as an exact matrix, checking that it is rectangular.

    ``rows``/``cols`` are the expected shape (None: any); a mismatch names both shapes.
    """
    value = table.get(key)
    if value is None:
        if required:
            raise InputError(f"{here}: missing key {key!r}")
        return None
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
    return sympy.Matrix([
        [exact_number(v, f"{here}: {key}[{i}][{j}]") for j, v in enumerate(row)]
        for i, row in enumerate(value)
    ])


def vector(table: dict[str, Any], key: str, here: _Where, width: int,
           default: int | None = None) -> sympy.Matrix:
    """Read ``table[key]`` as an exact row vector of the given width."""
    value = table.get(key)
    if value is None:
        if default is None:
            raise InputError(f"{here}: missing key {key!r}")
        return sympy.Matrix([[default] * width])
    if not isinstance(value, list) or any(isinstance(v, list) for v in value):
        raise InputError(f"{here}: {key} must be a list of {width} numbers")
    if len(value) != width:
        raise InputError(f"{here}: {key} has {len(value)} entries, expected {width}")
    return sympy.Matrix([[exact_number(v, f"{here}: {key}[{j}]") for j, v in enumerate(value)]])


def _shape_text(n: int | None) -> str:
    return "?" if n is None else str(n)


def _layer(data: Any, here: _Where, d_model: int, defaults: dict[str, Any]) -> Layer:
    if not isinstance(data, dict):
        raise InputError(f"{here}: must be a table")
    _no_unknown_keys(data, _LAYER_KEYS, here)
    heads_data = data.get("head")
    if not isinstance(heads_data, list) or not heads_data:
        raise InputError(f"{here}: expected at least one [[layer.head]] table")
    heads = tuple(_head(h, here.sub(f"head {k}"), d_model) for k, h in enumerate(heads_data, 1))
    width = sum(h.d_v for h in heads)
    W_O = matrix(data, "W_O", here, rows=width, cols=d_model, required=False)
    if W_O is None and width != d_model:
        raise InputError(
            f"{here}: W_O is missing and the heads' value widths add up to {width}, not "
            f"d_model = {d_model}; give W_O ({width}x{d_model})"
        )
    W_1 = matrix(data, "W_1", here, rows=d_model)
    d_ff = W_1.cols
    eps = exact_number(data["eps"], f"{here}: eps") if "eps" in data else defaults["eps"]
    if eps < 0:
        raise InputError(f"{here}: eps must not be negative, found {eps}")
    return Layer(
        heads=heads,
        W_O=W_O,
        W_1=W_1,
        b_1=vector(data, "b_1", here, d_ff),
        W_2=matrix(data, "W_2", here, rows=d_ff, cols=d_model),
        b_2=vector(data, "b_2", here, d_model),
        gamma_1=vector(data, "gamma_1", here, d_model, default=1),
        beta_1=vector(data, "beta_1", here, d_model, default=0),
        gamma_2=vector(data, "gamma_2", here, d_model, default=1),
        beta_2=vector(data, "beta_2", here, d_model, default=0),
        activation=_choice(data, "activation", ACTIVATIONS, here, defaults["activation"]),
        norm=_choice(data, "norm", NORM_PLACEMENTS, here, defaults["norm"]),
        eps=eps,
        layer_norm=_choice(data, "layer_norm", LAYER_NORMS, here, defaults["layer_norm"]),
    )


def _head(data: Any, here: _Where, d_model: int) -> Head:
    if not isinstance(data, dict):
        raise InputError(f"{here}: must be a table")
    _no_unknown_keys(data, _HEAD_KEYS, here)
    W_Q = matrix(data, "W_Q", here, rows=d_model)
    W_K = matrix(data, "W_K", here, rows=d_model, cols=W_Q.cols)
    W_V = matrix(data, "W_V", here, rows=d_model)
    return Head(W_Q=W_Q, W_K=W_K, W_V=W_V)
