"""A classification or regression head on the encoder output (``[head]``), no vocabulary.

    z̄ = pool(z)             head.pooled        (1 x d; absent with pooling = "none")
    ℓ = z̄ W_C + b_C         head.logits        (C columns)
    p = softmax(ℓ)          head.probabilities (classes; cross-entropy)
    ŷ = sigmoid(ℓ)          head.probabilities (binary or multi-label; bce)
    ŷ = z̄ W_C + b_C         head.output        (regression; mse)
"""

from __future__ import annotations

from symformer.engine.graph import Derivation
from symformer.example.exact import ExactMatrix
from symformer.example.schema import GivenObjective, OutputHead
from symformer.notation_types import Notation
from symformer.ops import Projection, Softmax
from symformer.ops.objective import Objective
from symformer.ops.pooling import POOLED, Pool
from symformer.ops.sigmoid import PREDICTED, Sigmoid

CLASS_LOGITS = Notation(r"\ell", "ℓ", "Logits (one score per class)")
CLASS_PROBABILITIES = Notation("p", "p", "Class probabilities (softmax)")
REGRESSION = Notation(r"\hat{y}", "ŷ", "Prediction (regression head)")
_POOLED_TITLES = {"first": "Pooled output (the first position's row, [CLS])",
                  "last": "Pooled output (the last position's row)",
                  "mean": "Pooled output (the mean over positions)"}


def output_head(g: Derivation, x: str, head: OutputHead) -> str:
    """Append the head's stages after stage ``x`` (the encoder output); returns the last."""
    rows = g[x].rows
    if head.pooling != "none":
        n = len(rows)
        position = n - 1 if head.pooling == "last" else 0
        how = "mean" if head.pooling == "mean" else "row"
        note = Notation(POOLED.latex, POOLED.text, _POOLED_TITLES[head.pooling])
        label = "mean" if how == "mean" else rows[position]
        x = g.add("head.pooled", "pooled", Pool(how, position, note), (x,), (label,), g[x].cols)
        rows = (label,)
    if head.output == "identity":
        return g.add("head.output", "head_output",
                     Projection(head.W_C, head.b_C, REGRESSION, "W_C", "b_C",
                                role="regression"), (x,), rows, head.classes)
    logits = g.add("head.logits", "logits",
                   Projection(head.W_C, head.b_C, CLASS_LOGITS, "W_C", "b_C", columns="vocab",
                              role="logits"),
                   (x,), rows, head.classes)
    if head.output == "sigmoid":
        return g.add("head.probabilities", "sigmoid", Sigmoid(PREDICTED), (logits,), rows,
                     head.classes)
    return g.add("head.probabilities", "probabilities",
                 Softmax(CLASS_PROBABILITIES, "C"), (logits,), rows, head.classes)


def head_loss_source(g: Derivation, kind: str) -> str | None:
    """The head stage a loss of ``kind`` reads (None: the example has no ``[head]``)."""
    head = g.example.head if g.example is not None else None
    if head is None:
        return None
    return "head.output" if head.output == "identity" else "head.probabilities"


#: An optimiser lesson's loss: the objective itself.
OBJECTIVE_LOSS = Notation("f", "f", "Objective (the loss)")


def objective_stages(g: Derivation, given: GivenObjective) -> str:
    """``loss`` = f(θ), the objective, with the parameter row θ as its weight ``theta``
    (one column per parameter name): ``grad.theta``, and ``stepT.theta`` in training."""
    names = tuple(n for n, _ in given.starts)
    theta = ExactMatrix([[v for _, v in given.starts]])
    return g.add("loss", "loss", Objective(given.tree, names, theta, given.text,
                                           OBJECTIVE_LOSS, given.trees), (), ("loss",), ("L",))
