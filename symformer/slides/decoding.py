"""The deck's frames on choosing the next token and on the KV cache (an example with a
``[decoding]`` table): the notes' tables (:mod:`symformer.latex.decoding`), each step's
decision on a frame under the rule's words (the kept set, the margins, the draw and
its uniform number), then the cache growing, a frame a step."""

from __future__ import annotations

from dataclasses import replace

from symformer.engine.graph import Derivation
from symformer.latex.decoding import cache_table, decision_table, decoding_run, rule_text
from symformer.latex.escape import latex_text as escape_text
from symformer.slides.deck import Frame, Options, SectionFrame, _table_only_frames

#: The decision stages a frame shows, at most five (the notes show them all): the
#: probabilities after temperature, the masses above, the kept set, the cumulative sums
#: and the choice.
FRAME_ROWS = ("probabilities_T", "top_p.mass_above", "kept", "cumulative", "draw", "choice")


def decoding_frames(g: Derivation, options: Options) -> list[Frame]:
    """The frames (none without a ``[decoding]`` table)."""
    r = decoding_run(g)
    if r is None:
        return []
    out: list[Frame] = [SectionFrame("Choosing the next token", escape_text(rule_text(r)))]
    for t in range(1, len(r.steps) + 1):
        said = _said(r, t)
        table = decision_table(r, t, options.decimals, FRAME_ROWS)
        stage = r.run[f"step{t}.{table.row_labels[0][1]}"]
        out += [replace(f, title=f"Step {t}: the decision") for f in
                _table_only_frames(stage, 0, table, escape_text(said))]
    if not r.heads:
        return out
    head = r.heads[0]
    out.append(SectionFrame("The KV cache", escape_text(
        "The prefill computes the prompt's keys and values; each decode step appends one "
        "key and one value row and computes one new query row. "
        + ("Proved: cached = uncached, exactly." if r.proof.equal else "Not proved."))))
    for t in range(1, len(r.steps) + 1):
        stage = r.run[f"step{t}.{head}.K_cache"]
        table = cache_table(r, t, head, options.decimals)
        out += [replace(f, title=f"Step {t}: the cache of {head}") for f in
                _table_only_frames(stage, 0, table, "")]
    return out


def _said(r, t: int) -> str:
    """A step's decision in a line: the kept set and the token, with u for a draw."""
    step = r.steps[t - 1]
    vocab = r.run[f"step{t}.next_logits"].cols
    kept = f"step{t}.kept"
    text = ""
    if kept in r.run.stages:
        row = r.run[kept].values(decimals=0)[0]
        text = "kept " + ", ".join(repr(vocab[j]) for j, v in enumerate(row) if v == "1") + "; "
    u = step.decoding.uniform if step.decoding is not None else None
    how = "drawn" if u is not None else "chosen"
    text += f"{how} {step.choice.token!r}"
    if u is not None:
        text += f" (u = {float(u):.6f}: the first token whose cumulative sum exceeds u)"
    return text + "; margins in the notes."
