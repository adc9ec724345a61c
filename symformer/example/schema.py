"""The example a user describes: a sentence, its embeddings and every block's weights.

All numbers are exact SymPy rationals (see :mod:`symformer.example.literals`).
Shapes are validated by the loader, so the engine can trust them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from flint import fmpq

from symformer.errors import InputError
from symformer.example.exact import ExactNumber
from symformer.lazy import sympy
from symformer.registry import ACTIVATION_NAMES, NORM_NAMES, SCORE_NAMES

#: LayerNorm's default epsilon, 1e-6.
DEFAULT_EPS = ExactNumber(fmpq(1, 10**6))
#: The sinusoidal encoding's default base.
DEFAULT_BASE = ExactNumber(10000)
#: The normalisations (``layer_norm``), as their operations declare them (one registered
#: later too).  ``"biased"``: (x - mu) / sqrt(var + eps) with the biased
#: variance, eps inside the root (PyTorch, the blog post).  ``"unbiased"``:
#: (x - mu) / (std + eps) with the unbiased standard deviation, eps outside the root
#: (the Annotated Transformer's LayerNorm).  ``"whole_matrix"``: mean and variance
#: over every entry of the matrix (what ``x.mean()`` without an axis computes).
#: ``"rms"``: RMSNorm, x / sqrt(mean(x^2) + eps) * gamma (no mean, no beta).
LAYER_NORMS = NORM_NAMES
#: Where LayerNorm sits: after the residual sum (the original paper, the post),
#: before each sub-layer (most modern decoders), or nowhere.
NORM_PLACEMENTS = ("post", "pre", "none")
#: The FFN activations, as their operations declare them (one registered later too).
ACTIVATIONS = ACTIVATION_NAMES
#: ``"learned"`` adds rows of ``positional_embeddings``; ``"rope"`` adds nothing and
#: rotates every head's queries and keys instead.
POSITIONAL_ENCODINGS = ("sinusoidal", "learned", "rope", "none")
#: What the decoder of an encoder-decoder example supports.
DECODER_POSITIONAL_ENCODINGS = ("sinusoidal", "none")
#: The attention score functions (``attention_scores``), as their operations declare them
#: (one registered later too): ``"dot"`` is Q K^T.
SCORE_FUNCTIONS = SCORE_NAMES
#: The attention scale's named values (a positive number divides the scores by it).
SCALES = ("sqrt_dk", "none")
#: RoPE's pairs: (2i, 2i+1) as in the RoFormer paper, or (i, i + d/2) as in Hugging
#: Face's Llama (``rotate_half``).
ROPE_STYLES = ("interleaved", "half")


@dataclass(frozen=True)
class Head:
    """One attention head's projections, each ``d_model x d_k``, and optional biases.

    With grouped-query attention ``kv_head`` is the 0-based index of the layer's
    key/value head this query head reads; ``W_K``/``W_V`` are then that head's.
    """

    W_Q: sympy.Matrix
    W_K: sympy.Matrix
    W_V: sympy.Matrix
    b_Q: sympy.Matrix | None = None
    b_K: sympy.Matrix | None = None
    b_V: sympy.Matrix | None = None
    kv_head: int | None = None

    @property
    def d_k(self) -> int:
        """Width of the queries and keys."""
        return self.W_Q.cols

    @property
    def d_v(self) -> int:
        """Width of the values (and of the head's output)."""
        return self.W_V.cols


@dataclass(frozen=True)
class KVHead:
    """A key/value head shared by several query heads (grouped-query attention)."""

    W_K: sympy.Matrix
    W_V: sympy.Matrix
    b_K: sympy.Matrix | None = None
    b_V: sympy.Matrix | None = None


@dataclass(frozen=True)
class Expert:
    """One expert of a mixture (``[[layer.moe.expert]]``): an FFN
    ``act(x W_1 + b_1) W_2 + b_2`` (W_1: d_model x d_ff, W_2: d_ff x d_model)."""

    W_1: Any
    W_2: Any
    b_1: Any = None
    b_2: Any = None
    activation: str = "relu"


@dataclass(frozen=True)
class MixtureOfExperts:
    """A mixture-of-experts feed-forward sub-layer (``[layer.moe]``): a router
    (``router``, d_model x E) scores the E experts per token, each token goes to its
    ``top_k`` (ties at the k-th place broken by the lower expert index) and the kept
    experts' outputs are added weighted by their gates (the router's probabilities,
    renormalised over the kept ones when ``renormalize``: Mixtral's; else as they are:
    the Switch Transformer's)."""

    router: Any  # d_model x E
    experts: tuple[Expert, ...]
    top_k: int
    renormalize: bool = True


@dataclass(frozen=True)
class GivenDropout:
    """Dropout with a given mask (``attention_dropout``, ``ffn_dropout``): the
    sub-layer's output times the 0/1 ``mask`` (a row per token, d_model wide) over
    1 - ``p`` (inverted dropout, exact)."""

    p: Any  # 0 <= p < 1, exact
    mask: tuple[tuple[int, ...], ...]


@dataclass(frozen=True, kw_only=True)
class Block:
    """What every block has besides its attention: the FFN, the LayerNorms, conventions.

    ``gamma_k``/``beta_k`` belong to the k-th Add & Norm of the block.  ``W_1 = None``:
    no feed-forward sub-layer; ``W_gate``: a gated FFN act(x W_gate) * (x W_1).
    """

    W_1: sympy.Matrix | None  # d_model x d_ff
    b_1: sympy.Matrix | None  # 1 x d_ff
    W_2: sympy.Matrix | None  # d_ff x d_model
    b_2: sympy.Matrix | None  # 1 x d_model
    gamma_1: sympy.Matrix  # 1 x d_model
    beta_1: sympy.Matrix
    gamma_2: sympy.Matrix
    beta_2: sympy.Matrix
    activation: str = "relu"
    norm: str = "post"
    eps: sympy.Rational = DEFAULT_EPS
    layer_norm: str = "biased"
    W_gate: sympy.Matrix | None = None  # d_model x d_ff
    b_gate: sympy.Matrix | None = None
    #: False drops the residual connections of the block.
    residual: bool = True
    #: None divides the scores by sqrt(d_k); a number divides them by it (1: unscaled).
    scale: sympy.Rational | None = None
    rope_style: str = "interleaved"
    #: ALiBi: one slope per attention head (``alibi``/``alibi_slopes``); None: no bias.
    alibi_slopes: tuple[sympy.Rational, ...] | None = None
    #: A mixture of experts in place of the FFN (``[layer.moe]``); None: none.
    moe: MixtureOfExperts | None = None
    #: Dropout with a given mask on the attention's and the FFN's (or the mixture's)
    #: output, before the residual sum; None: none.
    attention_dropout: GivenDropout | None = None
    ffn_dropout: GivenDropout | None = None

    @property
    def d_ff(self) -> int:
        """Hidden width of the feed-forward network (0: no FFN); a mixture's, its experts'
        hidden widths added up and one per expert for the router (what its work grows
        with: the work estimates read it)."""
        if self.moe is not None:
            return sum(e.W_1.cols + 1 for e in self.moe.experts)
        return 0 if self.W_1 is None else self.W_1.cols


@dataclass(frozen=True, kw_only=True)
class Layer(Block):
    """One encoder block with its own weights and conventions."""

    heads: tuple[Head, ...]  # (): no attention sub-layer (an FFN-only block)
    W_O: sympy.Matrix | None  # None: plain concatenation (the heads' widths add to d_model)
    b_O: sympy.Matrix | None = None
    #: Key/value heads shared by the query heads (grouped-query attention); () otherwise.
    kv_heads: tuple[KVHead, ...] = ()


@dataclass(frozen=True)
class FinalNorm:
    """The normalisation after the last block (``final_norm = true``)."""

    layer_norm: str
    eps: sympy.Rational
    gamma_f: sympy.Matrix
    beta_f: sympy.Matrix


@dataclass(frozen=True)
class LMHead:
    """The language-model head: logits = z W_vocab + b_vocab (W_vocab: d_model x |vocab|).

    ``W_transform`` (BERT's prediction-head transform): z is first replaced by
    norm(act(z W_transform + b_transform)), the norm ``transform_norm``.
    """

    W_vocab: sympy.Matrix
    b_vocab: sympy.Matrix | None = None
    tied: bool = False
    W_transform: sympy.Matrix | None = None  # d_model x d_model
    b_transform: sympy.Matrix | None = None
    transform_activation: str = "gelu"
    transform_norm: FinalNorm | None = None
    #: A masked-LM head (BERT's): it predicts every position's own token, so there is
    #: no next token (no ``next_token`` stage; ``generate`` refuses).
    masked: bool = False


@dataclass(frozen=True)
class OutputHead:
    """A classification or regression head (``[head]``): d_model -> C, no vocabulary.

    ``pooling``: the row it reads ("first": BERT's [CLS], "last": GPT's last token,
    "mean": the mean over positions, "none": every position, a token classifier).
    ``logits`` = pooled W_C + b_C (W_C: d_model x C), then ``output``: "softmax" (C
    classes), "sigmoid" (C independent probabilities; C = 1: a binary classifier) or
    "identity" (C regression outputs).  ``classes`` name the C columns.
    """

    W_C: sympy.Matrix
    b_C: sympy.Matrix | None
    pooling: str
    output: str
    classes: tuple[str, ...]


@dataclass(frozen=True)
class GivenObjective:
    """An optimiser lesson's objective f (``[objective]``): its text, its parsed tree
    (:mod:`symformer.example.objective`) and each parameter's exact starting value."""

    text: str
    tree: tuple
    starts: tuple[tuple[str, sympy.Rational], ...]
    #: Given gradients (``gradients``): step t's objective is Σ_k g_(t,k) θ_k.
    trees: tuple[tuple, ...] = ()


@dataclass(frozen=True)
class GivenAttention:
    """An attention-only example that starts from given queries, keys and values (the
    ``[attention]`` table): no embeddings, no projections."""

    Q: sympy.Matrix  # n x d_k
    K: sympy.Matrix  # m x d_k
    V: sympy.Matrix  # m x d_v
    #: None divides the scores by sqrt(d_k); a number divides them by it (1: unscaled).
    scale: sympy.Rational | None = None
    alibi_slope: sympy.Rational | None = None
    #: The labels of the keys' rows (the queries' are the example's ``tokens``).
    key_labels: tuple[str, ...] = ()


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
    #: Sliding-window attention (Mistral's): with the causal mask, query i reads only the
    #: last ``sliding_window`` positions (keys j with i - w < j <= i); None: all of them.
    sliding_window: int | None = None
    #: Every head's raw scores u = f(Q, K) (``attention_scores = "dot"``: Q K^T), the
    #: score function a registered operation declares (:data:`SCORE_FUNCTIONS`).
    attention_scores: str = "dot"
    #: None masks with -inf (exact zero weights); a number (e.g. -10**9) is added
    #: to the masked scores instead, as some implementations do.
    mask_value: sympy.Rational | None = None
    source: str = "<built-in>"
    #: The optional target side (``[decoder]`` table), see :mod:`symformer.example.decoder`.
    decoder: Decoder | None = None
    #: How ``generate`` chooses the next token (``[decoding]`` table): temperature,
    #: top-k, top-p, min-p, penalties, bans, a seed (:mod:`symformer.example.decoding`).
    decoding: Decoding | None = None
    positional_encoding_base: sympy.Rational = DEFAULT_BASE
    #: RoPE's given frequencies (``rope_theta``, 1 x d_k/2: pair i of position m turns by
    #: m theta_i) or angles (``rope_angles``, a row per position, a column per pair);
    #: None: theta_i = base^(-2i/d_k).
    rope_theta: sympy.Matrix | None = None
    rope_angles: sympy.Matrix | None = None
    #: The vocabulary words that have an embedding row, in vocabulary order (the rows of
    #: ``embeddings``); None: every word (``embeddings`` given as a table keyed by word
    #: may leave out words the sentence does not use).
    embedded_vocab: tuple[str, ...] | None = None
    #: The learned table (``positional_encoding = "learned"``): one row per position.
    positional_embeddings: sympy.Matrix | None = None
    final_norm: FinalNorm | None = None
    #: A decoder-only language model's head (``[lm_head]``).
    lm_head: LMHead | None = None
    #: The optional ``[loss]`` table, see :mod:`symformer.example.loss`.
    loss: Loss | None = None
    #: A classification or regression head (``[head]``, :mod:`symformer.example.head`).
    head: OutputHead | None = None
    #: An optimiser lesson: a scalar objective of named parameters (``[objective]``).
    objective: GivenObjective | None = None
    #: The optional ``[stages]`` table: stages lessons print, asked for by name
    #: (:mod:`symformer.example.stages`).
    stages: LessonStages | None = None
    #: True: ``embeddings`` holds the example's given input rows (``inputs``), one per
    #: token, read as they are (no vocabulary lookup); ``tokens`` only label them.
    given_inputs: bool = False
    #: True: no input rows, only the positional encoding (``positions``, ``d_model``):
    #: its table is the input (``embeddings`` is zeros, never shown).
    positions_only: bool = False
    #: An example made of one attention step on given Q, K and V (``[attention]``).
    attention: GivenAttention | None = None
    #: BERT's token-type (segment) table, a row per type, added to each token's
    #: embedding; ``segments`` gives each token's type (0-based).  None: no token types.
    token_type_embeddings: sympy.Matrix | None = None
    segments: tuple[int, ...] = ()
    #: A normalisation of the input rows before the first block (``[embedding_norm]``,
    #: BERT's embedding LayerNorm); its weights are ``gamma_f``, ``beta_f``.
    embedding_norm: FinalNorm | None = None

    def __repr__(self) -> str:
        """One line: the sentence, the shape, how many weights (never the weights)."""
        from symformer.example.summary import example_repr

        return example_repr(self)

    def _repr_html_(self) -> str:
        """A notebook's display: the example's shape, weights' summary and tokens."""
        from symformer.example.summary import example_html

        return example_html(self)

    @property
    def d_model(self) -> int:
        """Width of the embeddings and of every block's input and output."""
        return self.embeddings.cols

    @property
    def token_ids(self) -> tuple[int, ...]:
        """Vocabulary index of each token of the sentence (given input rows: the row of
        each position, the tokens being only labels)."""
        if self.given_inputs:
            return tuple(range(len(self.tokens)))
        return tuple(self.vocab.index(t) for t in self.tokens)

    @property
    def table_vocab(self) -> tuple[str, ...]:
        """The words of the embedding table's rows, in order (the vocabulary, or the
        words given a row)."""
        return self.vocab if self.embedded_vocab is None else self.embedded_vocab

    @property
    def embedding_ids(self) -> tuple[int, ...]:
        """Row of the embedding table of each token of the sentence."""
        if self.given_inputs:
            return self.token_ids
        return tuple(self.table_vocab.index(t) for t in self.tokens)


# -- the optional tables' parts (read by example/decoder.py, loss.py, stages.py) ------

@dataclass(frozen=True, kw_only=True)
class DecoderLayer(Block):
    """One decoder block: masked self-attention, cross-attention, feed-forward.

    Attribute names match :class:`~symformer.example.schema.Layer` where the meaning
    is the same, so the encoder's stage builders (LayerNorm, FFN) apply unchanged;
    ``gamma_k``/``beta_k`` belong to the k-th Add & Norm (k = 1, 2, 3).
    """

    self_heads: tuple[Head, ...]
    cross_heads: tuple[Head, ...]
    W_O_self: sympy.Matrix | None  # None: plain concatenation
    W_O_cross: sympy.Matrix | None
    gamma_3: sympy.Matrix
    beta_3: sympy.Matrix
    b_O_self: sympy.Matrix | None = None  # 1 x d_model
    b_O_cross: sympy.Matrix | None = None


@dataclass(frozen=True)
class Decoder:
    """The target side: tokens so far, vocabulary, embeddings, blocks, output projection."""

    tokens: tuple[str, ...]
    vocab: tuple[str, ...]
    embeddings: sympy.Matrix  # len(vocab) x d_model
    layers: tuple[DecoderLayer, ...]
    W_vocab: sympy.Matrix | None = None  # d_model x len(vocab)
    positional_encoding: str = "sinusoidal"
    #: False: self-attention sees every target position (PyTorch without tgt_mask).
    causal: bool = True
    #: A normalisation after the last decoder block (``final_norm = true`` in the
    #: ``[decoder]``; PyTorch's ``TransformerDecoder(norm=...)``).
    final_norm: FinalNorm | None = None

    @property
    def token_ids(self) -> tuple[int, ...]:
        """Vocabulary index of each target token."""
        return tuple(self.vocab.index(t) for t in self.tokens)

    def estimated_work(self, n_source: int) -> int:
        """Multiply-adds of the decoder's forward pass over ``n_source`` encoder rows
        (the memory's width taken as the decoder's: an estimate)."""
        n, d = len(self.tokens), self.embeddings.cols
        work = n * d
        for layer in self.layers:
            for heads, keys in ((layer.self_heads, n), (layer.cross_heads, n_source)):
                for h in heads:
                    work += (n + 2 * keys) * d * h.d_k + n * keys * (h.d_k + h.d_v + 2)
                work += n * sum(h.d_v for h in heads) * d
            work += 2 * n * d * layer.d_ff + 12 * n * d
        if self.W_vocab is not None:
            work += n * d * len(self.vocab) + 2 * n * len(self.vocab)
        return work


#: A cross-entropy target meaning "no target at this position" (PyTorch's ignore_index).
NO_TARGET = ""


@dataclass(frozen=True)
class Loss:
    """A loss: ``kind`` with its exact ``target`` matrix (mse) or ``targets`` tokens,
    its ``reduction`` and the ``positions`` that have a target (None: every one); or
    (``kind = "upstream"``) a ``gradient`` given at the named ``stage``."""

    kind: str
    where: str
    target: sympy.Matrix | None = None
    targets: tuple[str, ...] | None = None
    reduction: str = "mean"
    positions: tuple[int, ...] | None = None
    stage: str | None = None
    gradient: sympy.Matrix | None = None

    def target_ids(self, vocab: Sequence[str], positions: int) -> tuple[int | None, ...]:
        """The targets as indices into ``vocab``, one per row of the probabilities (None:
        no target there), checked against the probabilities' vocabulary and number of
        rows (InputError naming the file and key otherwise)."""
        return check_targets(self.targets, vocab, positions, self.where, self.positions)


def check_targets(targets: Sequence[str], vocab: Sequence[str], positions: int,
                  where: str, rows: Sequence[int] | None = None) -> tuple[int | None, ...]:
    """Each target token's index in ``vocab`` (None for the no-target marker ``""``), one
    per position: ``targets`` gives every position, or those of ``rows`` in order."""
    if rows is None and len(targets) != positions:
        raise InputError(f"{where}: targets has {len(targets)} entries, expected {positions} "
                         f"(one target token per row of the probabilities; \"\" for none, "
                         f"or give positions = [...])")
    if rows is not None and any(r >= positions for r in rows):
        raise InputError(f"{where}: positions {list(rows)}: the probabilities have "
                         f"{positions} rows (0 to {positions - 1})")
    if NO_TARGET in vocab and NO_TARGET in targets:
        raise InputError(f"{where}: the vocabulary has the token \"\", so \"\" cannot mean "
                         f"\"no target\"; give positions = [...] instead")
    for k, token in enumerate(targets):
        if token != NO_TARGET and token not in vocab:
            raise InputError(f"{where}: targets entry {k} {token!r} is not in the "
                             f"vocabulary {list(vocab)}")
    ids = [None if t == NO_TARGET else vocab.index(t) for t in targets]
    if rows is not None:
        full: list[int | None] = [None] * positions
        for r, t in zip(rows, ids):
            full[r] = t
        ids = full
    if all(t is None for t in ids):
        raise InputError(f"{where}: no position has a target (every targets entry is \"\")")
    return tuple(ids)


@dataclass(frozen=True)
class StageRequest:
    """One asked-for stage: the stage it is about and its row (None: every row)."""

    stage: str
    row: int | None
    text: str  # as written, for messages


@dataclass(frozen=True)
class LessonStages:
    """What ``[stages]`` asks for (an example without the table asks for nothing)."""

    per_position_loss: bool = False
    output_moments: bool = False
    jacobian: tuple[StageRequest, ...] = ()
    products: tuple[StageRequest, ...] = ()
    where: str = ""


@dataclass(frozen=True)
class Decoding:
    """A decoding rule (every field optional; all defaults: today's greedy argmax).

    ``forced`` maps a step (1-based) to the token that step must produce (every other
    token is banned there, Hugging Face's ``forced_decoder_ids``); ``steps``: the tokens
    ``check`` generates to reach a claimed ``stepN.*`` stage (``generate --steps`` wins).
    """

    temperature: Any = None  # sympy.Rational > 0
    top_k: int | None = None
    top_p: Any = None  # 0 < p <= 1
    min_p: Any = None  # 0 <= min_p <= 1
    repetition_penalty: Any = None  # > 0
    banned: tuple[str, ...] = ()
    min_new_tokens: int = 0
    stop: tuple[str, ...] = ()
    forced: tuple[tuple[int, str], ...] = field(default=())
    seed: int | None = None
    steps: int | None = None

    @property
    def sampling(self) -> bool:
        """True when the next token is drawn (a seed is given), not the argmax."""
        return self.seed is not None

    @property
    def plain(self) -> bool:
        """True when nothing but the greedy argmax is asked (today's ``generate``)."""
        return all(getattr(self, f.name) == f.default for f in fields(self)
                   if f.name not in ("steps", "stop"))

    def forced_at(self, step: int) -> str | None:
        """The token step ``step`` (1-based) must produce, if any."""
        return dict(self.forced).get(step)
