"""Analyses of a derived example that the notes, the slides and ``derive`` print.

* :mod:`~symformer.analysis.inactive` finds what the example leaves inactive (dead
  units, a wholly clipped FFN, a sub-layer that gives back its input), decided by
  certified signs; :mod:`symformer.latex.inactive` writes it into the notes.
"""
