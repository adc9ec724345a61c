"""The exact engine: stages as a shared graph of local formulas, certified by balls.

It knows nothing of Transformers: operations (:mod:`symformer.ops`) say what a
stage computes, blocks (:mod:`symformer.blocks`) compose them.
"""

from symformer.engine.graph import Derivation, Stage
from symformer.engine.rounding import Rounded

__all__ = ["Derivation", "Rounded", "Stage"]
