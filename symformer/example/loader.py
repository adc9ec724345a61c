"""Read an example TOML file into a validated :class:`~symformer.example.schema.Example`.

Every problem is reported as an :class:`~symformer.errors.InputError` whose message
names the file, the key, the layer and head, and the expected and found shapes.
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

import sympy

from symformer.errors import InputError
from symformer.example.decoder import parse_decoder
from symformer.example.fields import (
    Where,
    choice,
    head,
    matrix,
    no_unknown_keys,
    vector,
    vocab_and_tokens,
)
from symformer.example.numbers import (
    MAX_LITERAL_LENGTH,
    exact_number,
    parse_float_text,
    shorten,
)
from symformer.example.schema import (
    ACTIVATIONS,
    LAYER_NORMS,
    NORM_PLACEMENTS,
    POSITIONAL_ENCODINGS,
    Example,
    Layer,
)

BUILTIN_NAME = "builtin.toml"
#: The largest example or claims file read, in bytes (checked before reading it).
MAX_FILE_BYTES = 8 * 2**20
#: The deepest nesting of arrays and tables accepted in a TOML file.
MAX_NESTING = 32

_TOP_KEYS = {
    "title", "tokens", "vocab", "embeddings", "positional_encoding", "causal", "eps",
    "layer", "mask", "layer_norm", "norm", "activation", "decoder", "description",
}
_LAYER_KEYS = {
    "head", "W_O", "W_1", "b_1", "W_2", "b_2", "activation", "norm", "eps", "layer_norm",
    "gamma_1", "beta_1", "gamma_2", "beta_2",
}
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
    names = ", ".join(sorted(packaged))
    text = read_text_file(path, "an example .toml file", f" (packaged examples: {names})")
    return parse_example(text, source=str(path))


def read_text_file(path: Path, what: str, missing_hint: str = "") -> str:
    """The UTF-8 text of a regular file of at most :data:`MAX_FILE_BYTES` bytes.

    Devices, FIFOs and directories are refused before anything is read (``/dev/zero``
    would never end), and at most one byte more than the limit is ever read.
    """
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as handle:
            mode = os.fstat(handle.fileno()).st_mode
            if stat.S_ISDIR(mode):
                raise InputError(f"{path}: is a directory, expected {what}")
            if not stat.S_ISREG(mode):
                raise InputError(f"{path}: is not a regular file (a device, FIFO or "
                                 f"socket), expected {what}")
            data = handle.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file{missing_hint}") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, expected {what}") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read the file ({exc.strerror or exc})") from None
    if len(data) > MAX_FILE_BYTES:
        raise InputError(f"{path}: the file is larger than the limit of "
                         f"{MAX_FILE_BYTES // 2**20} MiB for {what}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: cannot read the file: not UTF-8 text (byte "
                         f"{exc.start})") from None


def read_toml(text: str, source: str) -> dict[str, Any]:
    """Parse TOML text, keeping every float as its literal text (no binary doubles).

    Integers of more digits than Python converts, and arrays or tables nested more
    than :data:`MAX_NESTING` deep, are refused with a message instead of an error
    from the parser.
    """
    try:
        data = tomllib.loads(text, parse_float=parse_float_text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{source}: invalid TOML: {exc}") from None
    except RecursionError:
        raise InputError(f"{source}: arrays or tables are nested more than {MAX_NESTING} "
                         f"levels deep") from None
    except ValueError:  # int() past sys.get_int_max_str_digits()
        raise InputError(f"{source}: {_long_integer(text)}") from None
    _check_nesting(data, source)
    return data


def _long_integer(text: str) -> str:
    """The message for an integer literal too long to convert, naming its line."""
    for number, line in enumerate(text.splitlines(), start=1):
        for match in re.finditer(rf"[0-9_]{{{MAX_LITERAL_LENGTH},}}", line):
            return (f"line {number}: the integer {shorten(match.group())} is too long "
                    f"(numbers have at most {MAX_LITERAL_LENGTH:,} characters)")
    return f"an integer is too long (numbers have at most {MAX_LITERAL_LENGTH:,} characters)"


def _check_nesting(data: Any, source: str) -> None:
    """Refuse values nested more than MAX_NESTING deep (iteratively: no recursion)."""
    stack = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_NESTING:
            raise InputError(f"{source}: arrays or tables are nested more than "
                             f"{MAX_NESTING} levels deep")
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)


def parse_example(text: str, source: str = "<string>") -> Example:
    """Parse and validate the TOML text of an example."""
    return example_from_dict(read_toml(text, source), source)


def example_from_dict(data: dict[str, Any], source: str) -> Example:
    """Validate a parsed TOML table and build the :class:`Example`."""
    here = Where(source)
    no_unknown_keys(data, _TOP_KEYS, here)
    _printable_names(data, here)
    vocab, tokens = vocab_and_tokens(data, here)
    embeddings = matrix(data, "embeddings", here, rows=len(vocab))
    d_model = embeddings.cols
    pe = choice(data, "positional_encoding", POSITIONAL_ENCODINGS, here, "sinusoidal")
    causal = data.get("causal", False)
    if not isinstance(causal, bool):
        raise InputError(f"{here}: causal must be true or false, found {causal!r}")
    defaults = {
        "eps": exact_number(data.get("eps", "1e-6"), f"{here}: eps"),
        "activation": choice(data, "activation", ACTIVATIONS, here, "relu"),
        "norm": choice(data, "norm", NORM_PLACEMENTS, here, "post"),
        "layer_norm": choice(data, "layer_norm", LAYER_NORMS, here, "biased"),
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
        decoder = parse_decoder(data["decoder"], here.sub("decoder"), d_model, defaults, pe)
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
    )


def _printable_names(data: dict[str, Any], here: Where) -> None:
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


def _mask(data: dict[str, Any], here: Where) -> sympy.Rational | None:
    value = data.get("mask", "-inf")
    if isinstance(value, str) and value.strip() in {"-inf", "-infinity"}:
        return None
    number = exact_number(value, f"{here}: mask")
    if number >= 0:
        raise InputError(f"{here}: mask must be \"-inf\" or a negative number such as -1e9")
    return number


def _layer(data: Any, here: Where, d_model: int, defaults: dict[str, Any]) -> Layer:
    if not isinstance(data, dict):
        raise InputError(f"{here}: must be a table")
    no_unknown_keys(data, _LAYER_KEYS, here)
    heads_data = data.get("head")
    if not isinstance(heads_data, list) or not heads_data:
        raise InputError(f"{here}: expected at least one [[layer.head]] table")
    heads = tuple(head(h, here.sub(f"head {k}"), d_model) for k, h in enumerate(heads_data, 1))
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
        activation=choice(data, "activation", ACTIVATIONS, here, defaults["activation"]),
        norm=choice(data, "norm", NORM_PLACEMENTS, here, defaults["norm"]),
        eps=eps,
        layer_norm=choice(data, "layer_norm", LAYER_NORMS, here, defaults["layer_norm"]),
    )
