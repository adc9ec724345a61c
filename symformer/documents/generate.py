"""What ``symformer generate`` prints: one exact decision per step (greedy, or a rule's
stages with their margins).

Built from the prepared request and the steps :func:`symformer.blocks.generate` took:
:func:`generate_text` is the table, :func:`generate_json` the ``--json`` document.
"""

from __future__ import annotations

from symformer.blocks import Step
from symformer.pipeline import Prepared


def generate_text(p: Prepared, steps: list[Step], decimals: int) -> str:
    """``symformer generate``'s output (without its final newline): the steps' table,
    its title followed by the header note."""
    return format_steps(p.example.title + p.note, steps, decimals)


def generate_json(p: Prepared, steps: list[Step], decimals: int) -> dict:
    """``symformer generate --json``'s document."""
    return as_json(p.example.title, steps, decimals)


def as_json(title: str, steps: list[Step], decimals: int) -> dict:
    """The JSON document of ``generate --json``."""
    return {
        "title": title,
        "vocab": list(steps[0].derivation["probabilities"].cols),
        "steps": [
            {"tokens": list(s.tokens), "probabilities": s.probabilities(decimals),
             "next_token": s.choice.token, "tie": list(s.choice.tokens) if s.choice.is_tie
             else None, **_decisions_json(n, s, decimals)}
            for n, s in enumerate(steps, start=1)
        ],
        "generated": [s.choice.token for s in steps if not s.choice.is_tie],
    }


def format_steps(title: str, steps: list[Step], decimals: int) -> str:
    """The steps as a table: one row per step, one column per vocabulary entry."""
    vocab = steps[0].derivation["probabilities"].cols
    rows = [[str(n), " ".join(s.tokens), *s.probabilities(decimals), str(s.choice)]
            for n, s in enumerate(steps, start=1)]
    lm = steps[0].derivation.example.lm_head is not None  # a decoder-only language model
    header = ["step", "tokens so far" if lm else "target so far", *vocab, "next token"]
    widths = [max(len(r[j]) for r in [header, *rows]) for j in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if j in (1, len(cells) - 1) else c.rjust(w)
                         for j, (c, w) in enumerate(zip(cells, widths))).rstrip()

    given = "tokens so far" if lm else "source, target so far"
    out = [f"{title}: P(next token | {given}), certified", "",
           line(header), *map(line, rows)]
    final = steps[-1]
    generated = [s.choice.token for s in steps if not s.choice.is_tie]
    out.append("")
    out.append("generated: " + " ".join(steps[0].tokens + tuple(generated)))
    if final.choice.is_tie:
        out.append(f"stopped at step {len(steps)}: exact {final.choice} (proved equal "
                   f"logits; a tie is never broken)")
    for n, s in enumerate(steps, start=1):
        if s.decoding is not None:
            out.append("")
            names = ", ".join(f"step{n}.{name}" for name in s.decoding.stages)
            out.append(f"step {n} decisions (stages {names}):")
            out.extend("  " + line for note in s.decoding.notes for line in note.split("\n"))
            out.append(f"  next token: {s.choice}")
    return "\n".join(out)


def _decisions_json(n: int, step: Step, decimals: int) -> dict:
    """A step's decision stages and notes (nothing for the plain argmax)."""
    d = step.decoding
    if d is None:
        return {}
    g = step.derivation
    return {"decoding": {
        "stages": {f"step{n}.{name}": g[name].values(decimals=decimals) for name in d.stages},
        "notes": d.notes,
        "uniform": None if d.uniform is None else f"{d.uniform.numerator}/{d.uniform.denominator}",
    }}
