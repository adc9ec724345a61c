"""The optional ``[stages]`` table: intermediate stages lessons print, asked for by name.

They are opt-in so that every other example's notes stay as long as they were::

    [stages]
    per_position_loss = true                  # loss.per_position: L_i at each position
    output_moments = true                     # every LayerNorm's NAME.output_mean and
                                              # NAME.output_variance (about 0 and 1)
    jacobian = ["layer1.head1.weights[1]"]    # the softmax row's Jacobian, row 1 only
    products = ["layer1.head1.raw_scores"]    # q_c k_c inside every score, every row

A ``jacobian`` entry names a softmax stage (attention ``weights`` or ``probabilities``),
a ``products`` entry a dot-product stage (``raw_scores``); ``NAME`` asks for every row,
``NAME[ROW]`` (0-based) for one.  The names are checked against the derivation when it
is built (:func:`symformer.blocks.requested_stages.add_requested_stages`).
"""

from __future__ import annotations

import re
from typing import Any

from symformer.errors import InputError
from symformer.example.fields import Where, no_unknown_keys
from symformer.example.schema import LessonStages, StageRequest

_KEYS = {"per_position_loss", "output_moments", "jacobian", "products"}
#: A stage name, optionally with one 0-based row: ``layer1.head1.weights[2]``.
_ENTRY = re.compile(r"(?P<stage>[A-Za-z0-9_.]{1,200})(?:\[(?P<row>[0-9]{1,6})\])?", re.ASCII)
#: At most this many entries per key (each row is a stage of its own).
MAX_ENTRIES = 64


def parse_stages(data: Any, here: Where) -> LessonStages:
    """Validate the ``[stages]`` table (names are checked when the example is derived)."""
    if not isinstance(data, dict):
        raise InputError(f"{here}: must be a table")
    no_unknown_keys(data, _KEYS, here)
    for key in ("per_position_loss", "output_moments"):
        if not isinstance(data.get(key, False), bool):
            raise InputError(f"{here}: {key} must be true or false")
    return LessonStages(data.get("per_position_loss", False), data.get("output_moments", False),
                        _requests(data, "jacobian", here), _requests(data, "products", here),
                        str(here))


def _requests(data: dict[str, Any], key: str, here: Where) -> tuple[StageRequest, ...]:
    found = data.get(key, [])
    if not isinstance(found, list) or not all(isinstance(t, str) for t in found):
        raise InputError(f"{here}: {key} must be a list of stage names, e.g. "
                         f"[\"layer1.head1.weights\"] or [\"layer1.head1.weights[1]\"]")
    if len(found) > MAX_ENTRIES:
        raise InputError(f"{here}: {key} lists {len(found)} stages, more than {MAX_ENTRIES}")
    requests = []
    for text in found:
        match = _ENTRY.fullmatch(text)
        if not match:
            raise InputError(f"{here}: {key} entry {text[:60]!r} is not a stage name or "
                             f"NAME[ROW] (0-based row)")
        row = match["row"]
        requests.append(StageRequest(match["stage"], None if row is None else int(row), text))
    return tuple(requests)
