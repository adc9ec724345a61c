"""Certified values for the authoring stack: LaTeX macros (Overleaf), a values file with
a MyST/Sphinx role and a mystmd plugin (Jupyter Book), and a Quarto shortcode
(``symformer export --format values``; docs/values.md)."""

from symformer.authoring.values import values_files

__all__ = ["values_files"]
