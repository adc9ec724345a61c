"""Weights an example reads from a safetensors file instead of holding them as numbers.

An imported model too large to write out (``symformer import --weights reference``)
names its weights file once, with the file's SHA-256, and each matrix or vector names
its tensor there and the part of it the example uses::

    [weights]
    file = "gpt2/model.safetensors"      # relative to the example file's folder
    sha256 = "9f86d08..."

    [[layer.head]]
    W_Q = { tensor = "transformer.h.0.attn.c_attn.weight", columns = [0, 64] }
    b_Q = { tensor = "transformer.h.0.attn.c_attn.bias", columns = [0, 64] }
    # transpose = true: the tensor's transpose (nn.Linear stores W^T); rows = [a, b]

The file is untrusted input, and so is the example naming it.  ``file`` is a path
relative to the example file's folder, without ``..``: an absolute path is refused
before anything is opened, and the file is then read as a model directory's is
(:mod:`symformer.example.model_dir`): a regular file, no folder on the way and no link
leading out of the example's folder (the Hugging Face cache's ``snapshots/REV/FILE ->
../../blobs/SHA`` excepted), its header checked whole, only floating-point tensors
read, each exactly.  It is content-addressed: its size is checked before a byte is
read, and nothing of it is used or said before its SHA-256 is the recorded one; a file
that is missing, not a regular file there, or not the recorded one is refused with one
message worded the same in every case (naming ``file`` escaped, never the file's bytes
or hash), so an example can read only a file whose exact content its author has, and
learns nothing of any other.  The hash, the header and the tensors the example names
come from one pass over one open descriptor
(:class:`~symformer.example.model_dir.SafeTensors`): the bytes used are the bytes
hashed, whatever renames or writes the file meanwhile.
Each reference becomes a :class:`~symformer.example.dyadic.DyadicMatrix` (the floats
themselves, made rational only when evaluated) before the example's tables are read, so
every other check (the shapes, the keys) is the one a written matrix gets.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Any

from symformer.errors import InputError
from symformer.example.fields import Where, no_unknown_keys
from symformer.example.literals import shorten

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
    from symformer.example.model_dir import NotRecorded, SafeTensors

    shown = repr(shorten(file, 40))[1:-1]  # a newline or an escape never printed raw
    if not relative_inside(file):
        raise InputError(f"{where}: file = \"{shown}\" must name a file by its path "
                         f"relative to the example's folder, without '..' (an example "
                         f"reads a weights file only in its own folder or below)")
    base = _folder(source)
    try:
        real = _located(base, file)
        weights = SafeTensors(real, shown, sha256=digest, keep=_named(data))
    except NotRecorded:  # one message whatever is (or is not) there: no oracle
        raise InputError(f"{where}: file = \"{shown}\": no weights file with the recorded "
                         f"SHA-256 there (missing, not a regular file inside the example's "
                         f"folder, or changed since the example was written); import the "
                         f"model again") from None
    with weights:  # content-addressed: the bytes hashed are the bytes parsed and read
        rest = {k: v for k, v in data.items() if k != "weights"}
        return _replace(rest, here, weights, {})


def relative_inside(file: str) -> bool:
    """True when ``file`` is a relative path without ``..`` (nor a backslash, which
    another system reads as a separator)."""
    path = PurePosixPath(file)
    return bool(path.parts) and not path.is_absolute() and ".." not in path.parts \
        and "\\" not in file


def _folder(source: str) -> Path:
    """The real folder an example's weights file is read below: the example file's
    (the current folder for an example given as text)."""
    if source in ("<string>", "<built-in>"):
        return Path.cwd().resolve()
    return Path(source).parent.resolve()


def _located(base: Path, file: str) -> Path:
    """The real path of the weights file ``file`` below the real folder ``base``, by
    the model-directory rules (a regular file; a link only inside its folder, or the
    Hugging Face cache's to its blobs; no folder on the way a link out of ``base``);
    :class:`NotRecorded` for anything else."""
    from symformer.example.model_dir import ModelDir, NotRecorded

    path = base / PurePosixPath(file)
    try:
        folder = ModelDir(path.parent)
        real = folder.path(path.name) if folder.root.is_relative_to(base) else None
    except (InputError, OSError):
        real = None
    if real is None:
        raise NotRecorded(file)
    return real


def _named(value: Any) -> set[str]:
    """The tensor names the reference tables in ``value`` give (read in the same pass
    over the file that hashes it)."""
    names, stack = set(), [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if isinstance(item.get("tensor"), str):
                names.add(item["tensor"])
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return names


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
