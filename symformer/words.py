"""Counted nouns in messages, sheets and documents: ``1 variant``, ``2 variants``, ``1 decimal``."""

from __future__ import annotations


def plural(n: int, word: str) -> str:
    """``n`` and ``word``, with an ``s`` unless ``n`` is 1: ``plural(1, "file")`` is
    ``1 file``, ``plural(0, "file")`` is ``0 files``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
