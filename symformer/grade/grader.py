"""Grade every asked entry of one student's answers against the variant's key.

Verdicts, tried in this order (docs/grading.md):

* ``right``: within half a unit of the asked last decimal of the exact value
  (certified; a value exactly on a boundary accepts either rounding);
* ``reader_rounding``: the correct rounding of the step recomputed, exactly, from the
  key's printed previous tables (the asked stages it is computed from, at the asked
  decimals; a stage computed from no asked stage: from every earlier stage rounded);
* ``follow_through``: wrong, but consistent with the student's *own* previous
  asked tables, checked locally like ``check``'s claims with ``inputs``: the step
  recomputed from the student's numbers as written, or from some numbers within
  their rounding (an entry the student left blank or unreadable counts with the
  key's value).  Consistency is *certified*, never assumed: the value as written
  must be proved within half a unit, or the step must be proved to reach values on
  both sides of the answer's rounding interval at points of the box of inputs
  within the student's rounding (by continuity it then reaches the interval); an
  enclosure of that box only rejects, so a blown-up enclosure credits nothing.  A
  softmax row the student wrote that cannot sum to 1 within its rounding gets no
  follow-through; a decision that cannot be made is no credit;
* ``wrong``; ``missing`` (no answer); ``unreadable`` (an answer that is no number).

Entries a sheet gives that are not asked (unknown or unasked stage, out of range)
and lines that name no entry are reported, not graded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction

from flint import arb

from symformer.engine import Derivation
from symformer.engine.arbmath import precision
from symformer.errors import InputError, UndecidedError
from symformer.grade.answers import AnswerSheet, Entry, Remark
from symformer.grade.key import Key, Variant
from symformer.grade.points import Points
from symformer.lazy import sympy
from symformer.notation import place
from symformer.verify.chain import PRECISIONS, Chain, Values, ball, decide
from symformer.verify.check import meets
from symformer.words import plural

#: Every verdict, best first.
VERDICTS = ("right", "reader_rounding", "follow_through", "wrong", "missing", "unreadable")
#: Verdicts that mean the student went wrong at this entry (not merely followed through).
WENT_WRONG = ("wrong", "missing", "unreadable")
Where = tuple[str, int, int]


@dataclass
class EntryGrade:
    """The verdict on one asked entry (row, col 0-based)."""

    stage: str
    row: int
    col: int
    verdict: str
    answer: str | None          # as written (None: missing)
    correct: str                # the key's value, at the asked decimals
    line: int | None
    points: Fraction            # what a right answer earns
    earned: Fraction
    place: str                  # "q_0 of 'think' (position 1)"
    note: str = ""              # why unreadable
    first_wrong: Where | None = None  # the first asked entry that went wrong upstream


@dataclass
class StudentGrade:
    """One student's graded sheet."""

    sheet: AnswerSheet
    entries: list[EntryGrade]
    extra: list[Remark] = field(default_factory=list)
    copied: str = ""            # a note when another variant's key fits better

    def stage_score(self, stage: str) -> Fraction:
        """Points earned on one asked stage."""
        return sum((e.earned for e in self.entries if e.stage == stage), Fraction(0))

    @property
    def total(self) -> Fraction:
        """Points earned on every asked stage."""
        return sum((e.earned for e in self.entries), Fraction(0))

    @property
    def maximum(self) -> Fraction:
        """Points a sheet with every entry right earns."""
        return sum((e.points for e in self.entries), Fraction(0))

    def count(self, verdict: str) -> int:
        """How many entries got ``verdict``."""
        return sum(e.verdict == verdict for e in self.entries)

    def entry(self, where: Where) -> EntryGrade:
        """The grade of one entry."""
        return next(e for e in self.entries if (e.stage, e.row, e.col) == where)


class Grader:
    """Grades answer sheets against one key; caches what every student shares."""

    def __init__(self, key: Key, points: Points | None = None) -> None:
        self.key = key
        self.points = points or Points()
        self._reader: dict[tuple[str, str], Callable[[int], Values]] = {}
        self._feeds: dict[tuple[str, Where], frozenset[Where]] = {}

    def variant(self, sheet: AnswerSheet) -> Variant:
        """The sheet's variant; an unknown id is an :class:`InputError` naming the line."""
        if sheet.variant not in self.key.variants:
            known = ", ".join(list(self.key.variants)[:10])
            raise InputError(f"{sheet.where(sheet.variant_line)}: unknown variant id "
                             f"{sheet.variant!r} (the key {self.key.path} has {known}"
                             f"{', ...' if len(self.key.variants) > 10 else ''})")
        return self.key.variants[sheet.variant]

    def grade(self, sheet: AnswerSheet) -> StudentGrade:
        """Every asked entry of the sheet's variant graded; extras reported."""
        variant = self.variant(sheet)
        g = variant.derivation
        answers, problems, extra = self._sort(sheet, g)
        grades: dict[Where, EntryGrade] = {}
        for stage in self.key.asked:
            self._grade_stage(stage, variant, answers, problems, grades, str(sheet.path))
        for where, e in grades.items():
            if e.verdict not in ("right", "reader_rounding"):
                e.first_wrong = self._first_wrong(where, variant, grades)
        remarks = sorted(extra + sheet.unreadable_lines, key=lambda r: r.line or 0)
        result = StudentGrade(sheet, list(grades.values()), remarks)
        result.copied = self._copied(variant, answers)
        return result

    # -- reading the sheet -----------------------------------------------------------
    def _sort(self, sheet: AnswerSheet, g: Derivation
              ) -> tuple[dict[Where, tuple[Fraction | None, Entry]],
                         dict[Where, tuple[str, Entry]], list[Remark]]:
        """(readable answers, unreadable answers with why, extra entries)."""
        answers: dict[Where, tuple[Fraction | None, Entry]] = {}
        problems: dict[Where, tuple[str, Entry]] = {}
        seen: dict[Where, Entry] = {}
        extra: list[Remark] = []
        for e in sheet.entries:
            where = (e.stage, e.row, e.col)
            if e.stage not in self.key.asked:
                why = "not an asked stage" if e.stage in g else "no such stage"
                extra.append(Remark(e.line, f"{e.stage}{e.label} = {e.text}: {why}"))
                continue
            rows, cols = g[e.stage].shape
            if e.row >= rows or e.col >= cols:
                extra.append(Remark(e.line, f"{e.stage}{e.label} = {e.text}: outside the "
                                            f"stage ({rows}x{cols}, 0-based)"))
                continue
            if (e.row, e.col) not in self.key.variants[sheet.variant].cells(e.stage):
                extra.append(Remark(e.line, f"{e.stage}{e.label} = {e.text}: not asked "
                                            f"(off the token's path)"))
                continue
            if where in seen:
                if seen[where].text.strip() != e.text.strip():
                    answers.pop(where, None)
                    problems[where] = (f"two different answers, {seen[where].text!r} "
                                       f"(line {seen[where].line}) and {e.text!r}", e)
                continue
            seen[where] = e
            try:
                answers[where] = (e.value, e)
            except InputError:
                problems[where] = ("not a number", e)
        return answers, problems, extra

    # -- verdicts --------------------------------------------------------------------
    def _grade_stage(self, stage: str, variant: Variant,
                     answers: dict[Where, tuple[Fraction | None, Entry]],
                     problems: dict[Where, tuple[str, Entry]],
                     grades: dict[Where, EntryGrade], source: str) -> None:
        g = variant.derivation
        half = self.key.half
        rows, cols = g[stage].shape
        cells = variant.cells(stage)
        targets = {(r, c): (r, c, answers[stage, r, c][0], half)
                   for r, c in cells if (stage, r, c) in answers}
        verdicts = dict.fromkeys(targets, "wrong")
        right = decide(targets, lambda bits: g.evaluate(bits)[stage], g, stage, source)
        pending = {k: t for k, t in targets.items() if not right[k]}
        for k in targets:
            if right[k]:
                verdicts[k] = "right"
        if pending:
            for k in self._consistent(pending, self._reader_values(variant, stage), source):
                verdicts[k] = "reader_rounding"
                del pending[k]
        if pending and self._upstream(g, stage):
            for k in self._follows_through(variant, stage, pending, answers, source):
                verdicts[k] = "follow_through"
        points = self.points.of(stage)
        for r in range(rows):
            for c in range(cols):
                if (r, c) not in cells:
                    continue
                where = (stage, r, c)
                note, line, text = "", None, None
                if (r, c) in verdicts:
                    verdict = verdicts[r, c]
                    line, text = answers[where][1].line, answers[where][1].text
                elif where in problems:
                    verdict = "unreadable"
                    note, entry = problems[where]
                    line, text = entry.line, entry.text
                else:
                    verdict = "missing"
                grades[where] = EntryGrade(stage, r, c, verdict, text,
                                           variant.correct_text(stage, r, c), line, points,
                                           points * self.points.share(verdict),
                                           place(g[stage], r, c), note)

    def _upstream(self, g: Derivation, stage: str) -> list[str]:
        """The asked stages ``stage`` is computed from."""
        ancestors = g.ancestors(stage)
        return [s for s in self.key.asked if s in ancestors]

    def _reader_values(self, variant: Variant, stage: str) -> Callable[[int], Values]:
        """The step recomputed from the key's printed previous tables (cached)."""
        if (variant.id, stage) not in self._reader:
            g = variant.derivation
            upstream = self._upstream(g, stage)
            printed = variant.chain() or {}  # the key's own lines, where it has a path
            if upstream:
                chain = Chain(g, stage, replaced={
                    s: _exact(printed[s] if s in printed else variant.correct(s))
                    for s in upstream})
            else:
                chain = Chain(g, stage, rounded=dict.fromkeys(g.ancestors(stage),
                                                             self.key.decimals))
            self._reader[variant.id, stage] = _memo(chain, stage)
        return self._reader[variant.id, stage]

    def _consistent(self, targets: dict, values: Callable[[int], Values], source: str
                    ) -> list[tuple[int, int]]:
        """The targets proved within half a unit of ``values`` (undecided: no credit)."""
        try:
            verdicts = decide(targets, values, None, "", source)
        except UndecidedError:
            return []
        return [k for k, ok in verdicts.items() if ok]

    def _follows_through(self, variant: Variant, stage: str, pending: dict,
                         answers: dict[Where, tuple[Fraction | None, Entry]], source: str
                         ) -> list[tuple[int, int]]:
        """Pending entries proved consistent with the student's own previous asked
        tables (see the module docstring)."""
        g = variant.derivation
        upstream = self._upstream(g, stage)
        own = {s: _own(variant, s, answers) for s in upstream}
        half = self.key.half
        if g[stage].op.rows_sum_to_one:
            rows = _summable_rows(g, stage, answers, variant, half)
            pending = {k: t for k, t in pending.items() if k[0] in rows}
        if not pending:
            return []
        as_written = self._consistent(pending, _memo(Chain(
            g, stage, replaced={s: _exact(m) for s, m in own.items()}), stage), source)
        rest = {k: t for k, t in pending.items() if k not in as_written}
        if not rest:
            return as_written

        def intervals(matrix: list[list[Fraction | None]]) -> Callable[[], Values]:
            return lambda: [[None if v is None else ball(v, half) for v in row]
                            for row in matrix]

        boxes = Chain(g, stage, replaced={s: intervals(m) for s, m in own.items()})
        enclosure = boxes.evaluate(PRECISIONS[0])[stage]
        rest = {k: t for k, t in rest.items() if meets(enclosure[k[0]][k[1]], t[2], half)}
        if not rest or any(g[s].op.jumps for s in boxes.affected):
            return as_written  # an argmax jumps: no value between two is reached
        if not all(_finite(enclosure[r][c]) for r, c in rest):  # huge inputs: more bits
            enclosure = boxes.evaluate(POINT_PRECISIONS[-1])[stage]
        # a finite enclosure over the box: no division by a box holding 0, no root of
        # a negative number, so the step is continuous on the box
        rest = {k: t for k, t in rest.items() if _finite(enclosure[k[0]][k[1]])}
        return as_written + (_reached(g, stage, own, rest, half) if rest else [])

    # -- feedback --------------------------------------------------------------------
    def _first_wrong(self, where: Where, variant: Variant, grades: dict[Where, EntryGrade]
                     ) -> Where | None:
        """The first asked entry (in the asked order) that this one is computed from,
        directly or through other asked entries, where the student went wrong; this
        entry itself if none did and it is wrong."""
        feeding = self.feeding(variant, where)
        for stage in self._upstream(variant.derivation, where[0]):
            for w in sorted(w for w in feeding if w[0] == stage):
                if grades[w].verdict in WENT_WRONG:
                    return w
        return where if grades[where].verdict in WENT_WRONG else None

    def feeding(self, variant: Variant, where: Where) -> frozenset[Where]:
        """The asked entries ``where`` is computed from, through any stages (read from
        the local formulas: an entry multiplied by an exact 0 does not feed)."""
        if (variant.id, where) not in self._feeds:
            g = variant.derivation
            found: set[Where] = set()
            stage, r, c = where
            for symbol in g.local(stage)[r, c].free_symbols:
                source = g.owner(symbol)
                if source[0] in self.key.asked:
                    found.add(source)
                if self._upstream(g, source[0]):
                    found |= self.feeding(variant, source)
            self._feeds[variant.id, where] = frozenset(found)
        return self._feeds[variant.id, where]

    def _copied(self, variant: Variant,
                answers: dict[Where, tuple[Fraction | None, Entry]]) -> str:
        """A note when another variant's key matches more answers than the own."""
        def matches(v: Variant) -> int:
            return sum(v.correct(s)[r][c] == value for (s, r, c), (value, _) in answers.items())

        own = matches(variant)
        if not answers or own * 2 >= len(answers):
            return ""
        best = max((v for v in self.key.variants.values() if v is not variant),
                   key=matches, default=None)
        if best is None or matches(best) <= own:
            return ""
        found = matches(best)
        return (f"{found} of {plural(len(answers), 'answer')} {'is' if found == 1 else 'are'} "
                f"from variant {best.id}'s key ({own} from variant {variant.id}'s)")


def _exact(matrix: list[list[Fraction | None]]) -> Values:
    """Rationals as exact SymPy entries for a chain (None: masked)."""
    return [[None if v is None else sympy.Rational(v.numerator, v.denominator) for v in row]
            for row in matrix]


def _own(variant: Variant, stage: str,
         answers: dict[Where, tuple[Fraction | None, Entry]]) -> list[list[Fraction | None]]:
    """The student's table of ``stage``; the key's value where they wrote none (or
    wrote -inf for an entry that is not masked)."""
    def own(r: int, c: int, value: Fraction | None) -> Fraction | None:
        written = answers.get((stage, r, c), (value, None))[0]
        return value if written is None and value is not None else written

    return [[own(r, c, value) for c, value in enumerate(row)]
            for r, row in enumerate(variant.correct(stage))]


#: Precisions (bits) at which the sampled points of :func:`_reached` are evaluated.
POINT_PRECISIONS = (128, 1024)


def _summable_rows(g: Derivation, stage: str,
                   answers: dict[Where, tuple[Fraction | None, Entry]], variant: Variant,
                   half: Fraction) -> set[int]:
    """The rows of a softmax stage whose answers (the key's where none is written) can
    sum to 1 within their rounding, each entry within ``half`` of what is written."""
    rows: set[int] = set()
    for r, row in enumerate(_own(variant, stage, answers)):
        low = sum((v - half for v in row if v is not None), Fraction(0))
        high = sum((v + half for v in row if v is not None), Fraction(0))
        if low <= 1 <= high:
            rows.add(r)
    return rows


def _at(g: Derivation, stage: str, point: dict[str, list[list[Fraction | None]]],
        bits: int) -> Values:
    """The step computed from one point of the box: balls holding the point's rationals
    in, balls holding the step's value there out (ball arithmetic: no SymPy)."""
    def balls(matrix: list[list[Fraction | None]]) -> Callable[[], Values]:
        return lambda: [[None if v is None else ball(v) for v in row] for row in matrix]

    chain = Chain(g, stage, replaced={s: balls(m) for s, m in point.items()})
    return chain.evaluate(bits)[stage]


def _shifted(own: dict[str, list[list[Fraction | None]]],
             steps: dict[tuple[str, int, int], Fraction]) -> dict:
    """``own`` with the entries named in ``steps`` moved by their step."""
    out = {s: [list(row) for row in m] for s, m in own.items()}
    for (s, i, j), step in steps.items():
        out[s][i][j] += step
    return out


def _finite(e: object) -> bool:
    """Whether an entry is a finite number (exact, or a finite ball; not masked)."""
    return e is not None and (not isinstance(e, arb) or e.is_finite())


def _sign(e: object) -> int:
    """The sign of an entry's midpoint (a heuristic only: it picks points to try)."""
    if e is None:
        return 0
    x = float(e.mid()) if isinstance(e, arb) else float(e)
    return 0 if x != x or x == 0 else (1 if x > 0 else -1)


def _below(e: object, bound: Fraction) -> bool:
    """Certified ``e <= bound`` (False when a ball cannot tell)."""
    if e is None:
        return False
    if isinstance(e, arb):
        return bool(e.is_finite() and e <= ball(bound))
    return Fraction(int(e.p), int(e.q)) <= bound


def _above(e: object, bound: Fraction) -> bool:
    """Certified ``e >= bound`` (False when a ball cannot tell)."""
    if e is None:
        return False
    if isinstance(e, arb):
        return bool(e.is_finite() and e >= ball(bound))
    return Fraction(int(e.p), int(e.q)) >= bound


def _reached(g: Derivation, stage: str, own: dict[str, list[list[Fraction | None]]],
             pending: dict, half: Fraction) -> list[tuple[int, int]]:
    """The pending entries whose answer's rounding interval the step provably reaches
    from inputs within ``half`` of the student's own numbers.

    Points of the box are tried: its centre, and for each entry the two corners the
    step's secant slopes point to (a heuristic choice; any point of the box would
    do).  Each point's value is certified; when one is proved at most ``claimed +
    half`` and another at least ``claimed - half``, the step, continuous on the box
    (a convex set; the caller makes sure: a finite enclosure, no argmax), takes every
    value between them, so some input within the student's rounding gives a value
    that rounds to the answer.
    """
    chain = Chain(g, stage, replaced={s: _exact(m) for s, m in own.items()})
    computed = {s.name for s in g if s.name in chain.affected and s.name not in own}
    coordinates = [(s, i, j) for s in own
                   if any(s in g[c].inputs for c in computed)
                   for i, row in enumerate(own[s]) for j, v in enumerate(row) if v is not None]
    found: list[tuple[int, int]] = []
    refused: set = set()
    for bits in POINT_PRECISIONS:
        with precision(bits):
            centre = _at(g, stage, own, bits)
            slopes = {c: _at(g, stage, _shifted(own, {c: half}), bits) for c in coordinates}
            for key, (r, c, claimed, h) in pending.items():
                if key in found or key in refused:
                    continue
                direction = {x: half * _sign(_difference(slopes[x][r][c], centre[r][c]))
                             for x in coordinates}
                points = [centre[r][c], _at(g, stage, _shifted(own, direction), bits)[r][c],
                          _at(g, stage, _shifted(own, {x: -d for x, d in direction.items()}),
                              bits)[r][c]]
                if any(_below(p, claimed + h) for p in points) and \
                        any(_above(p, claimed - h) for p in points):
                    found.append(key)
                elif all(_decided(p, claimed, h) for p in points):
                    refused.add(key)  # certainly not reached from these points
        if len(found) + len(refused) == len(pending):
            break
    return found


def _decided(e: object, claimed: Fraction, h: Fraction) -> bool:
    """Whether both comparisons of ``e`` with ``claimed ± h`` are certain (a higher
    precision would not change them); masked and exact entries always are."""
    if not isinstance(e, arb):
        return True
    if not e.is_finite():
        return False
    high, low = ball(claimed + h), ball(claimed - h)
    return bool((e <= high or e > high) and (e >= low or e < low))


def _difference(a: object, b: object) -> object:
    """``a - b`` for entries (None when either is masked)."""
    if a is None or b is None:
        return None
    return a - b


def _memo(chain: Chain, stage: str) -> Callable[[int], Values]:
    """``bits -> the chain's target values``, at the first precision >= bits that
    decides its roundings, computed once per precision."""
    cache: dict[int, Values] = {}

    def values(bits: int) -> Values:
        if bits not in cache:
            for b in (p for p in PRECISIONS if p >= bits):
                result = chain.evaluate(b)
                if result is not None:
                    cache[bits] = result[stage]
                    break
            else:
                raise UndecidedError(f"cannot decide the roundings upstream of {stage}")
        return cache[bits]

    return values
