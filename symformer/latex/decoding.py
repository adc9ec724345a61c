"""The notes' sections on choosing the next token and on the KV cache (an example with a
``[decoding]`` table: ``decoding_lesson``).

:func:`decoding_sections` runs the example's decoding rule (``[decoding] steps``, or
``export --steps``) and gives, per step, the decision's stages as one table (the
logits, the probabilities after temperature, the masses above each token, the kept
set, the cumulative sums; the uniform number of a draw) with the decision in words and
its certified margins (:attr:`symformer.blocks.decoding.StepDecoding.notes`); then the
cache growing: each causal head's keys and values at the prefill and each decode
step's appended row, the one new query row, and what the engine proved (cached =
uncached).  The slides take the same tables (:mod:`symformer.slides.decoding`).
"""

from __future__ import annotations

from dataclasses import dataclass

from symformer.blocks.generate import Step, generate, run_derivation
from symformer.blocks.kv_cache import CacheProof, cached_heads, prove_cache
from symformer.engine.graph import Derivation
from symformer.latex.blocks import Cell, Fragment, Heading, Prose, Table
from symformer.latex.escape import word_label
from symformer.latex.numbers import decimal
from symformer.latex.outline import Section
from symformer.latex.tables import heat_of
from symformer.worked.numbers import printed_values

#: The decision stages shown in a step's table, in order (those the step has).
SHOWN = ("next_logits", "allowed", "penalized", "logits_T", "probabilities_T",
         "top_k.rank", "top_k.kept", "top_p.mass_above", "top_p.kept", "min_p.ratio",
         "min_p.kept", "kept", "distribution", "cumulative", "draw", "choice")
#: Steps run when neither ``[decoding] steps`` nor ``--steps`` says.
DEFAULT_STEPS = 3


@dataclass
class Run:
    """The example's generation under its rule: the steps, the run's stages
    (``step2.kept``, ``step2.layer1.head1.K_cache``), the heads cached and the proof."""

    steps: list[Step]
    run: Derivation
    heads: list[str]
    proof: CacheProof


def decoding_run(g: Derivation, steps: int = 0, max_work: int | None = None
                 ) -> Run | None:
    """The run the notes and slides show (None: the example has no ``[decoding]``)."""
    settings = g.example.decoding
    if settings is None:
        return None
    done = generate(g.example, steps or settings.steps or DEFAULT_STEPS, max_work=max_work)
    run = run_derivation(done, kv_cache=True)
    heads = cached_heads(run)
    return Run(done, run, heads, prove_cache(run, len(done), heads))


def _latex(value: str) -> str:
    return r"\infty" if value == "inf" else decimal(value)


def decision_table(r: Run, t: int, decimals: int, shown: tuple[str, ...] = SHOWN) -> Table:
    """Step ``t``'s decision stages (those of ``shown`` it has), one row each, one
    column per vocabulary entry."""
    names = [f"step{t}.{s}" for s in shown if f"step{t}.{s}" in r.run.stages]
    vocab = r.run[names[0]].cols
    rows = []
    for name in names:
        values = printed_values(r.run[name], decimals)[0]
        heat = name.endswith(("probabilities_T", "distribution"))
        rows.append(tuple(Cell(_latex(v), heat=heat_of(v) if heat else None)
                          for v in values))
    step = r.steps[t - 1]
    single = [(f"step{t}.nucleus_mass", "The nucleus's mass", decimals),
              (f"step{t}.uniform", "The uniform number u", 17)]
    u = "".join(f" {what} = {r.run[name].values(decimals=d)[0][0]} ({name})."
                for name, what, d in single if name in r.run.stages)
    return Table(
        caption=f"Step {t}: the decision on \u201c{' '.join(step.tokens)}\u201d, stage by "
                f"stage, each row labelled by the address a claim names it by (stage = "
                f"\"{names[-1]}\"), correctly rounded to {decimals} decimals; kept: 1 in, "
                f"0 out.{u}",
        label=f"tab:decoding-step{t}",
        row_labels=tuple(enumerate(names)),
        col_labels=tuple(map(word_label, vocab)),
        cells=tuple(rows), row_header=("", "claimed as"))


def cache_table(r: Run, t: int, head: str, decimals: int) -> Table:
    """Step ``t``'s key and value cache of ``head`` side by side, the appended row (the
    prompt, at the prefill) highlighted, and the one new query row."""
    p = f"step{t}.{head}"
    K, V, q = r.run[f"{p}.K_cache"], r.run[f"{p}.V_cache"], r.run[f"{p}.q_new"]
    k, v = printed_values(K, decimals), printed_values(V, decimals)
    new = printed_values(q, decimals)[0]
    blank = ("",) * len(new)
    cells = tuple(tuple(Cell(_latex(x) if x else x)
                        for x in (*k[i], *v[i], *(new if i == len(k) - 1 else blank)))
                  for i in range(len(k)))
    what = ("the prefill: the prompt's keys and values" if t == 1 else
            f"step {t - 1}'s cache with the new token's key and value row appended")
    return Table(
        caption=f"Step {t}, {head}: {what}; q_new is the one new query row (its scores "
                f"read the whole cache). Claimed as {p}.K_cache, {p}.V_cache and "
                f"{p}.q_new.",
        label=f"tab:kv-{t}-{head.replace('.', '-')}",
        row_labels=tuple(enumerate(K.rows)),
        col_labels=(*(rf"K_{{{j}}}" for j in range(K.shape[1])),
                    *(rf"V_{{{j}}}" for j in range(V.shape[1])),
                    *(rf"q_{{{j}}}" for j in range(q.shape[1]))),
        cells=cells, highlight_row=len(k) - 1)


def rule_text(r: Run) -> str:
    """The rule in one sentence."""
    s = r.run.example.decoding
    parts = [f"{k.replace('_', ' ')} {v}" for k, v in (
        ("temperature", s.temperature), ("top_k", s.top_k), ("top_p", s.top_p),
        ("min_p", s.min_p), ("repetition_penalty", s.repetition_penalty)) if v is not None]
    if s.min_new_tokens:
        parts.append(f"no end token for the first {s.min_new_tokens} steps")
    parts.append(f"drawn with seed {s.seed}" if s.seed is not None else "the exact argmax")
    generated = [st.choice.token for st in r.steps if not st.choice.is_tie]
    return ("The example's decoding rule ([decoding]): " + ", ".join(parts)
            + ". Each decision is exact: a tie or a mass exactly at p is proved and the "
            "rule that breaks it named, and each decision carries its certified margin. "
            "Generated: " + " ".join(r.steps[0].tokens + tuple(generated)) + ".")


def decoding_sections(g: Derivation, steps: int, decimals: int,
                      max_work: int | None = None) -> list:
    """The notes' two sections (empty without a ``[decoding]`` table)."""
    r = decoding_run(g, steps, max_work)
    if r is None:
        return []
    out: list = [Heading("Choosing the next token", 1), Prose((rule_text(r),))]
    for t, step in enumerate(r.steps, start=1):
        notes = () if step.decoding is None else tuple(
            line for note in step.decoding.addressed(t) for line in note.split("\n"))
        out.append(Section(Heading(f"Step {t}", 2), [Fragment(
            f"decoding-step{t}", [*(Prose((n.strip(),)) for n in notes),
                                  decision_table(r, t, decimals)])]))
    if not r.heads:
        return out
    proved = ("The engine proved, exactly, that the cached run equals the uncached one: "
              "every cached key and value row is the full pass's, and each step's new "
              "output row is the full pass's last row (formulas compared, not values), so "
              "a difference a framework shows is rounding." if r.proof.equal else
              "Not proved: " + "; ".join(r.proof.failed) + ".")
    out += [Heading("The KV cache", 1),
            Prose(("The prefill computes the prompt's keys and values once; each decode "
                   "step appends one key row and one value row per head and computes one "
                   "new query row, whose scores read the whole cache. " + proved,))]
    head = r.heads[0]
    for t in range(1, len(r.steps) + 1):
        out.append(Section(Heading(f"Step {t}: {head}", 2), [Fragment(
            f"kv-step{t}", [cache_table(r, t, head, decimals)])]))
    return out
