"""Generation: append the exact next token, re-deriving each time.

Greedy (the exact argmax) unless a decoding rule is given (``[decoding]`` table or
``generate``'s flags, :mod:`symformer.example.decoding`): then each step's decision
is a set of stages (:mod:`symformer.blocks.decoding`), and :func:`run_derivation`
gathers every step's stages in one derivation as ``step1.*``, ``step2.*`` (what
``check`` judges claims on ``step2.kept`` against).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from symformer.blocks.decoding import StepDecoding, add_decoding, needs_decoding
from symformer.blocks.encoder import derive
from symformer.blocks.kv_cache import add_kv_cache
from symformer.engine.argmax import NextToken, next_token
from symformer.engine.graph import Derivation
from symformer.errors import InputError
from symformer.example.decoder import END_TOKENS
from symformer.example.decoding import Decoding, check_tokens
from symformer.example.schema import Example


@dataclass(frozen=True)
class Step:
    """One step of greedy generation: the target tokens read and the exact choice."""

    tokens: tuple[str, ...]
    derivation: Derivation
    choice: NextToken
    #: The decision's stages and notes (None: the plain argmax of the logits).
    decoding: StepDecoding | None = None

    def probabilities(self, decimals: int) -> list[str]:
        """Certified probabilities of every vocabulary entry at the last position."""
        return self.derivation["probabilities"].values(decimals=decimals)[-1]


def generate(example: Example, steps: int, max_work: int | None = None,
             on_step: Callable[[Step], None] | None = None,
             decoding: Decoding | None = None, decimals: int = 4) -> list[Step]:
    """Append the chosen next token ``steps`` times, re-deriving each time.

    ``decoding`` (default: the example's ``[decoding]``) is the rule; without one, or
    with only defaults, the exact argmax of the logits (greedy).  Stops early after
    an end token (``</s>``, ``<eos>``, ``<EOS>``, ``<|endoftext|>``, ``[EOS]``) or a
    ``stop`` token and at a
    tie, which is reported, never broken.  ``on_step`` sees each step as it is done;
    ``decimals``: the margins' digits in the decisions' notes.
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
    settings = decoding if decoding is not None else example.decoding
    vocab = example.vocab if language_model else example.decoder.vocab
    ends = (*END_TOKENS, *(settings.stop if settings is not None else ()))
    if settings is not None:
        check_tokens(settings, vocab, f"{example.source}: decoding")
    done: list[Step] = []
    for number in range(1, steps + 1):
        g = derive(example, causal=True if language_model else None, max_work=max_work)
        tokens = example.tokens if language_model else example.decoder.tokens
        if needs_decoding(settings):
            decided = add_decoding(g, settings, vocab, tokens, number, ends, decimals)
            step = Step(tokens, g, NextToken(tuple(vocab[j] for j in decided.chosen),
                                             decided.chosen), decided)
        else:
            step = Step(tokens, g, next_token(g))
        done.append(step)
        if on_step is not None:
            on_step(step)
        if step.choice.is_tie or step.choice.token in ends:
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


def run_derivation(steps: list[Step], kv_cache: bool = False) -> Derivation:
    """Every step's stages in one derivation, step t's named ``step{t}.<stage>``
    (1-based: ``step2.kept`` is the second token's decision); ``kv_cache``: with the
    KV cache's stages (``step2.layer1.head1.K_cache``, :mod:`symformer.blocks.kv_cache`)."""
    first = steps[0].derivation
    run = Derivation(first.example, first.causal)
    for t, step in enumerate(steps, start=1):
        def rename(name: str, t: int = t) -> str:
            return f"step{t}.{name}"
        for s in step.derivation:
            run.add(rename(s.name), s.kind, s.op.for_graph(run, rename),
                    [rename(i) for i in s.inputs], s.rows, s.cols, layer=s.layer,
                    head=s.head, side=s.side)
    if kv_cache:
        add_kv_cache(run, len(steps))
    return run


def generation_run(example: Example, stage: str, max_work: int | None = None) -> Derivation:
    """The run ``check`` judges a claim on ``stage`` (``step2.kept``,
    ``step2.layer1.head1.K_cache``) against: the example's ``[decoding]`` rule for its
    ``steps`` (default: the claimed stage's step), with the KV cache's stages."""
    settings = example.decoding
    wanted = int(stage.split(".")[0].removeprefix("step") or 0)
    steps = generate(example, settings.steps or wanted, max_work=max_work)
    if len(steps) < wanted:
        raise InputError(f"{stage}: generation stopped after {len(steps)} step"
                         f"{'' if len(steps) == 1 else 's'} (an end token or a tie)")
    return run_derivation(steps, kv_cache=True)
