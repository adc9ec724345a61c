"""What ``symformer crosscheck`` prints: each stage's float error against the exact values.

Built from the rows the comparisons return: :func:`reference_text`/`reference_json` for
the NumPy reference (:func:`symformer.verify.crosscheck.crosscheck`), :func:`torch_text`/
:func:`torch_json` for a PyTorch module (``--torch``, ``crosscheck DIR``:
:mod:`symformer.frameworks.torch_check`), :func:`prompts_text`/:func:`prompts_json` for a
file of prompts (``crosscheck DIR --prompts FILE``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

from symformer.conventions import Convention


def reference_text(rows: list, dtype: str, tol: float, conventions: Convention) -> str:
    """The NumPy reference's table (without its final newline): each stage's largest
    absolute and relative error, flagged over ``tol`` or failed, then how many are
    within it."""
    failed = [r for r in rows if not r.ok]
    width = max(len(r.stage) for r in rows)
    lines = [f"{dtype} reference vs exact ({conventions.describe()}), tol {tol:g}",
             f"{'stage':<{width}}  {'max abs err':>11}  {'max rel err':>11}"]
    for r in rows:
        flag = "" if r.ok else ("  FAILED" if r.note else "  > tol")
        note = f"  ({r.note})" if r.note else ""
        lines.append(f"{r.stage:<{width}}  {r.abs_error:11.3e}  {r.rel_error:11.3e}"
                     f"{flag}{note}")
    lines.append(f"\n{len(rows) - len(failed)} of {len(rows)} stages within tol")
    return "\n".join(lines)


def reference_json(rows: list, dtype: str, tol: float, conventions: Convention) -> dict:
    """The NumPy reference's ``--json`` document."""
    return {"dtype": dtype, "tol": tol, "conventions": conventions.describe(),
            "stages": [asdict(r) for r in rows], "ok": all(r.ok for r in rows)}


def over_tol(rows: list, tol: float | None) -> list:
    """The PyTorch rows whose relative error exceeds ``tol`` (None: no limit)."""
    return [r for r in rows if tol is not None and r.rel_error > tol]


def torch_text(rows: list, title: str, dtype: str, tol: float | None) -> str:
    """A PyTorch module's table (without its final newline): each stage's errors, in
    units of the dtype's epsilon and in digits kept, then the stage losing the most."""
    from symformer.frameworks.torch_check import worst_stage

    worst, failed = worst_stage(rows), over_tol(rows, tol)
    width = max(len(r.stage) for r in rows)
    lines = [f"{title} vs exact (errors relative to each stage's largest exact "
             f"magnitude; eps = {dtype}'s machine epsilon)",
             f"{'stage':<{width}}  {'max abs err':>11}  {'max rel err':>11}  {'x eps':>7}  "
             f"{'digits':>6}"]
    for r in rows:
        flag = "  > tol" if r in failed else ""
        lines.append(f"{r.stage:<{width}}  {r.abs_error:11.3e}  {r.rel_error:11.3e}  "
                     f"{r.ulps:7.2f}  {r.digits:6.2f}{flag}")
    lines.append(f"\nloses most digits: {worst.stage} ({worst.digits:.2f} digits kept, "
                 f"{worst.ulps:.2f} eps)")
    return "\n".join(lines)


def torch_json(rows: list, dtype: str, tol: float | None) -> dict:
    """A PyTorch module's ``--json`` document."""
    from symformer.frameworks.torch_check import worst_stage

    return {"dtype": dtype, "tol": tol, "torch": True,
            "stages": [asdict(r) for r in rows], "worst": worst_stage(rows).stage,
            "ok": not over_tol(rows, tol)}


def prompts_worst(outcomes: Sequence) -> dict[str, dict]:
    """Each stage's worst row over the prompts' outcomes, with the prompt it came from."""
    worst: dict[str, dict] = {}
    for outcome in outcomes:
        for row in outcome.value or []:
            if row["stage"] not in worst or row["rel_error"] > worst[row["stage"]]["rel_error"]:
                worst[row["stage"]] = {**row, "prompt": outcome.name}
    return worst


def prompts_text(title: str, dtype: str, prompts: list[str], outcomes: Sequence) -> str:
    """The prompts' table (without its final newline; ``title``: the directory and how
    its model was loaded): each stage's worst error and its prompt, the stage losing
    the most digits, then the prompts that failed."""
    worst = prompts_worst(outcomes)
    lines = [f"{title} in {dtype} vs exact over {len(prompts)} prompts (each stage's "
             f"worst error; eps = {dtype}'s machine epsilon)"]
    if worst:
        width = max(len(s) for s in worst)
        lines.append(f"{'stage':<{width}}  {'max rel err':>11}  {'x eps':>7}  "
                     f"{'digits':>6}  prompt")
        for stage, r in worst.items():
            lines.append(f"{stage:<{width}}  {r['rel_error']:11.3e}  {r['ulps']:7.2f}  "
                         f"{r['digits']:6.2f}  {r['prompt']}")
        last = max(worst.values(), key=lambda r: r["rel_error"])
        lines.append(f"\nloses most digits: {last['stage']} ({last['digits']:.2f} digits "
                     f"kept, {last['ulps']:.2f} eps, {last['prompt']})")
    lines.extend(f"{o.name} failed: {o.error}" for o in outcomes if not o.ok)
    return "\n".join(lines)


def prompts_json(directory: str, dtype: str, prompts: list[str], outcomes: Sequence) -> dict:
    """The prompts' ``--json`` document: every prompt's rows and each stage's worst."""
    return {"dtype": dtype, "directory": str(directory),
            "prompts": [{"prompt": p, "name": o.name, "stages": o.value, "error": o.error}
                        for p, o in zip(prompts, outcomes)],
            "worst": list(prompts_worst(outcomes).values()),
            "ok": all(o.ok for o in outcomes)}


def drift_text(report, title: str, dtype: str, tol: float | None) -> str:
    """``crosscheck DIR --kv-cache``'s table (without its final newline): each stage's
    cached and uncached error in units of epsilon and digits kept, then each step's
    greedy token, exact and float."""
    failed = over_tol(report.cached, tol)
    width = max(len(r.stage) for r in report.cached)
    lines = [f"{title}, cached (a prefill, then one token a call with the KV cache) and "
             f"uncached, vs exact "
             f"(eps = {dtype}'s machine epsilon; cached = uncached exactly)",
             f"sentence: {' '.join(report.tokens)}",
             f"{'stage':<{width}}  {'cached x eps':>12}  {'digits':>6}  "
             f"{'uncached x eps':>14}  {'digits':>6}"]
    for c, u in zip(report.cached, report.uncached):
        flag = "  > tol" if c in failed else ""
        lines.append(f"{c.stage:<{width}}  {c.ulps:12.2f}  {c.digits:6.2f}  "
                     f"{u.ulps:14.2f}  {u.digits:6.2f}{flag}")
    lines.append("")
    for f in report.flips:
        exact = " or ".join(repr(t) for t in f.exact)
        lines.append(f"step {f.step}: exact {exact}; cached {f.cached!r}"
                     f"{' FLIPPED' if f.cached_flipped else ''}; uncached {f.uncached!r}"
                     f"{' FLIPPED' if f.uncached_flipped else ''}")
    flipped = sum(f.cached_flipped for f in report.flips)
    lines.append(f"the cached path's greedy token flips at {flipped} of "
                 f"{len(report.flips)} steps")
    return "\n".join(lines)


def drift_json(report, dtype: str, tol: float | None) -> dict:
    """``crosscheck DIR --kv-cache``'s ``--json`` document."""
    return {"dtype": dtype, "tol": tol, "kv_cache": True, "tokens": list(report.tokens),
            "cached": [asdict(r) for r in report.cached],
            "uncached": [asdict(r) for r in report.uncached],
            "steps": [asdict(f) | {"cached_flipped": f.cached_flipped,
                                   "uncached_flipped": f.uncached_flipped}
                      for f in report.flips],
            "ok": not over_tol(report.cached, tol)}
