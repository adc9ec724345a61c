"""Dropout with a given mask as a stage: :func:`add_dropout` appends ``NAME.dropout``
(:class:`~symformer.ops.dropout.Dropout`) to a derivation -- the mask an author printed,
each kept entry scaled by 1/(1 - p), exactly."""

from __future__ import annotations

from typing import Any

from symformer.engine.graph import Derivation
from symformer.errors import InputError
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.dropout import MASK, Dropout

#: The symbols of a block's sub-layer outputs after dropout (one per sub-layer, so the
#: attention's and the FFN's never share one).
ATTENTION_DROPPED = Notation(r"\breve{m}", "m\u0306", "Attention output after dropout")
FFN_DROPPED = Notation(r"\breve{f}", "f\u0306", "FFN output after dropout")
#: Each site's mask, marked by the site (its dropped output's symbol -> the mask's).
MASKS = {ATTENTION_DROPPED.latex: Notation(r"D^{\text{att}}", "D^att",
                                           "Dropout mask of the attention output (1: kept)"),
         FFN_DROPPED.latex: Notation(r"D^{\text{ffn}}", "D^ffn",
                                     "Dropout mask of the FFN output (1: kept)")}


def add_dropout(g: Derivation, stage: str, mask: Any, p: Any, name: str | None = None,
                notation: Notation | None = None) -> str:
    """Append dropout of ``stage`` with the 0/1 ``mask`` (its shape) and rate ``p``
    (0 <= p < 1, exact: 0.1 is 1/10); returns the new stage's name (``STAGE.dropout``).
    ``notation``: the result's symbol (default x̃); a block's sub-layer output
    (:data:`ATTENTION_DROPPED`, :data:`FFN_DROPPED`) has its mask marked by the site
    (:data:`MASKS`), any other the plain D."""
    rows, cols = g[stage].shape
    if (not isinstance(mask, (list, tuple)) or len(mask) != rows
            or any(not isinstance(r, (list, tuple)) or len(r) != cols for r in mask)):
        raise InputError(f"dropout of {stage}: mask must be {rows}x{cols} (its shape)")
    if any(v not in (0, 1) or isinstance(v, bool) for r in mask for v in r):
        raise InputError(f"dropout of {stage}: mask entries must be 0 or 1")
    try:  # as written: 0.1 is 1/10 (its decimal text), "1/3", Fraction(1, 3)
        rate = sympy.Rational(str(p)) if not isinstance(p, bool) else None
    except (TypeError, ValueError, sympy.SympifyError):
        rate = None
    if rate is None:
        raise InputError(f"dropout of {stage}: p must be a number, found {str(p)[:40]!r}")
    if not 0 <= rate < 1:
        raise InputError(f"dropout of {stage}: p must be from 0 up to (not) 1, found {p}")
    s = g[stage]
    return g.add(name or f"{stage}.dropout", "dropout",
                 Dropout(tuple(tuple(int(v) for v in r) for r in mask), rate, notation,
                         MASKS.get(notation.latex, MASK) if notation else MASK),
                 (stage,), s.rows, s.cols, layer=s.layer, head=s.head, side=s.side)
