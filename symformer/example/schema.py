"""The example a user describes: a sentence, its embeddings and every block's weights.

All numbers are exact SymPy rationals (see :mod:`symformer.example.numbers`).
Shapes are validated by the loader, so the engine can trust them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import sympy

if TYPE_CHECKING:
    from symformer.example.decoder import Decoder
    from symformer.example.loss import Loss

#: LayerNorm conventions.  ``"biased"``: (x - mu) / sqrt(var + eps) with the biased
#: variance, eps inside the root (PyTorch, the blog post).  ``"unbiased"``:
#: (x - mu) / (std + eps) with the unbiased standard deviation, eps outside the root
#: (the Annotated Transformer's LayerNorm).
LAYER_NORMS = ("biased", "unbiased")
#: Where LayerNorm sits: after the residual sum (the original paper, the post) or
#: before each sub-layer (most modern decoders).
NORM_PLACEMENTS = ("post", "pre")
ACTIVATIONS = ("relu", "gelu")
POSITIONAL_ENCODINGS = ("sinusoidal", "none")


@dataclass(frozen=True)
class Head:
    """One attention head's projections, each ``d_model x d_k``."""

    W_Q: sympy.Matrix
    W_K: sympy.Matrix
    W_V: sympy.Matrix

    @property
    def d_k(self) -> int:
        """Width of the queries and keys."""
        return self.W_Q.cols

    @property
    def d_v(self) -> int:
        """Width of the values (and of the head's output)."""
        return self.W_V.cols


@dataclass(frozen=True, kw_only=True)
class Block:
    """What every block has besides its attention: the FFN, the LayerNorms, conventions.

    ``gamma_k``/``beta_k`` belong to the k-th Add & Norm of the block.
    """

    W_1: sympy.Matrix  # d_model x d_ff
    b_1: sympy.Matrix  # 1 x d_ff
    W_2: sympy.Matrix  # d_ff x d_model
    b_2: sympy.Matrix  # 1 x d_model
    gamma_1: sympy.Matrix  # 1 x d_model
    beta_1: sympy.Matrix
    gamma_2: sympy.Matrix
    beta_2: sympy.Matrix
    activation: str = "relu"
    norm: str = "post"
    eps: sympy.Rational = sympy.Rational(1, 10**6)
    layer_norm: str = "biased"

    @property
    def d_ff(self) -> int:
        """Hidden width of the feed-forward network."""
        return self.W_1.cols


@dataclass(frozen=True, kw_only=True)
class Layer(Block):
    """One encoder block with its own weights and conventions."""

    heads: tuple[Head, ...]
    W_O: sympy.Matrix | None  # None: plain concatenation (the heads' widths add to d_model)


@dataclass(frozen=True)
class Example:
    """A worked example: sentence, vocabulary, embeddings, blocks and conventions."""

    title: str
    tokens: tuple[str, ...]
    vocab: tuple[str, ...]
    embeddings: sympy.Matrix  # len(vocab) x d_model
    layers: tuple[Layer, ...]
    positional_encoding: str = "sinusoidal"
    causal: bool = False
    #: None masks with -inf (exact zero weights); a number (e.g. -10**9) is added
    #: to the masked scores instead, as some implementations do.
    mask_value: sympy.Rational | None = None
    source: str = "<built-in>"
    #: The optional target side (``[decoder]`` table), see :mod:`symformer.example.decoder`.
    decoder: Decoder | None = None
    #: The optional ``[loss]`` table, see :mod:`symformer.example.loss`.
    loss: Loss | None = None

    @property
    def d_model(self) -> int:
        """Width of the embeddings and of every block's input and output."""
        return self.embeddings.cols

    @property
    def token_ids(self) -> tuple[int, ...]:
        """Vocabulary index of each token of the sentence."""
        return tuple(self.vocab.index(t) for t in self.tokens)
