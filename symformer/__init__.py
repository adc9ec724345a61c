"""symformer: derive a small Transformer example exactly, stage by stage.

>>> from symformer import load_example, derive
>>> g = derive(load_example())           # the built-in example
>>> g["input"].closed_form(1, 0)
sin(1) + 4
>>> g["layer1.head1.Q"].values(decimals=2)[1]
['1.60', '0.75']

What a command prints starts from :func:`prepare` (:mod:`symformer.pipeline`): the
conventions, the slice, the work check, the derivation and the header note, the same
for the command line and a notebook:

>>> from symformer import Request, prepare
>>> p = prepare(load_example(), Request(causal=True, stages=("layer1.head1.weights",)))
>>> p.note, [s.stage.name for s in p.shown]
(' (causal mask)', ['layer1.head1.weights'])
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
from symformer.pipeline import Prepared, Request, prepare

__version__ = "0.1.0"

__all__ = [
    "ClosedFormTooLarge", "Derivation", "Example", "InputError", "NotSupportedError",
    "Prepared", "Request", "Rounded", "Stage", "SymformerError", "UndecidedError", "derive",
    "from_pretrained", "from_torch", "load_example", "parse_example", "positional_encoding",
    "prepare", "to_torch",
]
