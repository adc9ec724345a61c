"""symformer: derive a small Transformer example exactly, stage by stage.

>>> from symformer import load_example, derive
>>> g = derive(load_example())           # the built-in example
>>> g["input"].closed_form(1, 0)
sin(1) + 4
>>> g["layer1.head1.Q"].values(decimals=2)[1]
['1.60', '0.75']
"""

from symformer.blocks import derive
from symformer.engine import Derivation, Rounded, Stage
from symformer.errors import (
    ClosedFormTooLarge,
    InputError,
    NotSupportedError,
    SymformerError,
    UndecidedError,
)
from symformer.example import Example, load_example, parse_example
from symformer.frameworks import from_pretrained, from_torch, to_torch
from symformer.ops import positional_encoding

__version__ = "0.1.0"

__all__ = [
    "ClosedFormTooLarge", "Derivation", "Example", "InputError", "NotSupportedError",
    "Rounded", "Stage", "SymformerError", "UndecidedError", "derive", "from_pretrained",
    "from_torch", "load_example", "parse_example", "positional_encoding", "to_torch",
]
