"""Live numbers: an author's LaTeX or Markdown with placeholders, filled with
certified values (``symformer fill``).  See :func:`symformer.fill.template.fill`;
the template language is :mod:`symformer.fill.syntax`."""

from symformer.fill.template import DELIMITERS, Template, fill, guess_format

__all__ = ["DELIMITERS", "Template", "fill", "guess_format"]
