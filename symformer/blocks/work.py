"""How much work a run will do, estimated before any is done, and the limit it must respect.

Every command estimates its work from the example's shapes (a forward pass's
multiply-adds here; what each command does with it in :mod:`symformer.blocks.cost`)
and refuses, before starting, a run over the limit: ``--max-work N``, else
``SYMFORMER_MAX_WORK``, else :data:`DEFAULT_MAX_WORK`; 0 means no limit.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from symformer.errors import InputError
from symformer.example.schema import Example

#: Refuse runs whose estimated operation count exceeds this (an operation is about
#: 2 µs of CPU: :mod:`symformer.blocks.cost`, so about 10 s); --max-work or
#: SYMFORMER_MAX_WORK changes it, and 0 turns the limit off.
DEFAULT_MAX_WORK = 5_000_000
#: Operations per second of CPU (process time, user + system) on the project's machine:
#: what :mod:`symformer.blocks.cost`'s constants are calibrated to
#: (``benchmarks/bench_estimate.py``), so DEFAULT_MAX_WORK is about 10 s.
PER_SECOND = 500_000


def estimated_work(example: Example) -> int:
    """Multiply-adds of one forward pass: what a derivation's cost grows with."""
    n, d = len(example.tokens), example.d_model
    work = n * d
    if example.attention is not None:  # given Q, K, V: one attention step
        a = example.attention
        work += a.K.rows * (a.K.cols + a.V.cols) + n * a.K.rows * (a.K.cols + a.V.cols + 2)
    for layer in example.layers:
        for h in layer.heads:
            work += n * d * (2 * h.d_k + h.d_v) + n * n * (h.d_k + h.d_v + 2)
        gated = 3 if layer.W_gate is not None else 2
        work += n * sum(h.d_v for h in layer.heads) * d + gated * n * d * layer.d_ff + 8 * n * d
    if example.lm_head is not None:
        work += n * d * len(example.vocab) + 2 * n * len(example.vocab)
    if example.decoder is not None:
        work += example.decoder.estimated_work(n)
    return work


def weight_products(example: Example) -> tuple[int, int]:
    """The multiply-adds of a forward pass's whole-matrix products (with constant weights:
    Q, K, V, W_O, the FFN, the logits; and each head's Q K^T and A V: each one
    ``arb_mat`` product, cheap per term) and the
    weights those products and the embedding lookups read (each made a ball once per
    precision: :mod:`symformer.example.dyadic`); both counted in :func:`estimated_work`
    too.  The encoder stack and the head only (a decoder's are left in the rest)."""
    n, d = len(example.tokens), example.d_model
    macs, weights = 0, 2 * n * d  # the rows looked up (embeddings, positions)
    for layer in example.layers:
        widths = sum(2 * h.d_k + h.d_v for h in layer.heads)
        gated = 3 if layer.W_gate is not None else 2
        value = sum(h.d_v for h in layer.heads)
        count = d * widths + value * d + gated * d * layer.d_ff
        macs += n * count + n * n * sum(h.d_k + h.d_v for h in layer.heads)  # Q K^T, A V
        weights += count
    if example.lm_head is not None:
        macs += n * d * len(example.vocab)
        weights += d * len(example.vocab)
    return macs, weights


def work_limit(max_work: int | None = None) -> int:
    """The limit in force: ``max_work``, else SYMFORMER_MAX_WORK, else the default; 0 = none.

    Raises :class:`InputError` for a SYMFORMER_MAX_WORK that is not a whole number >= 0.
    """
    if max_work is not None:
        if max_work < 0:
            raise InputError(f"the work limit must be 0 (no limit) or more, found {max_work}")
        return max_work
    text = os.environ.get("SYMFORMER_MAX_WORK")
    if text is None:
        return DEFAULT_MAX_WORK
    value = parse_work_limit(text)
    if value is None:
        raise InputError(f"SYMFORMER_MAX_WORK={text!r}: expected a whole number of operations "
                         f"such as 20000000 (0 means no limit)")
    return value


def parse_work_limit(text: str) -> int | None:
    """A work limit written as ASCII digits (``_`` allowed between them), or None."""
    text = text.strip()
    if not re.fullmatch(r"[0-9](_?[0-9]){0,29}", text, re.ASCII):
        return None
    return int(text)


def check_size(example: Example, max_work: int | None, work: int,
               command: str = "") -> None:
    """Refuse examples whose derivation would not finish in reasonable time.

    ``work`` is the estimate of what the caller will do (the Python API's derive: the
    forward pass, :func:`estimated_work`; a command: :mod:`symformer.blocks.cost`);
    ``command`` names it in the message.  A limit of 0 means no limit.
    """
    doing = f"`symformer {command}` on this example" if command else "this example"
    check_work(work, max_work, f"{example.source}: {doing}")


def check_work(work: int, max_work: int | None, doing: str) -> None:
    """Refuse, before it starts, work estimated at ``work`` operations over the limit
    (``doing`` says what would do it, for the message: :func:`refusal`)."""
    limit = work_limit(max_work)
    if limit and work > limit:
        raise InputError(refusal(doing, work, limit))


def refusal(doing: str, work: int, limit: int) -> str:
    """The one sentence every refusal over the work limit says: what would do the work,
    its estimate and the limit, each in operations and in CPU time, and how to raise
    the limit (``--max-work N`` on the command line, ``max_work=N`` from Python)::

        /x.toml: `symformer derive` on this example is estimated at 59.9 M operations
        (about 2 min of CPU), over the limit of 5 M (about 10 s); raise it with
        --max-work N or SYMFORMER_MAX_WORK=N (0: no limit)
    """
    return (f"{doing} is estimated at {operations(work)} operations ({cpu_time(work)} of "
            f"CPU), over the limit of {operations(limit)} ({cpu_time(limit)}); "
            f"{how_to_raise()}")


def how_to_raise() -> str:
    """How to raise the work limit, naming the option the reader uses (``--max-work N``
    on the command line, ``max_work=N`` from Python)."""
    option = "--max-work N" if _COMMAND_LINE.get() else "max_work=N"
    return f"raise it with {option} or SYMFORMER_MAX_WORK=N (0: no limit)"


def operations(count: int) -> str:
    """An operation count as a reader takes it in: ``5 M``, ``59.9 M``, ``1,234 M``,
    ``86,000`` (below a million: every digit)."""
    if count < 1_000_000:
        return f"{count:,}"
    millions = count / 1_000_000
    shown = f"{millions:,.1f}" if millions < 100 else f"{millions:,.0f}"
    return f"{shown.removesuffix('.0')} M"


def cpu_time(work: int) -> str:
    """The CPU time ``work`` operations take (:data:`PER_SECOND` a second), rounded as
    a person says it: ``about 10 s``, ``about 2 min``, ``about 3 h``, ``about 5 days``,
    ``under a second``."""
    seconds = work / PER_SECOND
    if seconds < 1:
        return "under a second"
    for unit, size, up_to in (("s", 1, 90), ("min", 60, 90 * 60), ("h", 3600, 48 * 3600)):
        if seconds < up_to:
            return f"about {_round(seconds / size)} {unit}"
    return f"about {_round(seconds / 86_400)} days"


def _round(value: float) -> str:
    """Two significant figures at most (``1.5``, ``12``, ``350``)."""
    if value < 10:
        return f"{value:.1f}".removesuffix(".0")
    return f"{round(value, -int(math.log10(value)) + 1):,.0f}"


#: True while a command of the command line runs: a refusal names ``--max-work``,
#: else (the Python API) ``max_work=``.
_COMMAND_LINE: ContextVar[bool] = ContextVar("command_line", default=False)


@contextmanager
def command_line() -> Iterator[None]:
    """Within it, work refusals name the command line's ``--max-work``."""
    token = _COMMAND_LINE.set(True)
    try:
        yield
    finally:
        _COMMAND_LINE.reset(token)
