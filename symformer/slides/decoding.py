"""The deck's parts on choosing the next token and on the KV cache (an example with a
``[decoding]`` table): the notes' tables (:mod:`symformer.latex.decoding`), each step's
decision on a frame under a line saying it (the kept set, the token, u for a draw),
then the cache growing, a frame a step.  :func:`decoding_parts` gives them as
(title, note, stage, table) -- a section's frame when ``table`` is None -- and
:func:`symformer.slides.deck.frames` sets them as frames."""

from __future__ import annotations

from symformer.engine.graph import Derivation, Stage
from symformer.latex.blocks import Table
from symformer.latex.decoding import Run, cache_table, decision_table, decoding_run, rule_text
from symformer.latex.escape import latex_text

#: The decision stages a frame shows, at most five (the notes show them all): the
#: probabilities after temperature, the masses above, the kept set, the cumulative sums
#: and the choice.
FRAME_ROWS = ("probabilities_T", "top_p.mass_above", "kept", "cumulative", "draw", "choice")

#: One part: its frame's title, the note under it (LaTeX), the stage, its table and what
#: the frame is about for its footer (LaTeX: the step and the token chosen; not a row's
#: position, which means nothing for a decision over the vocabulary).
Part = tuple[str, str, Stage | None, Table | None, str]


def decoding_parts(g: Derivation, decimals: int) -> list[Part]:
    """The parts (none without a ``[decoding]`` table)."""
    r = decoding_run(g)
    if r is None:
        return []
    out: list[Part] = [("Choosing the next token", latex_text(rule_text(r)), None, None, "")]
    for t in range(1, len(r.steps) + 1):
        table = decision_table(r, t, decimals, FRAME_ROWS)
        out.append((f"Step {t}: the decision", latex_text(_said(r, t)),
                    r.run[table.row_labels[0][1]], table, _about(r, t)))
    if not r.heads:
        return out
    head = r.heads[0]
    out.append(("The KV cache", latex_text(
        "The prefill computes the prompt's keys and values; each decode step appends one "
        "key and one value row and computes one new query row. "
        + ("Proved: cached = uncached, exactly." if r.proof.equal else "Not proved.")),
        None, None, ""))
    for t in range(1, len(r.steps) + 1):
        K = r.run[f"step{t}.{head}.K_cache"]
        grown = ("the prompt's rows (the prefill)" if t == 1 else
                 f"{K.shape[0]} rows, the last appended at this step")
        out.append((f"Step {t}: the cache of {head}", "", K, cache_table(r, t, head, decimals),
                    latex_text(f"step {t}, {head}: the cache of {grown}")))
    return out


def _about(r: Run, t: int) -> str:
    """A decision frame's footer: the step, the sentence it extends and the token chosen."""
    step = r.steps[t - 1]
    verb = "drawn" if step.decoding is not None and step.decoding.uniform is not None \
        else "chosen"
    chosen = (str(step.choice) if step.choice.is_tie else
              f"{verb} \u201c{step.choice.token}\u201d")
    said = " ".join(step.tokens) if len(step.tokens) <= 5 else \
        "\u2026 " + " ".join(step.tokens[-4:])
    return latex_text(f"step {t}, the token after \u201c{said}\u201d: {chosen}")


def _said(r: Run, t: int) -> str:
    """A step's decision in a line: the kept set and the token, with u for a draw."""
    step = r.steps[t - 1]
    vocab = r.run[f"step{t}.next_logits"].cols
    kept = f"step{t}.kept"
    text = ""
    if kept in r.run.stages:
        row = r.run[kept].values(decimals=0)[0]
        text = "kept " + ", ".join(repr(vocab[j]) for j, v in enumerate(row) if v == "1") + "; "
    u = step.decoding.uniform if step.decoding is not None else None
    text += f"{'drawn' if u is not None else 'chosen'} {step.choice.token!r}"
    if u is not None:
        text += f" (u = {float(u):.6f}: the first token whose cumulative sum exceeds u)"
    return text + "; margins in the notes."
