"""Every displayed equation from one symbolic source, and proved.

Each operation declares its general equation (and its backward rules) once, in index
notation over named arrays (:mod:`symformer.equations.ir`); :mod:`.render` prints it
as LaTeX, text, MathML and a plain Python-syntax form; :mod:`.evaluate` instantiates
it at every entry exactly, so a test proves it equal to the operation's local
formula; :mod:`.stage` binds it to a stage (its symbols, matrices and the stage or
parameter each array stands for); :mod:`.export` writes ``equations.json``.
"""
