"""Weights an example reads from a safetensors file instead of holding them as numbers.

An imported model too large to write out (``symformer import --weights reference``)
names its weights file once, with the file's SHA-256, and each matrix or vector names
its tensor there and the part of it the example uses::

    [weights]
    file = "gpt2/model.safetensors"      # relative to the example file, or absolute
    sha256 = "9f86d08..."

    [[layer.head]]
    W_Q = { tensor = "transformer.h.0.attn.c_attn.weight", columns = [0, 64] }
    b_Q = { tensor = "transformer.h.0.attn.c_attn.bias", columns = [0, 64] }
    # transpose = true: the tensor's transpose (nn.Linear stores W^T); rows = [a, b]

The file is untrusted input, read as a model directory is
(:mod:`symformer.example.model_dir`): no link out of its folder, a regular file, its
header checked whole, only floating-point tensors read, each exactly.  It is
content-addressed: its SHA-256 is computed before anything of it is parsed, and a file
whose SHA-256 is not the recorded one is refused in one line naming it (never its bytes
or its hash), so an example can name only a file whose exact content its author has.
Each reference becomes a :class:`~symformer.example.dyadic.DyadicMatrix` (the floats
themselves, made rational only when evaluated) before the example's tables are read, so
every other check (the shapes, the keys) is the one a written matrix gets.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from symformer.errors import InputError
from symformer.example.fields import Where, no_unknown_keys

#: The keys of a reference to a tensor.
REFERENCE_KEYS = {"tensor", "transpose", "rows", "columns"}
_SHA256 = re.compile(r"[0-9a-f]{64}")


def read_weights(data: dict[str, Any], here: Where, source: str) -> dict[str, Any]:
    """``data`` with ``[weights]`` removed and every reference table (``{ tensor = ...
    }``) replaced by the weights it names, read from the file (``source``: the example
    file's path, which a relative ``file`` is relative to)."""
    table, where = data["weights"], here.sub("weights")
    if not isinstance(table, dict):
        raise InputError(f"{where}: must be a table with file and sha256")
    no_unknown_keys(table, {"file", "sha256"}, where)
    file, digest = table.get("file"), table.get("sha256")
    if not isinstance(file, str) or not file or "\x00" in file:
        raise InputError(f"{where}: file must be the path of a .safetensors file")
    if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
        raise InputError(f"{where}: sha256 must be 64 lower-case hexadecimal digits")
    path = Path(file)
    if not path.is_absolute() and source not in ("<string>", "<built-in>"):
        path = Path(source).parent / path
    from symformer.example.model_dir import ModelDir, SafeTensors, file_sha256

    folder = ModelDir(path.parent)  # the directory rules: a regular file, no link out
    real = folder.path(path.name)
    if real is None:
        raise InputError(f"{where}: no weights file {folder.name(path.name)}")
    # content-addressed: nothing of the file is parsed (or shown) before its SHA-256 is
    # the recorded one, so an example reads only a file whose bytes its author has
    if file_sha256(real, folder.name(path.name)) != digest:
        raise InputError(f"{folder.name(path.name)}: not the weights file the example "
                         f"records (its SHA-256 differs: the file has changed since the "
                         f"example was written, or it is another file); import the "
                         f"model again")
    weights = SafeTensors(real, folder.name(path.name))
    tensors: dict[str, Any] = {}
    rest = {k: v for k, v in data.items() if k != "weights"}
    return _replace(rest, here, weights, tensors)


def _replace(value: Any, here: Where, weights: Any, tensors: dict[str, Any]) -> Any:
    """``value`` with its reference tables read (tables and lists walked)."""
    if isinstance(value, dict):
        if "tensor" in value:
            return _tensor(value, here, weights, tensors)
        return {k: _replace(v, here.sub(k) if isinstance(v, (dict, list)) else here,
                            weights, tensors) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace(v, here, weights, tensors) for v in value]
    return value


def _span(ref: dict[str, Any], key: str, size: int, where: str) -> slice:
    value = ref.get(key)
    if value is None:
        return slice(0, size)
    if not (isinstance(value, list) and len(value) == 2 and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value)
            and 0 <= value[0] < value[1] <= size):
        raise InputError(f"{where}: {key} must be [start, end] with 0 <= start < end <= "
                         f"{size}, found {str(value)[:40]}")
    return slice(*value)


def _tensor(ref: dict[str, Any], here: Where, weights: Any, tensors: dict[str, Any]) -> Any:
    """The weights one reference table names, as a DyadicMatrix."""
    from symformer.example.dyadic import DyadicMatrix

    where = str(here)
    no_unknown_keys(ref, REFERENCE_KEYS, here)
    name = ref["tensor"]
    if not isinstance(name, str) or name not in weights:
        shown = name[:80] if isinstance(name, str) else name
        raise InputError(f"{where}: the weights file {weights.name} has no tensor "
                         f"{shown!r}")
    array = tensors.get(name)
    if array is None:
        array = tensors[name] = weights[name]
    transpose = ref.get("transpose", False)
    if not isinstance(transpose, bool):
        raise InputError(f"{where}: transpose must be true or false")
    if array.ndim == 1:
        if transpose or "rows" in ref:
            raise InputError(f"{where}: the tensor {name!r} is a vector; it has no rows "
                             f"to take or transpose")
        view = array[_span(ref, "columns", array.shape[0], where)]
    elif array.ndim == 2:
        if transpose:
            array = array.T
        view = array[_span(ref, "rows", array.shape[0], where),
                     _span(ref, "columns", array.shape[1], where)]
    else:
        raise InputError(f"{where}: the tensor {name!r} has shape "
                         f"{'x'.join(map(str, array.shape))}; a weight is a matrix or a "
                         f"vector")
    return DyadicMatrix(view, f"{where} ({name})", dict(ref))
