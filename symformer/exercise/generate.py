"""Drawing N variants of a template that meet the constraints, with a bounded search.

Each variant gets at most ``settings.attempts`` draws; a draw is rejected when it is
not a valid example (a zero variance, say), repeats an earlier variant, puts an
asked value within the margin of a rounding boundary, gives other answers (or ones
within the margin) from the sheet's given numbers, or has flat softmax rows
(:mod:`symformer.exercise.margin`), or is not a fair draw (:mod:`symformer.exercise.fair`:
scores too large to exponentiate, a saturated softmax, an activation input of one
sign, an answer that rounds to 0, an undecided student's path).  A float64 prefilter
(:mod:`symformer.exercise.prefilter`) rejects the draws that clearly fail before they
are built, and never one the certified check would accept; the others
are written as the variant's file, and that text is loaded, derived and certified.
Rejections are counted by reason; when a variant's attempts run out, the error names
the constraint that failed most often.

The search is bounded by work as every command is (``--max-work``): a draw that is
derived and certified costs :data:`ATTEMPT_PASSES` forward passes of the template
(:func:`attempt_work`), one the prefilter rejects half a pass; once the spent work
would pass the limit, the search stops with the same message (and the limit named).
"""

from __future__ import annotations

import fnmatch
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from symformer.blocks import derive
from symformer.blocks.work import (
    check_work,
    cpu_time,
    estimated_work,
    how_to_raise,
    work_limit,
)
from symformer.engine import Derivation
from symformer.errors import InputError, NotSupportedError, UndecidedError
from symformer.example import Example
from symformer.example.loader import example_from_dict, parse_example
from symformer.exercise.draw import Stream, draw
from symformer.exercise.fair import PREFILTERED, fair_failure
from symformer.exercise.margin import (
    asked_balls,
    given_failure,
    margin_failure,
    spread_failure,
)
from symformer.exercise.prefilter import Prefilter, prefilter
from symformer.exercise.settings import Settings
from symformer.exercise.toml_text import toml_text
from symformer.words import plural

#: The most variants one run makes (ids v01 ... v500).
MAX_VARIANTS = 500
#: Rejection reasons, in the order the checks run.
REASONS = ("invalid", "duplicate", "margin", "score", "saturated", "stated", "given",
           "spread", "relu", "path")
#: Cost of one derived and certified draw, in forward passes of the template
#: (measured: loading, deriving and the ball checks of a rejected draw take about
#: as long as 7 forward passes' worth of the work limit's operations).
ATTEMPT_PASSES = 8
#: A draw the float prefilter rejects costs a forward pass divided by this (measured:
#: drawing it and its float forward take about 0.6 ms, against about 11 ms for a derived
#: and certified draw of 8 passes on the built-in example).
PREFILTERED_SHARE = 2
#: Draws of one variant between two progress notes.
NOTE_EVERY = 25
#: Cost of one accepted variant's sheets and key, in forward passes (measured: about
#: 110 ms a variant of the built-in example with its key.json lines, 30% of
#: ``exercise``'s time).
SHEET_PASSES = 60


@dataclass
class Variant:
    """One accepted variant: its id, its example file's text and its derivation."""

    id: str
    text: str
    example: Example
    derivation: Derivation
    attempts: int


@dataclass
class Search:
    """What the search cost: rejected draws by reason, and time spent."""

    rejected: Counter = field(default_factory=Counter)
    #: CPU seconds of the whole draw-derive-check loop, rejected draws included
    seconds: float = 0.0
    #: CPU seconds of the certified margin, given and spread checks alone
    check_seconds: float = 0.0
    #: draws the float prefilter rejected (counted under "margin" too), and its time
    prefiltered: int = 0
    prefilter_seconds: float = 0.0
    #: estimated work spent (operations of --max-work, see :func:`attempt_work`)
    work: int = 0

    @property
    def total_rejected(self) -> int:
        """Rejected draws, all reasons together."""
        return sum(self.rejected.values())


def asked_stages(g: Derivation, patterns: list[str], source: str) -> list[str]:
    """The stage names matching the ``--ask`` globs, in derivation order."""
    for pattern in patterns:
        if not any(fnmatch.fnmatchcase(s.name, pattern) for s in g):
            raise InputError(f"--ask {pattern!r} matches no stage of {source}; the stages "
                             f"are: {', '.join(s.name for s in g)}")
    return [s.name for s in g if any(fnmatch.fnmatchcase(s.name, p) for p in patterns)]


def variant_id(k: int, count: int) -> str:
    """``v01`` ... (two digits, three from 100 variants)."""
    return f"v{k:0{max(2, len(str(count)))}d}"


def attempt_work(template: Example) -> tuple[int, int]:
    """The estimated work of one draw of ``template``: (derived and certified, rejected
    by the float prefilter), in the operations of ``--max-work``."""
    forward = estimated_work(template)
    return ATTEMPT_PASSES * forward, forward // PREFILTERED_SHARE


def sheet_work(template: Example) -> int:
    """The estimated work of one variant's sheets and key (operations of ``--max-work``)."""
    return SHEET_PASSES * estimated_work(template)


def _explain(counts: Counter, examples: dict[str, str], settings: Settings, decimals: int,
             vid: str, source: str, limit: int | None = None) -> str:
    """Why a variant's search gave up: the constraint that rejected the most draws
    with its count, every reason's count and example, and what to change."""
    what = {
        "margin": lambda n: f"{n} put an asked value within {settings.margin} of a unit of "
                            f"the last decimal from a rounding boundary at "
                            f"{plural(decimals, 'decimal')} (e.g. {examples['margin']})",
        "given": lambda n: f"{n} gave another answer, or one within the margin, when "
                           f"computed from the sheet's given numbers (e.g. {examples['given']})",
        "spread": lambda n: f"{n} had softmax weights closer together than "
                            f"min_spread = {settings.min_spread} (e.g. {examples['spread']})",
        "invalid": lambda n: (f"{n} was not a valid example" if n == 1 else
                              f"{n} were not valid examples") + f" ({examples['invalid']})",
        "duplicate": lambda n: f"{n} repeated an earlier variant",
        "score": lambda n: f"{n} had a scaled score beyond max_score = {settings.max_score} "
                           f"in magnitude (e.g. {examples['score']})",
        "saturated": lambda n: f"{n} had a softmax row whose largest weight exceeds "
                               f"max_weight = {settings.max_weight} (e.g. "
                               f"{examples['saturated']})",
        "relu": lambda n: f"{n} had a feed-forward activation whose input lacks a positive "
                          f"or a negative entry (relu_signs = {settings.relu_signs!r}; e.g. "
                          f"{examples['relu']})",
        "stated": lambda n: f"{n} had an asked value that is not 0 but rounds to 0 at "
                            f"{plural(decimals, 'decimal')} (e.g. {examples['stated']})",
        "path": lambda n: f"{n} put a value recomputed from the student's rounded answers "
                          f"within a tenth of the margin of a rounding boundary (e.g. "
                          f"{examples['path']})",
    }
    order = sorted(counts, key=lambda r: (-counts[r], REASONS.index(r)))
    hint = {"margin": "lower --decimals or --margin, or widen the ranges in [exercise]",
            "given": "lower --decimals or --margin, or also ask for the stages that compute "
                     "the given tables",
            "spread": "lower min_spread in [exercise], or widen the weights' range",
            "invalid": "change the ranges in [exercise]",
            "duplicate": "widen the ranges in [exercise], or ask for fewer variants",
            "score": "narrow the embeddings' or weights' range in [exercise], or raise "
                     "max_score",
            "saturated": "narrow the embeddings' or weights' range in [exercise], or raise "
                         "max_weight",
            "relu": "widen the biases' range in [exercise] (negative and positive), or set "
                    "relu_signs = \"table\" or \"off\"",
            "stated": "raise --decimals, or set stated = false in [exercise]",
            "path": "lower --decimals or --margin"}
    tried = sum(counts.values())
    if not tried:
        return (f"{source}: variant {vid}: not drawn: the work limit of {limit:,} operations "
                f"({cpu_time(limit)}) was reached by the earlier variants' draws; "
                f"{how_to_raise()}, or ask for fewer variants")
    stop = (f"stopped at the work limit of {limit:,} operations (--max-work) after "
            f"{plural(tried, 'draw')} of the {plural(settings.attempts, 'attempt')} "
            f"allowed"
            if limit is not None else
            f"all {plural(settings.attempts, 'attempt')} of [exercise] attempts used")
    return (f"{source}: variant {vid}: no draw met `{order[0]}`: {counts[order[0]]} of "
            f"{tried} rejected by it ({stop}): "
            + "; ".join(what[r](counts[r]) for r in order) + f"; {hint[order[0]]}")


def draw_variants(data: dict[str, Any], source: str, count: int, seed: int,
                  asked: list[str], decimals: int, settings: Settings,
                  progress: Callable[[int, int], None] | None = None,
                  header: str = "", template: Derivation | None = None,
                  max_work: int | None = None, reserved: int = 0,
                  searching: Callable[[str], None] | None = None, token: int = 1,
                  overhead: int = 0) -> tuple[list[Variant], Search]:
    """``count`` variants of the parsed template ``data`` meeting every constraint.

    ``header`` is put at the top of each variant's file (comment lines; ``{id}`` is
    replaced by the variant's id); ``template`` is ``data`` derived (derived here
    when None).  Raises :class:`InputError` naming the failing
    constraint when a variant's attempts run out, or when the search's work would
    pass ``max_work`` (:func:`~symformer.blocks.work.work_limit`; 0: no limit) less
    ``reserved`` a variant (what the caller does with each variant afterwards) and
    ``overhead`` (what the caller spends once: ``exercise``'s start,
    :data:`~symformer.blocks.cost.EXERCISE_START`).
    ``searching`` receives a line every :data:`NOTE_EVERY` draws of a variant (for a
    progress display); ``token`` is the row the key's worked lines follow (the ``relu``
    constraint looks there).
    """
    if not 1 <= count <= MAX_VARIANTS:
        raise InputError(f"--variants: must be from 1 to {MAX_VARIANTS}, found {count}")
    search = Search()
    seen: set[str] = set()
    variants: list[Variant] = []
    start = time.process_time()
    if template is None:
        template = derive(example_from_dict(data, source))
    quick = prefilter(data, template, asked, decimals, settings.margin, settings)
    limit = work_limit(max_work)
    full, cheap = attempt_work(template.example)
    # at least one draw a variant, its sheets and key, and the command's start
    check_work(overhead + count * (full + reserved), max_work,
               f"{source}: {plural(count, 'variant')} (at least one draw each, {full:,} "
               f"operations a draw" + (f", and {reserved:,} a variant for its sheets and "
                                       f"key" if reserved else "") + ")")
    budget = limit - overhead - count * reserved if limit else 0  # for the draws
    spent = 0
    for k in range(1, count + 1):
        vid = variant_id(k, count)
        counts: Counter = Counter()
        examples: dict[str, str] = {}
        for attempt in range(settings.attempts):
            if budget and spent + full > budget:
                search.rejected.update(counts)
                raise InputError(_explain(counts, examples, settings, decimals, vid, source,
                                          limit))
            if searching is not None and attempt and attempt % NOTE_EVERY == 0:
                searching(f"variant {vid}: {attempt} draws tried, "
                          f"{spent * 100 // budget if budget else 0}% of the work limit")
            before = search.prefiltered
            drawn = draw(data, settings, Stream(seed, k, attempt))
            found = _candidate(drawn, vid, header, seen, quick, asked, decimals, settings,
                               search, token)
            spent += cheap if search.prefiltered > before else full
            search.work = spent
            if isinstance(found, Variant):
                found.attempts = attempt + 1
                variants.append(found)
                break
            reason, detail = found
            counts[reason] += 1
            examples.setdefault(reason, detail)
        else:
            search.rejected.update(counts)
            raise InputError(_explain(counts, examples, settings, decimals, vid, source))
        search.rejected.update(counts)
        if progress is not None:
            progress(k, count)
    search.seconds = time.process_time() - start
    return variants, search


def _candidate(drawn: dict[str, Any], vid: str, header: str, seen: set[str],
               quick: Prefilter | None, asked: list[str], decimals: int, settings: Settings,
               search: Search, token: int) -> Variant | tuple[str, str]:
    """One draw: the accepted variant, or the reason it is rejected and its entry.

    The float prefilter (when the template allows one) rejects the draws clearly
    within the margin, which the certified check would reject too; the others are
    written as the variant's file and that text is loaded, derived and checked."""
    if quick is not None:
        tick = time.process_time()
        rejected = quick.rejection(drawn)
        search.prefilter_seconds += time.process_time() - tick
        if rejected is not None:
            search.prefiltered += 1
            return rejected
    numbers = toml_text(drawn)  # before the title names the variant
    if numbers in seen:
        return "duplicate", ""
    if "title" in drawn:
        drawn["title"] = f"{drawn['title']} (variant {vid})"
    text = header.replace("{id}", vid) + toml_text(drawn)
    keep: list = []
    reason, detail = _check(lambda: parse_example(text, f"{vid}/example.toml"), asked,
                            decimals, settings, search, token, keep)
    if reason is not None:
        return reason, detail
    seen.add(numbers)
    return Variant(vid, text, keep[0], keep[1], 0)


def _check(build: Callable[[], Example], asked: list[str], decimals: int, settings: Settings,
           search: Search, token: int, keep: list | None = None) -> tuple[str | None, str]:
    """``(None, "")`` when the example ``build()`` meets every constraint, else the
    reason and the failing entry.  ``keep`` receives the example and its derivation."""
    tick = None
    try:
        example = build()
        g = derive(example)
        if keep is not None:
            keep += [example, g]
        tick = time.process_time()
        balls = asked_balls(g, asked)
        failed = margin_failure(g, asked, decimals, settings.margin, balls)
        if failed is not None:
            return "margin", failed
        # the prefilter's order: margin, then the fairness checks it decides
        unfair = fair_failure(g, asked, decimals, settings, token, balls, PREFILTERED)
        if unfair is not None:
            return unfair
        failed = given_failure(g, asked, decimals, settings.margin, balls)
        if failed is not None:
            return "given", failed
        failed = spread_failure(g, asked, settings.min_spread, balls)
        if failed is not None:
            return "spread", failed
        unfair = fair_failure(g, asked, decimals, settings, token, balls,
                              ("relu", "path"))
        if unfair is not None:
            return unfair
    except (InputError, NotSupportedError, UndecidedError) as exc:
        return "invalid", str(exc).split(": ", 1)[-1][:120]
    finally:
        if tick is not None:
            search.check_seconds += time.process_time() - tick
    return None, ""
