# ruff: noqa: F821, B018
"""Names vulture reports as unused in symformer/ that are used, where it cannot see.

Read by tests/test_dead_code.py (and usable as ``vulture symformer
tests/vulture_allowlist.py --ignore-decorators "@*.register"``).  Every entry says
who reads the name; the test fails on an entry vulture no longer reports, so the list
stays as short as the code allows.  A name used only by a test is dead code: move the
test onto the public path and delete the name (as with ``step_mathml``), unless it is
documented or declared data the tests read (``ADAM_PARTS``).
"""

# -- protocols: called by IPython, SymPy, the warnings module, tqdm ------------------
_._repr_html_  # IPython/Jupyter rich display (Derivation, Stage, Example, TraceResult)
_._repr_markdown_  # IPython/Jupyter rich display
_._repr_latex_  # IPython/Jupyter rich display
__getattr__  # a module attribute looked up on first use (PEP 562: documents/__init__.py)
_._sympy_  # sympify protocol (example/exact.py's ExactMatrix, ExactNumber)
_._print_Add  # SymPy printer dispatch by class name (latex/numbers.py's TextbookPrinter)
_.showwarning  # the warnings module's hook, replaced for one command (cli/__init__.py)
filename  # warnings.showwarning's signature (cli/__init__.py)
lineno  # warnings.showwarning's signature
_.bar_format  # tqdm reads it on refresh (cli/_progress.py)


# -- read by name through getattr ------------------------------------------------------
_.gamma_1  # blocks/sublayers.py: getattr(block, f"gamma_{which}")
_.gamma_2
_.gamma_3
_.beta_3
_.angle_table  # ops/rope.py: the equation's array role "const:angle_table"
_.hf_names  # registry.framework_names: getattr(cls, declaration) (the imports' table)
_.torch_names  # same
_.torch_modules  # same
_.hf_modules  # same
_.hf_positions  # same

# -- public, used outside the package ------------------------------------------------
_.check_seconds  # exercise/generate.py's search timings, benchmarks/bench_exercise.py
_.prefilter_seconds  # same
_.hook_paths  # frameworks/torch_check.py, the published hook table (docs/frameworks.md)
_.ADAM_PARTS  # ops/side_terms.py: AdamPart's parts, tests/test_operations.py's factory

_.setup  # authoring/sphinx.py: Sphinx calls an extension's setup(app) (docs/values.md)
_.decide_logits  # blocks/decoding.py: a decision on given logits (tests/test_decoding.py)
_.binary  # equations/tree.Printer.visit: getattr(self, the node class's name in lower case)
route  # blocks/moe.py: the Python API of docs/moe.md (routing given rows)
_.last_kept  # ops/moe.py: RoutingMargin's equations read it by name ("const:last_kept")
