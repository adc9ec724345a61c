"""python-flint's working precision, set for a block and restored after it.

A leaf module: the engine's ball arithmetic and the example reader (which certifies
the magnitude of irrational inputs) both use it, and neither may import the other.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import flint


@contextmanager
def precision(bits: int) -> Iterator[None]:
    """Run ``arb`` arithmetic at ``bits`` of working precision, then restore it."""
    saved = flint.ctx.prec
    flint.ctx.prec = bits
    try:
        yield
    finally:
        flint.ctx.prec = saved
