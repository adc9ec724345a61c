"""The exact engine: stages as a shared graph of local formulas, certified by balls."""

from symformer.engine.encoder import derive, positional_encoding
from symformer.engine.graph import Derivation, Stage
from symformer.engine.rounding import Rounded

__all__ = ["Derivation", "Rounded", "Stage", "derive", "positional_encoding"]
