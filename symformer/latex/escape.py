"""Escaping for LaTeX and Markdown: see :mod:`symformer.escape` (outside this package, so
the notebook display can use it without importing the exporters)."""

from symformer.escape import (
    LABEL_CHARS,
    label_text,
    latex_text,
    markdown_text,
    short_name,
    token_label,
    unicode_math,
    word_label,
)

__all__ = ["LABEL_CHARS", "label_text", "latex_text", "markdown_text", "short_name",
           "token_label", "unicode_math", "word_label"]
