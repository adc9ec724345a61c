"""The optional ``[head]`` table: a classification or regression head, d_model -> C.

```toml
[head]
pooling = "first"            # "first" (BERT's [CLS]), "last" (GPT), "mean", "none"
output = "softmax"           # "softmax" (C classes), "sigmoid" (C = 1: binary), "identity"
classes = ["negative", "neutral", "positive"]   # or a count: classes = 3
W_C = [[...], ...]           # d_model x C
b_C = [0, 0, 0]              # optional, 1 x C
```

The default pooling is "first" (the [CLS] convention of an encoder) and "last" for a
causal model (its only row that has read every token).  No vocabulary, no LM head: the
stages are ``head.pooled`` (1 x d_model, absent with ``pooling = "none"``),
``head.logits`` and ``head.probabilities`` (softmax, sigmoid), or ``head.output``
(identity: a regression output) -- :mod:`symformer.blocks.head`.
"""

from __future__ import annotations

from typing import Any

from symformer.errors import InputError
from symformer.example.fields import Where, choice, matrix, no_unknown_keys, optional_vector
from symformer.example.schema import OutputHead

POOLINGS = ("first", "last", "mean", "none")
OUTPUTS = ("softmax", "sigmoid", "identity")
_KEYS = {"pooling", "output", "classes", "W_C", "b_C"}


def parse_head(data: Any, here: Where, d_model: int, causal: bool) -> OutputHead:
    """Validate the ``[head]`` table (one-line errors naming the file and key)."""
    if not isinstance(data, dict):
        raise InputError(f"{here}: must be a table")
    no_unknown_keys(data, _KEYS, here)
    pooling = choice(data, "pooling", POOLINGS, here, "last" if causal else "first")
    if "output" not in data:
        raise InputError(f"{here}: missing key 'output' (one of "
                         f"{', '.join(map(repr, OUTPUTS))}: classes, a binary or multi-label "
                         f"probability, or a regression output)")
    output = choice(data, "output", OUTPUTS, here, "softmax")
    W = matrix(data, "W_C", here, rows=d_model)
    C = W.cols
    b = optional_vector(data, "b_C", here, C)
    return OutputHead(W, b, pooling, output, _classes(data.get("classes"), here, C, output))


def _classes(value: Any, here: Where, C: int, output: str) -> tuple[str, ...]:
    """The C column labels: given names, or class0 ... (y0 ... for a regression)."""
    stem = "y" if output == "identity" else "class"
    if value is None:
        return tuple(f"{stem}{k}" for k in range(C))
    if isinstance(value, int) and not isinstance(value, bool):
        if value != C:
            raise InputError(f"{here}: classes = {value} but W_C has {C} columns (one per "
                             f"class)")
        return tuple(f"{stem}{k}" for k in range(C))
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise InputError(f"{here}: classes must be a number or a list of class names, "
                         f"found {value!r}"[:200])
    if len(value) != C:
        raise InputError(f"{here}: classes names {len(value)} classes but W_C has {C} "
                         f"columns (one per class)")
    if len(set(value)) != len(value):
        raise InputError(f"{here}: classes lists a name twice: {value!r}"[:200])
    return tuple(value)
