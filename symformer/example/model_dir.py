"""A model directory from someone else: its files, read without trusting any of them.

A Hugging Face directory is untrusted input, like an example file or a template:

* **Nothing outside it is read.**  A file may be a symbolic link only when it resolves
  inside the directory, or, in the Hugging Face cache's own layout
  (``models--ORG--NAME/snapshots/REV/config.json -> ../../blobs/SHA``), inside that
  model's ``blobs`` folder; any other link (``vocab.txt -> /etc/passwd``), a broken or
  looping link, a device, FIFO or socket is refused with one line naming the file.
* **Every file is bounded** (:data:`MAX_TEXT_BYTES` for JSON and vocabularies,
  :data:`MAX_WEIGHT_BYTES` for the weights) and a JSON file must be one object with no
  repeated key and no ``NaN``/``Infinity``.
* **The safetensors header is checked whole before a byte of data is read**
  (:class:`SafeTensors`): a table of tensors, each with a known dtype, a shape of
  whole numbers and two whole ``data_offsets`` that index the data buffer exactly (in
  bounds, of the shape's size, no overlap, no hole), as the format requires.  Tensors
  are then read one by one, only those the import uses; the names it never asked for
  are what :meth:`SafeTensors.unused` reports.
* **What is hashed is what is read.**  The file is opened once and its size checked
  before a byte is read.  When an example records its SHA-256, one pass over that
  descriptor hashes it and keeps the header and the tensors the example names: the
  bytes used are the bytes hashed.  Every read also compares the file's identity, size
  and times with those it was opened with: a file renamed over it or written in place
  meanwhile is refused (``the file changed while it was read``).

No pickle is ever unpickled (``pytorch_model.bin`` is never opened).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from symformer.errors import InputError, NotSupportedError
from symformer.example.literals import DecimalText

#: The largest configuration read, in bytes (the example files' limit).
MAX_TEXT_BYTES = 8 * 2**20
#: The largest vocabulary or tokenizer file read (Llama 3's tokenizer.json is 9 MB,
#: Gemma's 17 MB), in bytes.
MAX_VOCAB_BYTES = 64 * 2**20
#: The largest ``model.safetensors`` read, in bytes (GPT-2 small's float32 file is
#: 548 MB; a tensor is read only when used, and held as the floats it is).
MAX_WEIGHT_BYTES = 2 * 2**30
#: The largest safetensors header, in bytes (the safetensors library's own limit).
MAX_HEADER_BYTES = 100_000_000
#: JSON nested deeper than this is refused (a configuration is a few levels deep).
MAX_JSON_DEPTH = 32
#: The most tensors a weights file may list (GPT-2 small has 148, a 70-billion
#: parameter Llama 723).
MAX_TENSORS = 100_000

#: Every dtype of the safetensors format, and its item size in bytes.  Floating-point
#: tensors are weights; the others (integer buffers such as BERT's ``position_ids``)
#: can only be reported as not imported.
ITEM_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2,
              "I8": 1, "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1,
              "F8_E4M3": 1, "F8_E5M2": 1}
#: The floating-point dtypes read exactly, as NumPy dtypes (BF16 is widened by hand).
FLOAT_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2"}


class ModelDir:
    """The files of one model directory, each resolved and checked before it is read."""

    def __init__(self, directory: str | Path) -> None:
        self.given = Path(directory)
        try:
            root = self.given.resolve(strict=True)
        except (OSError, RuntimeError):
            raise InputError(f"{directory}: no such directory") from None
        if not root.is_dir():
            raise InputError(f"{directory}: not a directory (expected a Hugging Face model "
                             f"directory)")
        self.root = root
        #: Where a file's link may lead: the directory, and in the Hugging Face cache
        #: (snapshots/REV/FILE -> ../../blobs/SHA) the same model's blobs.
        self.allowed = [root]
        blobs = root.parent.parent / "blobs"
        if root.parent.name == "snapshots" and blobs.is_dir() and not blobs.is_symlink():
            self.allowed.append(blobs.resolve())

    def name(self, file: str) -> str:
        """How messages name ``file`` of the directory."""
        return str(self.given / file)

    def path(self, file: str) -> Path | None:
        """The real path of the directory's ``file``; None when there is no such file.

        Refuses a link that leads outside the directory (or the cache's blobs), a
        broken or looping link, and anything that is not a regular file."""
        candidate = self.root / file
        if not os.path.lexists(candidate):
            return None
        try:
            real = candidate.resolve(strict=True)
        except (OSError, RuntimeError):
            raise InputError(f"{self.name(file)}: a broken or looping symbolic link") from None
        if not any(real.is_relative_to(place) for place in self.allowed):
            raise InputError(f"{self.name(file)}: a symbolic link to a file outside the "
                             f"model directory; refused (copy the file into the directory "
                             f"if you trust it)")
        mode = real.stat().st_mode
        if not stat.S_ISREG(mode):
            raise InputError(f"{self.name(file)}: not a regular file")
        return real

    def read_bytes(self, file: str, limit: int = MAX_TEXT_BYTES) -> bytes | None:
        """The bytes of ``file`` (at most ``limit``), or None when it is absent."""
        real = self.path(file)
        if real is None:
            return None
        with _open(real, self.name(file)) as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > limit:
                raise InputError(f"{self.name(file)}: larger than the limit of "
                                 f"{_size(limit)}")
            data = handle.read(limit + 1)
        if len(data) > limit:
            raise InputError(f"{self.name(file)}: larger than the limit of {_size(limit)}")
        return data

    def read_json(self, file: str, limit: int = MAX_TEXT_BYTES) -> Any | None:
        """``file`` as JSON (numbers with a point kept as their exact text), or None
        when absent.  Repeated keys, ``NaN``/``Infinity`` and deep nesting are refused."""
        data = self.read_bytes(file, limit)
        if data is None:
            return None
        return parse_json(data, self.name(file))

    def safetensors(self, file: str = "model.safetensors") -> SafeTensors:
        """The checked header of the weights file (its data read later, lazily)."""
        real = self.path(file)
        if real is None:
            if self.path("model.safetensors.index.json") is not None:
                raise NotSupportedError(f"{self.given}: sharded weights "
                                        f"(model.safetensors.index.json) are not read; "
                                        f"save the model in one file")
            raise InputError(f"{self.given}: no model.safetensors (.bin weights are never "
                             f"read: they are pickles; save with safe_serialization=True)")
        return SafeTensors(real, self.name(file))


def _open(real: Path, name: str):
    """``real`` opened for reading without following a link or blocking on a FIFO."""
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise InputError(f"{name}: cannot be read ({exc.strerror})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InputError(f"{name}: not a regular file")
    return os.fdopen(fd, "rb")


def _size(limit: int) -> str:
    return f"{limit // 2**20} MiB" if limit >= 2**20 else f"{limit:,} bytes"


def _unique(pairs: list[tuple[str, Any]], name: str) -> dict[str, Any]:
    table: dict[str, Any] = {}
    for key, value in pairs:
        if key in table:
            raise InputError(f"{name}: the key {key[:60]!r} appears twice")
        table[key] = value
    return table


def _no_constant(text: str, name: str) -> Any:
    raise InputError(f"{name}: {text} is not a number JSON allows")


def _depth(value: Any, name: str, level: int = 0) -> None:
    if level > MAX_JSON_DEPTH:
        raise InputError(f"{name}: nested more than {MAX_JSON_DEPTH} levels deep")
    if isinstance(value, dict):
        for item in value.values():
            _depth(item, name, level + 1)
    elif isinstance(value, list):
        for item in value:
            _depth(item, name, level + 1)


def parse_json(data: bytes, name: str, exact_decimals: bool = True) -> Any:
    """JSON text from an untrusted file; one-line errors naming ``name``."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{name}: not UTF-8 text") from None
    try:
        value = json.loads(text, object_pairs_hook=lambda p: _unique(p, name),
                           parse_float=DecimalText if exact_decimals else float,
                           parse_constant=lambda c: _no_constant(c, name))
    except RecursionError:
        raise InputError(f"{name}: nested too deeply") from None
    except ValueError as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(f"{name}: not valid JSON ({exc})") from None
    _depth(value, name)
    return value


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class SafeTensors(Mapping[str, np.ndarray]):
    """A ``.safetensors`` file whose header has been checked; tensors read on access.

    Indexing (``file["wte.weight"]``) reads one floating-point tensor exactly (bfloat16
    widened to float32 bit for bit) and records that the import used it; iteration
    lists every tensor name without reading.  :meth:`unused` names the tensors never
    read, so that the import can report them instead of dropping them silently.

    The file stays open (one descriptor, every read through it) until :meth:`close`
    (or the end of a ``with`` block).  With ``sha256``, the file must be the one of
    that SHA-256: a file over the size limit, or one that cannot be read to the end,
    or of another hash, is :class:`NotRecorded` (nothing of it said, not even what is
    wrong with its header); the header and the tensors ``keep`` names are then those
    of the pass that hashed it.
    """

    def __init__(self, real: Path, name: str, sha256: str | None = None,
                 keep: Collection[str] = ()) -> None:
        self.real, self.name = real, name
        #: The one open descriptor every byte is read through (hash, header, tensors),
        #: so that a file renamed over this one meanwhile is never read.
        self._handle = _open(real, name)
        #: With ``sha256``: the bytes of the tensors ``keep`` names, kept from the one
        #: pass that hashed them (what is read is what was hashed).
        self._kept: dict[str, bytearray] = {}
        try:
            status = os.fstat(self._handle.fileno())
            self._stamp = _stamp(status)
            self.size = status.st_size
            if self.size > MAX_WEIGHT_BYTES:
                if sha256 is not None:  # no file the import wrote is this large
                    raise NotRecorded(self.name)
                raise NotSupportedError(f"{self.name}: larger than "
                                        f"{_size(MAX_WEIGHT_BYTES)}; exact examples are "
                                        f"for small models")
            if sha256 is None:
                length = self._header_length(self._read(0, min(8, self.size)))
                self._set_header(length, self._read(8, length))
            else:
                self._verified(sha256, keep)
        except BaseException:
            self.close()
            raise
        self.used: set[str] = set()
        #: Called as ``progress(k, total, name)`` before each tensor is read.
        self.progress: Callable[[int, int, str], None] | None = None

    def _header_length(self, start: bytes | bytearray) -> int:
        """The header's length from the file's first 8 bytes, checked against its size."""
        if len(start) < 8:
            raise InputError(f"{self.name}: not a safetensors file (shorter than its 8-byte "
                             f"header length)")
        length = int.from_bytes(start[:8], "little")
        if length < 2 or length > MAX_HEADER_BYTES or 8 + length > self.size:
            raise InputError(f"{self.name}: not a safetensors file (a header of {length:,} "
                             f"bytes in a file of {self.size:,})")
        return length

    def _set_header(self, length: int, header: bytes | bytearray) -> None:
        """The header's ``length`` bytes ``header`` parsed and checked whole."""
        table = parse_json(header, f"{self.name} (header)", exact_decimals=False)
        self.data_start = 8 + length
        self.data_bytes = self.size - self.data_start
        self.entries = self._check(table)

    def _verified(self, sha256: str, keep: Collection[str]) -> None:
        """One pass over the file: its SHA-256, its header and the bytes of the tensors
        ``keep`` names, all from the same reads.  Refused (:class:`NotRecorded`, before
        anything parsed is said) when the hash is not ``sha256``; then a malformed
        header is refused as any other."""
        digest, regions = hashlib.sha256(), _Regions()
        regions.add(_LENGTH, 0, min(8, self.size))
        problem: InputError | None = None
        try:
            for at in range(0, max(self.size, 1), _CHUNK):
                chunk = self._read(at, min(_CHUNK, self.size - at))
                digest.update(chunk)
                regions.feed(chunk, at)
                while problem is None and (ready := regions.ready()):
                    try:
                        self._parsed(ready, regions, keep)
                    except InputError as exc:  # said only once the hash is the recorded
                        problem = exc
                    regions.feed(chunk, at)  # the regions just added may start here
        except InputError:  # unreadable, or changed while read: not the recorded file
            raise NotRecorded(self.name) from None
        if digest.hexdigest() != sha256:
            raise NotRecorded(self.name)
        if problem is not None:
            raise problem
        self._kept = regions.kept

    def _parsed(self, ready: tuple[str, bytearray], regions: _Regions,
                keep: Collection[str]) -> None:
        """The next part of the file read whole: the header's length (then its header
        is to be read), or the header (then the kept tensors are)."""
        name, data = ready
        if name == _LENGTH:
            self._length = self._header_length(data)
            regions.add(_HEADER, 8, 8 + self._length)
            return
        self._set_header(self._length, data)
        for key in keep:
            if key in self.entries and self.entries[key][0] in FLOAT_DTYPES:
                _, _, begin, end = self.entries[key]
                regions.add(key, self.data_start + begin, self.data_start + end,
                            kept=True)

    def _read(self, start: int, length: int) -> bytearray:
        """``length`` bytes from ``start`` through the open descriptor (read into one
        buffer); refused when the file is not the one opened any more (shorter, or
        written since)."""
        buffer = bytearray(length)
        view, got = memoryview(buffer), 0
        try:
            while got < length:
                count = os.preadv(self._handle.fileno(), [view[got:got + _CHUNK]],
                                  start + got)
                if not count:
                    break
                got += count
            changed = _stamp(os.fstat(self._handle.fileno())) != self._stamp
        except OSError as exc:
            raise InputError(f"{self.name}: cannot be read ({exc.strerror})") from None
        finally:
            view.release()
        if got < length or changed:
            raise InputError(f"{self.name}: the file changed while it was read; run again "
                             f"once nothing writes to it")
        return buffer

    def close(self) -> None:
        """Close the file (tensors read so far stay usable)."""
        self._handle.close()

    def __enter__(self) -> SafeTensors:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check(self, header: Any) -> dict[str, tuple[str, tuple[int, ...], int, int]]:
        """Every entry of the header as (dtype, shape, start, end), or one line naming
        what is wrong."""
        where = f"{self.name} (header)"
        if not isinstance(header, dict):
            raise InputError(f"{where}: must be a table of tensors, found "
                             f"{type(header).__name__}")
        if len(header) > MAX_TENSORS:
            raise InputError(f"{where}: {len(header):,} tensors, more than the "
                             f"{MAX_TENSORS:,} a weights file may list")
        entries = {}
        for key, info in header.items():
            if key == "__metadata__":
                if not isinstance(info, dict) or not all(isinstance(v, str)
                                                         for v in info.values()):
                    raise InputError(f"{where}: __metadata__ must be a table of strings")
                continue
            label = f"{where}: tensor {key[:80]!r}"
            if not key or not key.isprintable():
                raise InputError(f"{where}: a tensor name that is empty or not printable")
            if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
                raise InputError(f"{label} must be a table of exactly dtype, shape and "
                                 f"data_offsets")
            dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
            if not isinstance(dtype, str) or dtype not in ITEM_BYTES:
                raise InputError(f"{label}: unknown dtype {str(dtype)[:20]!r} (the format's: "
                                 f"{', '.join(ITEM_BYTES)})")
            if not isinstance(shape, list) or len(shape) > 8 \
                    or not all(_whole(s) and s >= 0 for s in shape):
                raise InputError(f"{label}: shape must be a list of at most 8 whole numbers "
                                 f">= 0")
            if not isinstance(offsets, list) or len(offsets) != 2 \
                    or not all(_whole(o) for o in offsets):
                raise InputError(f"{label}: data_offsets must be two whole numbers [start, "
                                 f"end]")
            begin, end = offsets
            if not 0 <= begin <= end <= self.data_bytes:
                raise InputError(f"{label}: data_offsets [{begin}, {end}] outside the data "
                                 f"buffer of {self.data_bytes:,} bytes")
            if end - begin != math.prod(shape) * ITEM_BYTES[dtype]:
                raise InputError(f"{label}: data_offsets hold {end - begin:,} bytes, but "
                                 f"shape {shape} of {dtype} needs "
                                 f"{math.prod(shape) * ITEM_BYTES[dtype]:,}")
            entries[key] = (dtype, tuple(shape), begin, end)
        at = 0
        for key, (_, _, begin, end) in sorted(entries.items(), key=lambda e: (e[1][2],
                                                                               e[1][3])):
            if begin != at:
                what = "overlaps the tensor before it" if begin < at else "leaves a hole " \
                       "before it"
                raise InputError(f"{where}: tensor {key[:80]!r} {what} (data_offsets start "
                                 f"at {begin:,}, the data before ends at {at:,})")
            at = end
        if at != self.data_bytes:
            raise InputError(f"{where}: the tensors index {at:,} of the {self.data_bytes:,} "
                             f"data bytes (the format allows no unindexed bytes)")
        return entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, key: object) -> bool:
        return key in self.entries

    def dtypes(self) -> list[str]:
        """The dtypes of the floating-point tensors, sorted."""
        return sorted({d for d, *_ in self.entries.values() if d in FLOAT_DTYPES})

    def float_count(self, skip: Callable[[str], bool] | None = None) -> int:
        """How many floating-point numbers the file holds (what an import may convert),
        leaving out the tensors ``skip`` names."""
        return sum(math.prod(s) for k, (d, s, *_) in self.entries.items()
                   if d in FLOAT_DTYPES and not (skip and skip(k)))

    def __getitem__(self, key: str) -> np.ndarray:
        dtype, shape, begin, end = self.entries[key]
        if self.progress is not None and key not in self.used:
            self.progress(len(self.used), len(self.entries), key)
        if dtype not in FLOAT_DTYPES:
            raise NotSupportedError(f"{self.name}: tensor {key!r} has dtype {dtype}; only "
                                    f"F64, F32, F16 and BF16 weights are read")
        raw = self._kept.pop(key, None)  # hashed with the file in one pass
        if raw is None:
            raw = self._read(self.data_start + begin, end - begin)
        array = np.frombuffer(raw, dtype=FLOAT_DTYPES[dtype])
        if dtype == "BF16":  # the upper half of a float32, exactly
            array = (array.astype(np.uint32) << 16).view(np.float32)
        self.used.add(key)
        # a Tensor owning its memory: every view of it (np.asarray, .T, a slice) has it
        # as its base, and so knows where in the file it comes from
        tensor = Tensor(tuple(shape), dtype=array.dtype)
        tensor[...] = array.reshape(shape)
        tensor.tensor_name = key
        return tensor

    def unused(self) -> list[str]:
        """The tensors never read, in the file's order."""
        return [k for k in self.entries if k not in self.used]

    def sha256(self) -> str:
        """The SHA-256 of the whole file, in hex, of the bytes read through the open
        descriptor (those the tensors are read from)."""
        digest = hashlib.sha256()
        for at in range(0, self.size, _CHUNK):
            digest.update(self._read(at, min(_CHUNK, self.size - at)))
        return digest.hexdigest()

    def contents(self) -> bytearray:
        """The whole file's bytes, read through the open descriptor."""
        return self._read(0, self.size)


#: Bytes read at once.
_CHUNK = 2**22
#: The parts of a file :meth:`SafeTensors._verified` reads before its tensors.
_LENGTH, _HEADER = "\x00length", "\x00header"


class _Regions:
    """Byte ranges of a file filled from its chunks as they are read in order: the
    header's length, the header, and the tensors kept."""

    def __init__(self) -> None:
        #: name -> [begin, end, filled up to, bytes]
        self.parts: dict[str, list[Any]] = {}
        self.kept: dict[str, bytearray] = {}

    def add(self, name: str, begin: int, end: int, kept: bool = False) -> None:
        """Collect ``[begin, end)`` as ``name`` (into :attr:`kept` when ``kept``)."""
        data = bytearray(end - begin)
        self.parts[name] = [begin, end, begin, data]
        if kept:
            self.kept[name] = data

    def feed(self, chunk: bytearray, at: int) -> None:
        """Copy what ``chunk`` (the file's bytes from ``at``) holds of each range."""
        for part in self.parts.values():
            begin, end, upto, data = part
            low, high = max(upto, at), min(end, at + len(chunk))
            if low < high:
                data[low - begin:high - begin] = chunk[low - at:high - at]
                part[2] = high

    def ready(self) -> tuple[str, bytearray] | None:
        """The header's length or the header once read whole (then forgotten)."""
        for name in (_LENGTH, _HEADER):
            part = self.parts.get(name)
            if part is not None and part[2] >= part[1]:
                del self.parts[name]
                return name, part[3]
        return None


class NotRecorded(InputError):
    """The weights file is not the one an example records (its size or SHA-256 differs,
    or it cannot be read to tell): what it holds is never said."""


def _stamp(status: os.stat_result) -> tuple[int, ...]:
    """What changes when a file is replaced or written: its identity, size and times."""
    return (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns,
            status.st_ctime_ns)


class Tensor(np.ndarray):
    """A tensor read from a weights file, knowing its name there: views of it (a head's
    columns, a transpose) can be written as references to the file
    (:func:`symformer.frameworks.weights.origin`)."""

    tensor_name: str = ""
