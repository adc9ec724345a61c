"""What ``symformer train`` prints: the certified loss of every step, and the run's stages.

Built from the prepared request and the run (:func:`symformer.blocks.train.train`, with
each step's printed loss): :func:`train_lines` gives the pieces as the command prints
them, :func:`train_text` the whole output (without ``--write``'s last line).
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction

from symformer.blocks.side_stages import add_requested
from symformer.blocks.train import COMPARE_PRECISION, Training, change
from symformer.documents.derive import format_table
from symformer.pipeline import Prepared
from symformer.words import plural


def train_lines(p: Prepared, training: Training, losses: list[str], decimals: int,
                stages: list[str] | None = None) -> Iterator[str]:
    """``symformer train``'s output, one printed piece at a time: the header, the frozen
    weights, each step's loss (``losses``: each rounded to ``decimals``), whether the
    loss decreased, and the run's stages matching ``stages`` (globs), each a table.  An
    unknown stage raises :class:`~symformer.errors.InputError` once the rest is out."""
    example, steps = p.given, training.steps
    rate = f"lr = {training.lr} ({training.optimizer})"
    yield (f"{example.title}{p.note}: {plural(steps, 'step')}, {rate}, "
           f"{example.loss.kind} loss")
    if training.frozen:
        yield "frozen: " + ", ".join(sorted(training.frozen))
    width = len(str(steps))
    for t, text in enumerate(losses):
        yield f"step {t:>{width}}  loss {text}"
    yield report(training, steps, losses, decimals)
    if stages:
        add_requested(training.graph, stages)  # a step's side stages: step1.sgd_update.W
        for s in training.graph.select(stages):
            yield ""
            yield format_table(s, decimals)


def train_text(p: Prepared, training: Training, losses: list[str], decimals: int,
               stages: list[str] | None = None) -> str:
    """``symformer train``'s output as one string (:func:`train_lines`)."""
    return "".join(f"{line}\n" for line in train_lines(p, training, losses, decimals, stages))


def report(training: Training, steps: int, losses: list[str], decimals: int) -> str:
    """Which steps did not decrease the loss (certified), or that every one did.

    ``losses`` are the printed losses, each the exact loss rounded to ``decimals``
    places (certified): when :func:`~symformer.blocks.train.change` cannot decide a
    step, two printed losses further apart than their roundings allow still do.
    """
    notes = []
    for t in range(1, steps + 1):
        sign = change(training, t)
        via = ""
        if sign is None:
            sign = printed_order(losses[t - 1], losses[t], decimals)
            via = "; decided from the certified losses printed above"
        if sign is None:
            notes.append(f"step {t}: could not decide whether the loss decreased: the "
                         f"enclosures of the two losses overlap at every precision up to "
                         f"{max(COMPARE_PRECISION, training.precision)} bits, the "
                         f"ceiling, and they are not both rational")
        elif sign == 0:
            notes.append(f"step {t}: the loss does not decrease (exactly equal)")
        elif sign > 0:
            notes.append(f"step {t}: the loss does not decrease (it increases{via})")
    return "\n".join(notes) if notes else "the loss decreases at every step (certified)"


def printed_order(before: str, after: str, decimals: int) -> int | None:
    """The sign of after - before (1 or -1) when two certified roundings to
    ``decimals`` places are more than two units of the last place apart (each lies
    within half a unit of its exact value), else None.  A text that is not a plain
    number (an undecided range) decides nothing."""
    try:
        a, b = Fraction(before), Fraction(after)
    except ValueError:
        return None
    if abs(b - a) <= Fraction(2, 10 ** decimals):
        return None
    return 1 if b > a else -1
