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

from typing import Any

from symformer.ops.base import Notation


def input_notations(stage: Any) -> list[Notation]:
    """The symbols of the stage's inputs; several heads' outputs get ``^(k)``."""
    stages = [stage.derivation[name] for name in stage.inputs]
    notations = [s.op.symbol for s in stages]
    if len(stages) > 1 and len({n.latex for n in notations}) == 1 and all(s.head for s in stages):
        return [Notation(f"{n.latex}^{{({s.head})}}", f"{n.text}^({s.head})", n.title)
                for n, s in zip(notations, stages)]
    return notations
