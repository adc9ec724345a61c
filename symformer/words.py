"""Nouns in messages, sheets and documents: counted (``1 variant``, ``2 variants``), and
set inside a sentence (``the attention weights``)."""

from __future__ import annotations


def plural(n: int, word: str) -> str:
    """``n`` and ``word``, with an ``s`` unless ``n`` is 1: ``plural(1, "file")`` is
    ``1 file``, ``plural(0, "file")`` is ``0 files``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def in_sentence(title: str) -> str:
    """A title as a noun with its article inside a sentence: ``"Attention weights"`` ->
    ``"the attention weights"``, ``"The key weights"`` -> ``"the key weights"``; a first
    word that is a name or an acronym (``FFN output``, ``LayerNorm``) keeps its
    capitals."""
    first = title.split(" ", 1)[0]
    if len(first) > 1 and first[1:].islower() and first[:1].isupper():
        title = title[:1].lower() + title[1:]
    return title if title.startswith("the ") else f"the {title}"
