"""Printing the equations: latexify-py's expression codegen and a text codegen, told
this project's symbols.

The equations themselves are declared once per operation, in index form, and proved
(:mod:`symformer.equations`); this package prints their trees: LaTeX through
latexify-py's :class:`~latexify.codegen.ExpressionCodegen`
(:mod:`symformer.codegen.latex`), plain Unicode text (:mod:`symformer.codegen.text`),
identifiers spelled as a textbook does (:mod:`symformer.codegen.symbols`), and the
general equation of a stage as every format shows it
(:func:`symformer.codegen.backward.equation_lines`).
"""

from __future__ import annotations
