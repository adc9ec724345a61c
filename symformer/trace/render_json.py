"""The trace as JSON: every step with its formulas (text and LaTeX) and numbers."""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING

from symformer.notation import INDEX_RULE
from symformer.notation_types import Notation
from symformer.trace.steps import Entry, General, Step
from symformer.worked import as_latex, as_text
from symformer.worked.model import Step as WorkedStep

if TYPE_CHECKING:
    from symformer.trace.result import Trace


def _formula(f: WorkedStep | None) -> dict | None:
    return None if f is None else {"text": as_text(f), "latex": as_latex(f)}


def _entry(e: Entry | None) -> dict | None:
    if e is None:
        return None
    return {"label": e.label, "symbol": e.symbol(), "value": e.value,
            "worked": _formula(e.worked)}


def _notation(n: Notation | None) -> dict | None:
    return None if n is None else {"text": n.text, "latex": n.latex, "title": n.title}


def _general(g: General) -> dict:
    return {"text": g.text, "latex": g.latex}


def step_dict(step: Step) -> dict:
    """One step as plain data; fields of the step's own kind are kept by name."""
    data: dict = {"type": type(step).__name__, "labels": step.labels, "values": step.values}
    for f in dataclasses.fields(step):
        value = getattr(step, f.name)
        if f.name in ("entries", "parts"):  # parts: a softmax row's e^{s_j} and Σ
            value = [_entry(e) for e in value]
        elif f.name == "general":
            value = [_general(g) for g in value]
        elif isinstance(value, Entry):
            value = _entry(value)
        elif isinstance(value, Notation):
            value = _notation(value)
        elif isinstance(value, tuple):
            value = list(value)
        data[f.name] = value
    return data


def trace_dict(trace: Trace) -> dict:
    """The whole trace as plain data."""
    return {"title": trace.title, "tokens": list(trace.tokens), "position": trace.position,
            "token": trace.token, "causal": trace.causal, "side": trace.side,
            "backward": trace.backward,
            "decimals": trace.decimals, "notation": [_notation(n) for n in trace.notation],
            "indices": INDEX_RULE, "steps": [step_dict(s) for s in trace.steps]}


def render_json(trace: Trace) -> str:
    """The trace as an indented JSON document."""
    return json.dumps(trace_dict(trace), indent=1, ensure_ascii=False) + "\n"
