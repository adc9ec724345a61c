"""Plain floating-point references of the encoder, independent of the exact engine.

:mod:`symformer.reference.numpy_ref` is a textbook NumPy implementation of every
stage; ``symformer crosscheck`` compares it with the certified exact values, and the
LaTeX export renders its small functions as the document's equations.
"""

from symformer.reference.numpy_ref import forward

__all__ = ["forward"]
