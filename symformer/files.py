"""Atomic file output: a failed command leaves no half-written file behind."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from symformer.errors import InputError


def write_files(directory: str | Path, files: Mapping[str, str | bytes]) -> list[Path]:
    """Write several files into ``directory`` all-or-nothing.

    Every file is first written to a temporary file beside its target; only when
    all succeeded are they renamed into place.  The directory is created if needed
    and never cleared: files already there and not named in ``files`` stay.
    """
    directory = Path(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{directory}: cannot create the output directory ({exc.strerror})"
                         ) from None
    staged: list[tuple[str, Path]] = []
    try:
        for name, content in files.items():
            target = directory / name
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp",
                                       dir=target.parent)
            staged.append((tmp, target))
            with os.fdopen(fd, "wb") as handle:
                handle.write(content.encode("utf-8") if isinstance(content, str) else content)
        for tmp, target in staged:
            os.replace(tmp, target)
    except OSError as exc:
        for tmp, _ in staged:
            if os.path.exists(tmp):
                os.unlink(tmp)
        raise InputError(f"{directory}: cannot write the output ({exc.strerror})") from None
    return [target for _, target in staged]


def write_file(path: str | Path, content: str | bytes) -> Path:
    """Write one file atomically (see :func:`write_files`)."""
    path = Path(path)
    return write_files(path.parent if str(path.parent) else ".", {path.name: content})[0]
