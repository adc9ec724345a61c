"""Worked lines built from each operation's local formula, printed in every format.

``build`` makes the intermediate representation (``model``) from a stage's local
formula; ``render_latex``, ``render_text``, ``render_mathml`` and ``to_json`` print
it.  See :func:`symformer.worked.build.worked_steps`.  The MathML printer
(:func:`symformer.worked.render_mathml.step_pieces`) is imported from its module: it
reads the equations' MathML conversion, which reads the operations (an operation
importing this package for :mod:`.model` must not close that loop).
"""

from symformer.worked.model import Step, Style, Worked
from symformer.worked.render_latex import step_latex as as_latex
from symformer.worked.render_text import step_text as as_text

__all__ = ["Step", "Style", "Worked", "as_latex", "as_text"]
