"""What ``symformer generate`` prints: one exact decision per step (greedy, or a rule's
stages with their margins).

Built from the prepared request and the steps :func:`symformer.blocks.generate` took:
:func:`generate_text` is the table, :func:`generate_json` the ``--json`` document.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from symformer.blocks import Step
from symformer.blocks.kv_cache import CacheProof
from symformer.engine.graph import Derivation, Stage
from symformer.pipeline import Prepared


@dataclass
class RunExtras:
    """What ``--kv-cache`` and ``--stage`` add: the run, the cache's proof, the stages."""

    run: Derivation | None = None
    cache: CacheProof | None = None
    stages: list[Stage] = field(default_factory=list)


def generate_text(p: Prepared, steps: list[Step], decimals: int,
                  extra: RunExtras | None = None) -> str:
    """``symformer generate``'s output (without its final newline): the steps' table,
    its title followed by the header note; the cache's proof and the stages asked for."""
    out = [format_steps(p.example.title + p.note, steps, decimals)]
    if extra is not None and extra.cache is not None:
        out.append(_cache_text(extra.cache))
    for stage in (extra.stages if extra is not None else []):
        out.append(_stage_text(stage, decimals))
    return "\n\n".join(out)


def generate_json(p: Prepared, steps: list[Step], decimals: int,
                  extra: RunExtras | None = None) -> dict:
    """``symformer generate --json``'s document."""
    document = as_json(p.example.title, steps, decimals)
    if extra is not None and extra.cache is not None:
        c = extra.cache
        document["kv_cache"] = {"heads": c.heads, "equal": c.equal, "proved": c.proved,
                                "failed": c.failed}
    if extra is not None and extra.stages:
        document["stages"] = {s.name: s.values(decimals=decimals) for s in extra.stages}
    return document


def _cache_text(c: CacheProof) -> str:
    if not c.heads:
        return "KV cache: no causal self-attention head to cache (nothing derived)"
    lines = [f"KV cache: prefill at step 1 (the prompt's keys and values), then one row "
             f"appended per step; heads {', '.join(c.heads)}"]
    if c.equal:
        lines.append(f"proved: cached = uncached exactly, at every step and head "
                     f"({len(c.proved)} proofs: every K_cache and V_cache row is the full "
                     f"pass's K and V row, output_new is the full pass's last row), by "
                     f"formula; a difference a framework shows is rounding")
    lines.extend("  not proved: " + f for f in c.failed)
    return "\n".join(lines)


def _stage_text(stage: Stage, decimals: int) -> str:
    values = stage.values(decimals=decimals)
    width = max(len(r) for r in stage.rows)
    lines = [f"{stage.name}  ({stage.shape[0]}x{stage.shape[1]}; columns "
             f"{', '.join(stage.cols)})"]
    lines += [f"  {r.ljust(width)}  " + "  ".join(v.rjust(8) for v in row)
              for r, row in zip(stage.rows, values)]
    return "\n".join(lines)


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
            out.append(f"step {n} decisions (each row and note under the address `check` "
                       f"claims it at):")
            out.extend("  " + line for note in s.decoding.addressed(n)
                       for line in note.split("\n"))
            out.extend("  " + line for line in decision_rows(n, s, decimals))
            out.append(f"  next token: {s.choice}")
    return "\n".join(out)


def decision_rows(n: int, step: Step, decimals: int) -> list[str]:
    """Step ``n``'s decision stages as a table, each row labelled by its address in the
    run (``step2.kept``), one column per vocabulary entry; a 1 x 1 stage (``uniform``,
    ``nucleus_mass``) as ``address = value``."""
    g, names = step.derivation, step.decoding.stages
    wide = [(f"step{n}.{name}", g[name].values(decimals=decimals)[0]) for name in names
            if g[name].shape[1] > 1]
    single = [f"step{n}.{name} = {g[name].values(decimals=decimals)[0][0]}" for name in names
              if g[name].shape[1] == 1]
    if not wide:
        return single
    header = ("stage", *g[names[0]].cols)
    rows = [header, *((label, *values) for label, values in wide)]
    widths = [max(len(r[j]) for r in rows) for j in range(len(header))]
    return [("  ".join(c.ljust(w) if j == 0 else c.rjust(w)
                       for j, (c, w) in enumerate(zip(r, widths)))).rstrip()
            for r in rows] + single


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
