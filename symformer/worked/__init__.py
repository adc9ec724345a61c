"""Worked lines built from each operation's local formula, printed in every format.

``build`` makes the intermediate representation (``model``) from a stage's local
formula; ``render_latex``, ``render_text``, ``render_mathml`` and ``to_json`` print
it.  See :func:`symformer.worked.build.worked_steps`.
"""
