"""What ``symformer check`` prints: the report on an author's claims and equations.

Built from what the checker decided (:meth:`symformer.verify.check.Checker.check_all`,
:meth:`symformer.verify.equation_claims.Judge.check_each`): :func:`check_text` is the
plain-text report, :func:`check_json` the ``--json`` document.
"""

from __future__ import annotations

from collections.abc import Sequence

from symformer.verify.check import ClaimCheck, summary
from symformer.verify.claims import Claim
from symformer.verify.equation_claims import EquationCheck
from symformer.verify.equation_claims import as_json as equations_json
from symformer.verify.equation_claims import report as equations_report


def check_text(claims: list[Claim], results: list[ClaimCheck],
               equations: list[EquationCheck], unchecked: Sequence[str] = ()) -> str:
    """``symformer check``'s output (without its final newline): the report on the
    claimed numbers (none when the file claims none; ``unchecked``: a document's
    printed arrays no ``--name`` maps, named after the count), then the equations'
    verdicts."""
    right, total = summary(results)
    text = report(results, right, total) if claims else ""
    if text and unchecked:  # the verdict is over what was compared: say what was not
        text += f"\nnot compared (no --name mapping): {', '.join(unchecked)}"
    lines = equations_report(equations)
    return "\n".join(([text, ""] if text else []) + lines) if lines else text


def check_json(results: list[ClaimCheck], equations: list[EquationCheck],
               unchecked: Sequence[str] = ()) -> dict:
    """``symformer check --json``'s document: the claims' verdicts (:func:`as_json`) and,
    with equations, theirs; ``ok`` when every number and every equation is right;
    ``unchecked``, when given: a document's printed arrays no ``--name`` maps."""
    right, total = summary(results)
    document = as_json(results, right, total)
    if unchecked:
        document["unchecked"] = list(unchecked)
    if equations:
        document["equations"] = equations_json(equations)
        document["ok"] = document["ok"] and all(e.ok for e in equations)
    return document


def report(results: list[ClaimCheck], right: int, total: int) -> str:
    """The plain-text report: every wrong number with its place, then the summary."""
    lines = []
    for r in results:
        c = r.claim
        kind = "step from " + ", ".join(f"{s} = {n}" for s, n in c.inputs.items()) \
            if r.local else ("causal derivation" if c.causal else "")
        head = f"{c.name} -> {c.stage}" + (f" ({kind})" if kind else "") + \
            f", {c.precision}: "
        n = len(r.entries)
        if r.local:
            verdict = "consistent" if not r.wrong else f"{len(r.wrong)} of {n} inconsistent"
        else:
            verdict = "all right" if not r.wrong else f"{len(r.wrong)} of {n} wrong"
        lines.append(head + f"{n - len(r.wrong)} of {n} right, {verdict}")
        for e in r.wrong:
            what = "as printed" if r.local else "correct"
            at = f"line {e.line}, " if e.line is not None else ""
            lines.append(f"  {at}{e.place}: claimed {e.claimed}, {what} {e.correct} "
                         f"(exact {e.exact}...)")
        for text in r.explanations:
            lines.append(f"  why: {text}")
    lines.append("")
    lines.append(f"{right} of {total} numbers correct")
    return "\n".join(lines)


def as_json(results: list[ClaimCheck], right: int, total: int) -> dict:
    """The ``--json`` document; rows and columns are 0-based."""
    return {
        "claims": [{
            "name": r.claim.name,
            "stage": r.claim.stage,
            "causal": r.claim.causal,
            "decimals": r.claim.decimals,
            "significant": r.claim.significant,
            "local": r.local,
            "inputs": r.claim.inputs,
            "numbers": len(r.entries),
            "right": len(r.entries) - len(r.wrong),
            "wrong": [[e.row, e.col] for e in r.wrong],
            "details": [{"row": e.row, "col": e.col, "token": e.row_label,
                         "column": e.col_label, "symbol": e.symbol, "claimed": e.claimed,
                         "as_printed" if r.local else "correct": e.correct,
                         "exact": e.exact, **({"line": e.line} if e.line is not None else {})}
                        for e in r.wrong],
            "explanations": r.explanations,
        } for r in results],
        "right": right,
        "numbers": total,
        "ok": right == total,
    }
