"""Every displayed equation from one symbolic source, and proved.

Each operation declares its general equation (and its backward rules) once, in index
notation over named arrays.  One pipeline, in latexify-py's stages, prints it in
every format (:func:`symformer.equations.stage.stage_equation` runs it):

1. **parse** -- :mod:`.ir`: the declared lines as validated expression trees
   (:class:`~.ir.IndexEquation`; nothing outside the index language gets through);
2. **bind** -- :mod:`.stage`: each array name bound to a stage, a parameter or a
   constant (its symbol, its exact matrix, what ``equations.json`` says it is); a
   gradient's equation is its consumers' backward rules;
3. **transform** -- :mod:`.transform`: the trees written as a textbook writes them
   (arrays by their printed names, indices aligned, ``1 *`` dropped), and the form
   that is evaluated (named inner quantities read in);
4. **render** -- :mod:`.render`: the trees lowered (:mod:`.lower`) to the one
   expression tree (:mod:`.tree`, the nodes the claim reader
   :mod:`symformer.verify.latex_math` gives an author's LaTeX), printed per node class
   as LaTeX (:mod:`.latex`), text (:mod:`.text`) and MathML (from the LaTeX), and the
   plain Python-syntax form; functions are named by the one function table
   (:mod:`.functions`, built from the registry), every other identifier spelled by
   :mod:`.symbols`.

Beside it, :mod:`.evaluate` instantiates an equation at every entry exactly, so a
test proves it equal to the operation's local formula, and :mod:`.export` writes
``equations.json``.
"""
