"""The decoder's part of the document: its headings, the next token, greedy generation.

The decoder's stages reuse the encoder's kinds, so their equations, tables and
worked examples come from the same builders; what differs is how they are
grouped (masked self-attention, cross-attention, three Add & Norm sub-layers),
which row a worked example follows (the target token, or a source token for the
cross-attention keys and values), and two things only a decoder has: the exact
next token and the table of next-token probabilities per generation step.
"""

from __future__ import annotations

from symformer.blocks import Step as GenerationStep
from symformer.blocks import generate
from symformer.engine import Derivation, Stage
from symformer.latex.blocks import Cell, Fragment, Heading, Math, Prose, Table
from symformer.latex.equations import sublayer
from symformer.latex.escape import word_label
from symformer.latex.outline import Section
from symformer.latex.tables import heat_of
from symformer.words import plural

#: Groups (second-level headings) of the decoder's steps by their declared block part
#: (:attr:`~symformer.ops.base.Operation.block_part`), where not by sub-layer; the
#: output's are told apart by what its steps declare (:func:`group`).
GROUPS = {"input": "Embeddings and positional encoding", "ffn": "Feed-forward network"}
_ATTENTION = {"self": "Masked self-attention", "cross": "Cross-attention"}
_MULTI_HEAD = {"self": "Masked multi-head self-attention",
               "cross": "Multi-head cross-attention"}


def part(stage: Stage) -> str:
    """The decoder section a stage belongs to."""
    if stage.layer:
        return f"Decoder layer {stage.layer}"
    return "Decoder input" if stage.op.block_part == "input" \
        else "Decoder output and next token"


def group(stage: Stage) -> str:
    """The decoder subsection a stage belongs to."""
    which = sublayer(stage)
    if which and stage.op.block_part == "head":
        return f"{_ATTENTION[which]} head {stage.head}"
    if which:
        return _MULTI_HEAD[which]
    op = stage.op
    if op.block_part == "output":
        return "Decoder output" if op.final else "The exact argmax" if op.picks_token \
            else "Logits and probabilities"
    if op.block_part in GROUPS:
        return GROUPS[op.block_part]
    number = stage.name.split(".")[2].removeprefix("add_").removeprefix("norm")
    return f"Add & Norm {number}"  # residual, mean, variance, layer_norm of sub-layer k


def title(stage: Stage) -> str:
    """The heading of a decoder stage: its operation's title, and where keys come from."""
    text = stage.op.symbol.title
    if sublayer(stage) == "cross" and stage.op.role in ("keys", "values"):
        text += " (from the encoder output)"
    return text


def caption_note(stage: Stage) -> str:
    """What a cross-attention table's rows and columns are (empty for other stages)."""
    if sublayer(stage) == "cross" and stage.op.columns == "keys":
        return ". Rows: target tokens (queries); columns: source tokens (keys)"
    return ""


def worked_row(stage: Stage, source: int, target: int) -> int:
    """The row a worked example follows: the target token, or the source token for
    the cross-attention keys and values (whose rows are the source tokens)."""
    if stage.op.jumps:  # the next token: one row
        return 0
    if sublayer(stage) == "cross" and stage.op.role in ("keys", "values"):
        return source
    return target if stage.side == "decoder" else source


def next_token_prose(g: Derivation) -> Prose:
    """The engine's exact decision, in words."""
    choice = g.next_token()
    last = len(g["logits"].rows) - 1
    if choice.is_tie:
        tied = ", ".join(f"\u201c{w}\u201d" for w in choice.tokens)
        return Prose((f"No single next token: the logits of {tied} at the last position "
                      f"({last}) are proved exactly equal, an exact tie, and a tie is "
                      "never broken.",))
    word = choice.token
    return Prose((f"The next token is \u201c{word}\u201d: its logit at the last position "
                  f"({last}) is the largest, decided exactly (certified balls separate it "
                  "from every other logit), so ", Math(rf"\hat{{t}} = {word_label(word)}"),
                  ".",))


def _choice_label(step: GenerationStep) -> str:
    if step.choice.is_tie:
        return r"\text{tie: }" + ", ".join(word_label(w) for w in step.choice.tokens)
    return word_label(step.choice.token)


def generation_table(steps: list[GenerationStep], decimals: int) -> Table:
    """One row per step: the target so far, the certified probabilities, the choice."""
    vocab = steps[0].derivation["probabilities"].cols
    decoder_only = steps[0].derivation.example.decoder is None
    given = "tokens so far" if decoder_only else "source, target so far"
    rows = []
    for step in steps:
        values = step.probabilities(decimals)
        rows.append((*(Cell(v, heat=heat_of(v)) for v in values), Cell(_choice_label(step))))
    return Table(
        caption=f"Greedy generation: P(next token | {given}) at the last "
                f"position, one row per step. Values correctly rounded to {decimals} "
                "decimals; the next token is the exact argmax.",
        label="tab:generation",
        row_labels=tuple((n, " ".join(s.tokens)) for n, s in enumerate(steps, start=1)),
        col_labels=(*map(word_label, vocab), r"\text{next token}"),
        cells=tuple(rows),
        legend=("Darker: larger probability.",),
        row_header=("step", given),
    )


def generation_section(g: Derivation, steps: int, decimals: int,
                       max_work: int | None = None) -> list:
    """Greedy generation for ``steps`` steps: a heading, prose and the table fragment."""
    done = generate(g.example, steps, max_work=max_work)
    generated = [s.choice.token for s in done if not s.choice.is_tie]
    text = ("Greedy decoding appends the exact argmax token and derives everything again, "
            f"{plural(steps, 'step')} at most (stopping after \u201c</s>\u201d "
            "or at an exact tie). Generated: "
            + " ".join(done[0].tokens + tuple(generated)) + ".")
    if done[-1].choice.is_tie:
        text += (f" Stopped at step {len(done)}: exact tie between "
                 + ", ".join(f"\u201c{w}\u201d" for w in done[-1].choice.tokens) + ".")
    return [Heading("Greedy generation", 1), Prose((text,)),
            Section(Heading("Next-token probabilities per step", 2),
                    [Fragment("generation-table", [generation_table(done, decimals)])])]
