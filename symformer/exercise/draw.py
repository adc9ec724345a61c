"""Drawing a variant's numbers: deterministic on every machine and Python version.

The numbers come from SHA-256 of ``"symformer-exercise:SEED:VARIANT:ATTEMPT:COUNTER"``,
each digest's 256 bits read a few at a time (integers only: no float, no ``random``
module, no set or dict ordering), so a seed
gives the same variants everywhere.  Each variant and each attempt has its own
stream, so variant 3 does not depend on how many draws variant 2 rejected.

Which numbers are drawn: in the template's tables (top level, ``[[layer]]``, heads,
``[decoder]``, ``[lm_head]``), every ``embeddings`` table from the embeddings range,
every ``W_*`` matrix from the weights range and every ``b_*`` vector from the biases
range; everything else (the sentence, LayerNorm's gamma and beta, eps, the loss
target) is the template's.
"""

from __future__ import annotations

import hashlib
from typing import Any

from symformer.exercise.settings import Range, Settings

#: Top-level tables never redrawn.
_KEEP = {"loss", "exercise"}


class Stream:
    """Uniform integer draws from a SHA-256 counter stream.

    Each digest of ``"symformer-exercise:SEED:VARIANT:ATTEMPT:COUNTER"`` gives 256 bits,
    read from the most significant end ``bits`` at a time (one digest serves dozens of
    small draws: hashing once per number was most of a draw's cost)."""

    def __init__(self, seed: int, variant: int, attempt: int) -> None:
        self._key = f"symformer-exercise:{seed}:{variant}:{attempt}"
        self._counter = 0
        self._pool = 0      # unread bits of the current digest, as an integer
        self._left = 0      # how many

    def _bits(self, bits: int) -> int:
        if self._left < bits:
            digest = hashlib.sha256(f"{self._key}:{self._counter}".encode()).digest()
            self._counter += 1
            self._pool, self._left = int.from_bytes(digest, "big"), 256
        self._left -= bits
        return (self._pool >> self._left) & ((1 << bits) - 1)

    def below(self, n: int) -> int:
        """A uniform integer in ``0 .. n-1`` (rejection sampling: exactly uniform)."""
        if n <= 1:
            return 0
        bits = (n - 1).bit_length()
        while True:
            k = self._bits(bits)
            if k < n:
                return k


def drawn_key(key: str) -> bool:
    """Whether a table's entry named ``key`` is drawn (``embeddings``, ``W_*``, ``b_*``)."""
    return key == "embeddings" or key.startswith(("W_", "b_"))


def _range_for(key: str, settings: Settings) -> Range | None:
    if not drawn_key(key):
        return None
    if key == "embeddings":
        return settings.embeddings
    return settings.weights if key.startswith("W_") else settings.biases


def _is_numeric(value: Any) -> bool:
    if isinstance(value, list):
        return bool(value) and all(_is_numeric(v) for v in value)
    return isinstance(value, (int, str)) and not isinstance(value, bool)


def _redraw(value: Any, stream: Stream, choices: tuple) -> Any:
    if isinstance(value, list):
        return [_redraw(v, stream, choices) for v in value]
    return choices[stream.below(len(choices))]


def draw(data: dict[str, Any], settings: Settings, stream: Stream,
         top: bool = True) -> dict[str, Any]:
    """A copy of the parsed template with its weights and embeddings drawn anew.

    Drawn numbers are held as the parsed TOML of an example file would hold them
    (:meth:`Range.entries`); everything else is kept as parsed.
    """
    out: dict[str, Any] = {}
    for key, value in data.items():
        if top and key in _KEEP:
            out[key] = value
        elif isinstance(value, dict):
            out[key] = draw(value, settings, stream, top=False)
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            out[key] = [draw(v, settings, stream, top=False) for v in value]
        elif (choices := _range_for(key, settings)) is not None and _is_numeric(value):
            out[key] = _redraw(value, stream, _entries(choices))
        else:
            out[key] = value
    return out


_ENTRIES: dict[Range, tuple] = {}


def _entries(choices: Range) -> tuple:
    """``choices.entries()``, computed once per range."""
    if choices not in _ENTRIES:
        _ENTRIES[choices] = choices.entries()
    return _ENTRIES[choices]
