"""The decoder, stage by stage, and the exact choice of the next token.

A decoder block reads in :func:`decoder_block`: masked self-attention (always
causal), cross-attention (queries from the decoder, keys and values from the
encoder's ``output``), feed-forward; each sub-layer is wrapped in a residual
connection and a LayerNorm, post-norm ``LN(x + F(x))`` or pre-norm ``x + F(LN(x))``
as in the encoder.  With ``W_vocab`` the decoder ends in ``logits``,
``probabilities`` (softmax over the vocabulary) and ``next_token``.

``next_token`` is the argmax of the last position's logits, decided exactly: balls
that separate the largest logit from the others decide it; logits that no
precision separates are proved equal exactly (their local formulas, then their
closed forms) and reported as a tie.  Float noise never picks a winner.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import sympy
from flint import arb

from symformer.engine import ops
from symformer.engine.arbmath import ArbMatrix
from symformer.engine.encoder import (
    add_norm,
    derive,
    feed_forward,
    input_stages,
    layer_norm,
    multi_head_attention,
    residual,
)
from symformer.engine.graph import Derivation, _is_zero
from symformer.engine.rounding import ball_bounds
from symformer.errors import ClosedFormTooLarge, InputError, UndecidedError
from symformer.example.decoder import END_TOKEN, DecoderLayer
from symformer.example.schema import Example

#: Doublings of the precision (from 128 bits) before an argmax is declared undecidable.
_MAX_DOUBLINGS = 6
#: Size limit of the closed forms compared when proving two logits equal.
_TIE_MAX_OPS = 800
#: Stages unfolded (local formulas substituted) when proving two logits equal.
_TIE_UNFOLD = 12


def decoder_stages(g: Derivation, memory: str = "output") -> str:
    """Append the decoder's stages to ``g``; cross-attention reads ``memory``.

    Returns the name of the last stage added.  Every stage added is marked
    ``side="decoder"``.
    """
    dec = g.example.decoder
    before = set(g.stages)
    tokens = dec.tokens
    x = input_stages(g, "decoder.", tokens, dec.embeddings, dec.token_ids,
                     dec.positional_encoding)
    for number, layer in enumerate(dec.layers, start=1):
        x = decoder_block(g, number, x, layer, memory)
    last = g.add("decoder.output", "output", ops.Identity(), (x,), tokens, g[x].cols)
    if dec.W_vocab is not None:
        logits = g.add("logits", "logits", ops.Affine(dec.W_vocab), (last,), tokens, dec.vocab)
        g.add("probabilities", "probabilities", ops.Softmax(), (logits,), tokens, dec.vocab)
        last = g.add("next_token", "next_token", ArgmaxIndicator(_TieProver(g, logits)),
                     (logits,), tokens[-1:], dec.vocab)
    for name in set(g.stages) - before:
        g.stages[name].side = "decoder"
    return last


def decoder_block(g: Derivation, number: int, x: str, layer: DecoderLayer, memory: str) -> str:
    """One block: masked self-attention, cross-attention over ``memory``, feed-forward."""
    p = f"decoder.layer{number}"

    def self_attention(h: str) -> str:
        return multi_head_attention(g, p, h, layer, number, heads=layer.self_heads,
                                    W_O=layer.W_O_self, causal=True, head_prefix="self.",
                                    group="self")

    def cross_attention(h: str) -> str:
        return multi_head_attention(g, p, h, layer, number, heads=layer.cross_heads,
                                    W_O=layer.W_O_cross, kv=memory, causal=False,
                                    head_prefix="cross.", group="cross")

    def ffn(h: str) -> str:
        return feed_forward(g, p, h, layer, number)

    for k, sublayer in enumerate((self_attention, cross_attention, ffn), start=1):
        if layer.norm == "post":  # LN(x + Sublayer(x))
            x = add_norm(g, f"{p}.add_norm{k}", x, sublayer(x), layer, k, number)
        else:  # x + Sublayer(LN(x))
            normed = layer_norm(g, f"{p}.norm{k}", x, layer, k, number)
            x = residual(g, f"{p}.add_norm{k}", x, sublayer(normed), number)
    return x


# -- the next token ----------------------------------------------------------------

class _TieProver:
    """Proves logits of one row exactly equal (results cached per pair).

    The cheap proof works on formulas alone and never evaluates anything, so the
    ``next_token`` stage can use it while the graph is being evaluated; the closed
    forms (which may decide ReLU branches by evaluating) are tried only by
    :func:`argmax`, after every precision failed to separate the logits.
    """

    def __init__(self, g: Derivation, logits: str) -> None:
        self.g, self.logits = g, logits
        self._by_formula: dict[tuple[int, int, int], bool] = {}
        self._by_closed_form: dict[tuple[int, int, int], bool] = {}

    def equal(self, row: int, a: int, b: int, closed_forms: bool = False) -> bool:
        """True only when logits[row, a] = logits[row, b] is proved exactly."""
        key = (row, min(a, b), max(a, b))
        if key not in self._by_formula:
            self._by_formula[key] = self._prove_by_formula(row, a, b)
        if self._by_formula[key] or not closed_forms:
            return self._by_formula[key]
        if key not in self._by_closed_form:
            self._by_closed_form[key] = self._prove_by_closed_form(row, a, b)
        return self._by_closed_form[key]

    def _prove_by_formula(self, row: int, a: int, b: int) -> bool:
        # Zero as a formula over earlier stages' symbols: equal whatever their values.
        local = self.g.local(self.logits)
        return self.g.prove_zero(local[row, a] - local[row, b], max_ops=_TIE_MAX_OPS,
                                 max_unfold=_TIE_UNFOLD, decide_relu=False)

    def _prove_by_closed_form(self, row: int, a: int, b: int) -> bool:
        try:
            return _is_zero(self.g.closed_form(self.logits, row, a, _TIE_MAX_OPS)
                            - self.g.closed_form(self.logits, row, b, _TIE_MAX_OPS))
        except ClosedFormTooLarge:
            return False

    def argmax(self, balls: Sequence[arb], row: int,
               closed_forms: bool = False) -> frozenset[int] | None:
        """The argmax set decided from one row of balls, or None if undecided here."""
        if not all(x.is_finite() for x in balls):
            return None  # an overflow or 0/0 upstream: more precision, or an UndecidedError
        bounds = [ball_bounds(x) for x in balls]
        best_low = max(low for low, _ in bounds)
        candidates = sorted(j for j, (_, high) in enumerate(bounds) if high >= best_low)
        if all(self.equal(row, candidates[0], j, closed_forms) for j in candidates[1:]):
            return frozenset(candidates)
        return None


@dataclass(frozen=True, eq=False)
class ArgmaxIndicator(ops.Op):
    """1 for every vocabulary entry whose last-position logit is maximal, 0 elsewhere.

    One 1 names the next token; several 1s are an exact tie.  A row whose argmax the
    balls cannot decide yet gets the ball [0, 1] on its candidates, so the engine
    raises the precision.
    """

    prover: _TieProver = field(repr=False)

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        logits = args[0]
        winners = argmax(self.prover.g, self.prover.logits, logits.rows - 1)
        return sympy.Matrix([[int(j in winners) for j in range(logits.cols)]])

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        row = len(args[0]) - 1
        balls = args[0][row]
        winners = self.prover.argmax(balls, row)
        if winners is not None:
            return [[arb(int(j in winners)) for j in range(len(balls))]]
        undecided = arb(0).union(arb(1))
        if not all(x.is_finite() for x in balls):
            return [[undecided for _ in balls]]
        best_low = max(ball_bounds(x)[0] for x in balls)
        return [[undecided if ball_bounds(x)[1] >= best_low else arb(0) for x in balls]]


def argmax(g: Derivation, logits: str, row: int) -> frozenset[int]:
    """The exact argmax set of one row of a logits stage (several entries: a tie)."""
    op = g["next_token"].op if "next_token" in g else None
    prover = op.prover if isinstance(op, ArgmaxIndicator) else _TieProver(g, logits)
    prec = 128
    for doubling in range(_MAX_DOUBLINGS):
        last = doubling == _MAX_DOUBLINGS - 1
        winners = prover.argmax(g.evaluate(prec)[logits][row], row, closed_forms=last)
        if winners is not None:
            return winners
        prec *= 2
    raise UndecidedError(
        f"cannot decide the largest entry of {logits}[{row}]: some logits agree to "
        f"{prec // 2} bits but could not be proved equal"
    )


@dataclass(frozen=True)
class NextToken:
    """The exact argmax of the last position: one token, or the tokens tied for it."""

    tokens: tuple[str, ...]
    indices: tuple[int, ...]

    @property
    def is_tie(self) -> bool:
        """True when several tokens have exactly the same largest logit."""
        return len(self.tokens) > 1

    @property
    def token(self) -> str | None:
        """The winning token (None for a tie)."""
        return None if self.is_tie else self.tokens[0]

    def __str__(self) -> str:
        if self.is_tie:
            return "tie between " + ", ".join(map(repr, self.tokens))
        return self.tokens[0]


def next_token(g: Derivation) -> NextToken:
    """The next token of a derivation with ``W_vocab``, decided exactly."""
    if "next_token" not in g:
        raise InputError(
            f"{g.example.source}: no next token: the example needs a [decoder] table "
            f"with W_vocab (see symformer/examples/encoder_decoder.toml)"
        )
    vocab = g["next_token"].cols
    winners = sorted(argmax(g, "logits", len(g["logits"].rows) - 1))
    return NextToken(tuple(vocab[j] for j in winners), tuple(winners))


@dataclass(frozen=True)
class Step:
    """One step of greedy generation: the target tokens read and the exact choice."""

    tokens: tuple[str, ...]
    derivation: Derivation
    choice: NextToken

    def probabilities(self, decimals: int) -> list[str]:
        """Certified probabilities of every vocabulary entry at the last position."""
        return self.derivation["probabilities"].values(decimals=decimals)[-1]


def generate(example: Example, steps: int, max_work: int | None = None,
             on_step: Callable[[Step], None] | None = None) -> list[Step]:
    """Greedy generation: append the exact argmax ``steps`` times, re-deriving each time.

    Stops early after the end token ``</s>`` (when the vocabulary has it) and at a
    tie, which is reported, never broken.  ``on_step`` sees each step as it is done.
    """
    if example.decoder is None or example.decoder.W_vocab is None:
        raise InputError(
            f"{example.source}: generation needs a [decoder] table with W_vocab "
            f"(see symformer/examples/encoder_decoder.toml)"
        )
    done: list[Step] = []
    for _ in range(steps):
        g = derive(example, max_work=max_work)
        step = Step(example.decoder.tokens, g, next_token(g))
        done.append(step)
        if on_step is not None:
            on_step(step)
        if step.choice.is_tie or step.choice.token == END_TOKEN:
            break
        tokens = example.decoder.tokens + (step.choice.token,)
        example = dataclasses.replace(
            example, decoder=dataclasses.replace(example.decoder, tokens=tokens))
    return done
