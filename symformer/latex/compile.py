"""Running pdflatex on an exported ``main.tex``: :mod:`symformer.tex`, where the
figures (which the notes import) reach it too without importing this package."""

from __future__ import annotations

from symformer.tex import compile_log, compile_pdf, convert_pdf, pdflatex

__all__ = ["compile_log", "compile_pdf", "convert_pdf", "pdflatex"]
