"""Helpers that make the engine's per-entry loops cheaper without changing a result.

Pausing the collector: CPython's cyclic garbage collector runs a collection every 700
allocations of container objects, and a full one (every object of the process,
SymPy's caches included) whenever the survivors grow by a quarter.  Rounding a stage
allocates one :class:`~symformer.engine.rounding.Rounded` per entry and a list per row,
evaluating one a list per row: none forms a reference cycle, yet a 64-token, 4-layer
model's 720,000 entries triggered about 13 full collections and 150 middle ones, a
quarter of its CPU time.  Pausing the collector around those loops (reference
counting still frees everything at once; what was allocated is examined at the first
collection after the pause) removes that cost and changes no value.
"""

from __future__ import annotations

import gc

import flint


class collection_paused:  # noqa: N801  (used as a function: ``with collection_paused():``)
    """Pause the cyclic garbage collector inside the block (nested use is fine; the
    collector is re-enabled only if it was enabled on entry, also on an exception).

    A class, not a generator: entering and leaving costs a fraction of a microsecond,
    which matters to a stage of a dozen entries.
    """

    __slots__ = ("_was",)

    def __enter__(self) -> None:
        self._was = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self._was:
            gc.enable()


class working:  # noqa: N801
    """``with working(bits):``: python-flint's precision set to ``bits`` and the collector
    paused (:class:`collection_paused`) inside the block, both restored after it."""

    __slots__ = ("_bits", "_prec", "_was")

    def __init__(self, bits: int) -> None:
        self._bits = bits

    def __enter__(self) -> None:
        self._prec = flint.ctx.prec
        flint.ctx.prec = self._bits
        self._was = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        flint.ctx.prec = self._prec
        if self._was:
            gc.enable()
