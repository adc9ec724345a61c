"""The plain floating-point reference: every stage's operation runs its NumPy function.

:mod:`symformer.reference.numpy_ref` walks a derivation graph and runs each
operation's own NumPy function, written independently of its exact formula and of
its declared index equation; ``symformer crosscheck`` compares the floats with the
certified exact values.
"""

from symformer.reference.numpy_ref import forward, run

__all__ = ["forward", "run"]
