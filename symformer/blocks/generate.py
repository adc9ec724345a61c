"""Greedy generation: append the exact next token, re-deriving each time."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from symformer.blocks.encoder import derive
from symformer.engine.argmax import NextToken, next_token
from symformer.engine.graph import Derivation
from symformer.errors import InputError
from symformer.example.decoder import END_TOKEN
from symformer.example.schema import Example


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
    A decoder-only language model (``[lm_head]``) is causal and appends to its own
    sentence; it stops when a learned positional table has no row for another token.
    """
    language_model = example.lm_head is not None
    if not language_model and (example.decoder is None or example.decoder.W_vocab is None):
        raise InputError(
            f"{example.source}: generation needs a [decoder] table with W_vocab or an "
            f"[lm_head] table (see symformer/examples/encoder_decoder.toml, gpt2_style.toml)"
        )
    if language_model and example.lm_head.W_transform is not None:
        raise InputError(f"{example.source}: a masked-LM head (W_transform, BERT's) predicts "
                         f"the tokens at their own positions, not a next token: nothing to "
                         f"generate (derive its logits instead)")
    done: list[Step] = []
    for _ in range(steps):
        g = derive(example, causal=True if language_model else None, max_work=max_work)
        tokens = example.tokens if language_model else example.decoder.tokens
        step = Step(tokens, g, next_token(g))
        done.append(step)
        if on_step is not None:
            on_step(step)
        if step.choice.is_tie or step.choice.token == END_TOKEN:
            break
        example = _appended(example, step.choice.token)
        if example is None:
            break
    return done


def _appended(example: Example, token: str) -> Example | None:
    """The example with ``token`` appended to the sentence being generated (None: no room)."""
    if example.lm_head is None:
        tokens = example.decoder.tokens + (token,)
        return dataclasses.replace(example,
                                   decoder=dataclasses.replace(example.decoder, tokens=tokens))
    table = example.positional_embeddings
    if table is not None and table.rows <= len(example.tokens):
        return None  # the learned table has no row for another position
    # token types (segments): the new token continues the last one's segment
    segments = example.segments + example.segments[-1:]
    return dataclasses.replace(example, tokens=example.tokens + (token,), segments=segments)
