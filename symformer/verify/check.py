"""Decide which of an author's claimed numbers are right, and explain the wrong ones.

A claimed number c with d decimals is right when |exact - c| <= ½·10^-d (d: the claim's
``decimals``, or each number's own, from its significant digits or its printed text), decided
on certified balls (raising the precision until it is decided; an exact tie is
decided on the closed form).  A claim with ``inputs`` is checked locally: the step
is recomputed from the named claims' printed numbers taken exactly ("as printed"),
and it is *consistent* when the recomputation over every input inside its rounding
interval (ball arithmetic, an enclosure) meets the claimed interval.  Because the
enclosure can only be too wide, "inconsistent" is proved; "consistent" means not
refuted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction

from flint import arb

from symformer import conventions
from symformer.blocks import derive
from symformer.blocks.backward import stage_of
from symformer.blocks.generate import generation_run
from symformer.blocks.side_stages import add_side_stage
from symformer.blocks.train import Run, is_training_stage, step_of, train
from symformer.engine import Derivation
from symformer.engine.graph import Stage
from symformer.engine.rounding import round_fraction
from symformer.errors import InputError, UndecidedError
from symformer.example import Example
from symformer.example.expression import Constant
from symformer.lazy import sympy
from symformer.notation import entry, place
from symformer.verify import named, recompose
from symformer.verify.chain import (
    PRECISIONS,
    Chain,
    Partial,
    Values,
    ball,
    decide,
    round_values,
)
from symformer.verify.claims import Claim
from symformer.words import plural

#: Extra decimals shown for "the exact value to more digits".
MORE_DIGITS = 6


@dataclass
class EntryCheck:
    """The verdict on one claimed number (row and col are 0-based stage indices)."""

    row: int
    col: int
    row_label: str
    col_label: str
    claimed: str
    correct: str        # the correct rounding (local claims: of the step as printed)
    exact: str          # the same value to MORE_DIGITS more decimals
    ok: bool            # right (global) or consistent (local)
    symbol: str = ""    # the entry as every format writes it: q_0
    place: str = ""     # in words: "q_0 of 'think' (position 1)"
    line: int | None = None  # a document's line holding the number (print blocks)


@dataclass
class ClaimCheck:
    """The verdict on one claim."""

    claim: Claim
    entries: list[EntryCheck] = field(default_factory=list)
    explanations: list[str] = field(default_factory=list)

    @property
    def local(self) -> bool:
        """Checked as a step from its claimed inputs."""
        return bool(self.claim.inputs)

    @property
    def wrong(self) -> list[EntryCheck]:
        """The entries that are wrong (local: inconsistent)."""
        return [e for e in self.entries if not e.ok]


class Checker:
    """Checks claims against one example; caches its derivations and variants."""

    def __init__(self, example: Example, max_work: int | None = None,
                 causal: bool | None = None, run: Run | None = None) -> None:
        self.example = example
        self.max_work = max_work
        #: the training run that claims on a step's stages are about (``[train]``)
        self.run = run
        #: the masking of claims that do not say (None: the example's ``causal``)
        self.causal = example.causal if causal is None else causal
        self._derived: dict[tuple, Derivation] = {}

    def derivation(self, causal: bool, convention: conventions.Convention | None = None,
                   stage: str | None = None) -> Derivation:
        """The (cached) derivation, optionally under another convention; with the loss
        and its gradients appended when ``stage`` is one of them (only then); a training
        run's stage (``step1.layer1.W_1``) is in the run's derivation (:meth:`training`)."""
        if stage is not None and is_training_stage(stage):
            if convention is not None:
                raise InputError(f"{stage}: other conventions are not tried on a training run")
            g = self.training(causal, stage)
            add_side_stage(g, stage)  # an Adam step's parts, a path of a gradient
            g[stage]  # unknown: the message with the close names
            return g
        key = (causal, convention)
        if key not in self._derived:
            if convention is None:
                g = derive(self.example, causal=causal, max_work=self.max_work)
            else:
                g = conventions.derive_variant(self.example, convention, causal,
                                               self.max_work)
            self._derived[key] = g
        if stage is not None:
            stage_of(self._derived[key], stage)
        return self._derived[key]

    def training(self, causal: bool, stage: str) -> Derivation:
        """The derivation of the ``[train]`` run (built once per masking)."""
        key = (causal, "train")
        rule = self.example.decoding
        if self.run is None and rule is not None and (
                key not in self._derived or not rule.steps
                and step_of(stage) > self._generated_steps(key)):
            # generated as far as the latest claimed step when [decoding] gives no steps
            # (a seeded run's first steps are a shorter run's: the draws come in order)
            self._derived[key] = generation_run(self.example, stage, self.max_work)
        if key not in self._derived:
            if self.run is None:
                raise InputError(f"{stage} is a stage of a training run: give its settings in "
                                 f"a [train] table of the claims file (lr = ..., steps = ..., "
                                 f"optimizer = ...; docs/verify.md)")
            if not self.run.steps >= step_of(stage):
                raise InputError(f"{stage}: the [train] table takes "
                                 f"{plural(self.run.steps, 'step')}")
            run = self.run
            self._derived[key] = train(self.derivation(causal), run.lr, run.steps,
                                       run.optimizer, settings=run.options).graph
        return self._derived[key]

    def _generated_steps(self, key: tuple) -> int:
        """How many steps the generation run under ``key`` holds."""
        return max((step_of(s.name) for s in self._derived[key]
                    if is_training_stage(s.name)), default=0)

    def stage(self, name: str) -> Stage:
        """The stage ``name`` as claims see it (the checker's masking): a forward, backward
        or training run's stage."""
        return self.derivation(self.causal, stage=name)[name]

    def check_all(self, claims: list[Claim],
                  progress: Callable[[int, int, str], None] | None = None
                  ) -> list[ClaimCheck]:
        """Check every claim (claims with ``check = false`` are only inputs);
        ``progress(k, total, name)`` is called before claim ``k`` of ``total``.

        A claim without ``causal`` gets the checker's setting (the example's own
        unless forced), so that a causal example's claims are checked masked.
        """
        for claim in claims:
            if claim.causal is None:
                claim.causal = self.causal
        by_name = {c.name: c for c in claims}
        results = []
        for index, claim in enumerate(claims):
            if progress:
                progress(index + 1, len(claims), claim.name)
            if not claim.check:
                continue
            if claim.inputs:
                results.append(self.check_local(claim, by_name))
            else:
                result = self.check_global(claim)
                if result.wrong:
                    result.explanations = self.explain(claim, claims[:index])
                results.append(result)
        return results

    # -- global -------------------------------------------------------------------
    def check_global(self, claim: Claim) -> ClaimCheck:
        """Every claimed number against the certified exact value of its stage."""
        g = self.derivation(claim.causal, stage=claim.stage)
        verdicts = self._decide(claim, lambda bits: g.evaluate(bits)[claim.stage], g)
        return self._result(claim, g, verdicts,
                            lambda d: certified_rounding(g, claim.stage, d))

    def _decide(self, claim: Claim, values: Callable[[int], Values],
                g: Derivation | None = None) -> dict[tuple[int, int], bool]:
        """(i, j) of values -> right?, raising the precision until every entry is decided
        (``values``: of the claim's stage of ``g``, where a tie is proved)."""
        return decide(named.targets(claim), values, g, claim.stage, claim.where)

    def _result(self, claim: Claim, g: Derivation, verdicts: dict[tuple[int, int], bool],
                rounding: Callable[[int], list[list[str]]]) -> ClaimCheck:
        stage = g[claim.stage]
        tables: dict[int, list[list[str]]] = {}

        def rounded(decimals: int) -> list[list[str]]:
            # a claim coarser than units (6e3) is shown to whole units
            decimals = max(decimals, 0)
            if decimals not in tables:
                tables[decimals] = rounding(decimals)
            return tables[decimals]

        result = ClaimCheck(claim)
        for i, r in enumerate(claim.row_indices):
            for j, c in enumerate(claim.col_indices):
                d = claim.decimals_at(i, j)
                result.entries.append(EntryCheck(r, c, stage.rows[r], stage.cols[c],
                                                 claim.values[i][j], rounded(d)[r][c],
                                                 rounded(d + MORE_DIGITS)[r][c],
                                                 verdicts[i, j], entry(stage, c),
                                                 place(stage, r, c),
                                                 claim.row_lines[i] if claim.row_lines
                                                 else None))
        return result

    # -- local --------------------------------------------------------------------
    def check_local(self, claim: Claim, by_name: dict[str, Claim]) -> ClaimCheck:
        """The step from the claimed inputs: as printed, and interval consistency."""
        g = self.derivation(claim.causal, stage=claim.stage)
        printed_at = self._step(g, claim, by_name, exact_entry)
        verdicts_printed = self._decide(claim, printed_at)

        def interval(source: Claim, i: int, j: int) -> Callable[[], object]:
            return lambda: ball(source.number(i, j), source.half_at(i, j))

        enclosure = self._step(g, claim, by_name, interval)(PRECISIONS[0])
        consistent = {}
        for i, r in enumerate(claim.row_indices):
            for j, c in enumerate(claim.col_indices):
                consistent[i, j] = verdicts_printed[i, j] or meets(
                    enclosure[r][c], claim.number(i, j), claim.half_at(i, j))

        def rounding(decimals: int) -> list[list[str]]:
            # only the claimed entries: an entry nobody claimed may sit on a rounding
            # boundary its balls never leave (a row the printed inputs left exact)
            claimed = [(r, c) for r in claim.row_indices for c in claim.col_indices]
            for b in PRECISIONS:
                v = printed_at(b)
                rounded = round_values([[v[r][c] for r, c in claimed]], decimals)
                if rounded is not None:
                    table = [[""] * len(row) for row in v]
                    for (r, c), text in zip(claimed, as_text(rounded, decimals)[0]):
                        table[r][c] = text
                    return table
            raise UndecidedError(f"{claim.where}: cannot round the step as printed")

        result = self._result(claim, g, consistent, rounding)
        inconsistent = [e for e in result.entries if not e.ok]
        mismatched = sum(not v for v in verdicts_printed.values())
        if mismatched:
            result.explanations.append(
                f"{mismatched} of {len(verdicts_printed)} numbers differ from the step "
                f"recomputed from the inputs as printed"
                + ("; all are within what the inputs' rounding allows" if not inconsistent
                   else ""))
        return result

    def _step(self, g: Derivation, claim: Claim, by_name: dict[str, Claim],
              entry: Callable[[Claim, int, int], object]) -> Callable[[int], Values]:
        """The claim's stage at a precision, recomputed from its ``inputs`` claims (each
        number given by ``entry``): through the stages between (a chain), or, when the
        inputs are parts of the stage a worked line prints (the terms of a row, e^(s -
        max s), x - mu: :mod:`symformer.verify.recompose`), from them."""
        way = recompose.reading(g, claim.stage, set(claim.inputs))
        for name in claim.inputs:
            add_side_stage(g, name)
        replaced = {s: replacement([by_name[n]], entry, g[s].shape)
                    for s, n in claim.inputs.items()}
        if way is not None:
            return lambda bits: recompose.evaluate(g, claim.stage, way, replaced, bits)
        chain = Chain(g, claim.stage, replaced=replaced)
        return lambda bits: chain.evaluate(bits)[claim.stage]

    # -- explanations ---------------------------------------------------------------
    def explain(self, claim: Claim, before: list[Claim]) -> list[str]:
        """Conventions or reader rounding that reproduce every claimed number."""
        found = []
        alternatives = () if is_training_stage(claim.stage) else self.alternatives()
        for convention in alternatives:
            # the mask matters for causal claims and for the decoder (always masked)
            if convention.mask is not None and not claim.causal \
                    and self.derivation(claim.causal)[claim.stage].side != "decoder":
                continue
            try:
                g = self.derivation(claim.causal, convention, claim.stage)
            except InputError:  # no such stage (or no backward pass) under it
                continue
            if named.right_under(g, claim, lambda bits, g=g: g.evaluate(bits)[claim.stage]):
                found.append(f"every number is right under another convention: "
                             f"{convention.describe()}" + self._mask_note(claim, convention))
        found += named.explanations(self.derivation(claim.causal, stage=claim.stage), claim)
        reader = self.explain_reader_rounding(claim, before)
        if reader:
            found.append(reader)
        return found

    def _recomposed(self, g: Derivation, claim: Claim, before: list[Claim]
                    ) -> list[tuple[Callable[[int], Values], str]]:
        """The stage recomputed from the parts of it printed before (the terms of a
        row, e^{s − max s}, x − μ, a sum: :mod:`symformer.verify.recompose`), read as
        printed: (values at a precision, the tables cited)."""
        found = []
        for way in recompose.routes(g, claim.stage):
            parts = way.parts + way.optional
            used = [c for c in before if not c.inputs and c.stage in parts
                    and c.causal == claim.causal]
            if not used:
                continue
            for part in parts:
                add_side_stage(g, part)
            printed = _printed(g, used, exact_entry)
            found.append((lambda bits, r=way, p=printed: recompose.evaluate(
                g, claim.stage, r, p, bits), _as_printed(used)))
        return found

    def alternatives(self) -> tuple[conventions.Convention, ...]:
        """The conventions tried on a wrong claim: the other mask (-inf when the example
        masks with a number such as -1e9, else -1e9), then the LayerNorm variants and
        the norm placement (:data:`conventions.ALTERNATIVES`)."""
        if self.example.mask_value is None:
            return conventions.ALTERNATIVES
        return tuple(conventions.Convention(mask="-inf") if c.mask is not None else c
                     for c in conventions.ALTERNATIVES)

    def _mask_note(self, claim: Claim, convention: conventions.Convention) -> str:
        """Why a printed -inf is a convention, not an error, on an example masking with
        a finite number."""
        if convention.mask != "-inf" or not any(
                claim.number(i, j) is None for i, row in enumerate(claim.values)
                for j in range(len(row))):
            return ""
        shown = str(self.example.mask_value)
        digits = shown.rstrip("0")
        if "/" not in shown and len(shown) - len(digits) > 3:  # -1000000000 as -1e9
            shown = f"{digits}e{len(shown) - len(digits)}"
        return (f" (the example masks with {shown}, so a masked score is a large negative "
                f"number, not -inf; printing -inf for it is the -inf convention, not an "
                f"error)")

    def explain_reader_rounding(self, claim: Claim, before: list[Claim]) -> str | None:
        """Do the numbers follow from tables printed before them, read as printed?

        Tries the printed tables upstream of the claim (in the order printed; the
        longest prefix first: a later table may have been printed but not used), each
        replacing its stage exactly as printed (a table of some rows, or single
        entries, replaces those entries); only the tables the stage is then recomputed
        from are cited.  Without a whole table, every upstream stage rounded to the
        claim's decimals is tried too (last).
        """
        g = self.derivation(claim.causal, stage=claim.stage)
        upstream = g.ancestors(claim.stage)
        printed: list[Claim] = []  # whole tables, some of their rows, single entries
        for c in before:
            if c.inputs or c.stage not in upstream:
                continue
            if c.causal == claim.causal or not any(
                    g[s].op.keeps_mask for s in g.ancestors(c.stage) | {c.stage}):
                printed.append(c)
        wrong = [(i, j) for (i, j), ok in self._decide(
            claim, lambda bits: g.evaluate(bits)[claim.stage], g).items() if not ok]
        def replaced(used: list[Claim], moved: Claim | None = None) -> Chain:
            # moved: that table's numbers each moved by 1/7 (does the claim read it?)
            def entry(c: Claim, i: int, j: int) -> object:
                e = exact_entry(c, i, j)
                return e + sympy.Rational(1, 7) if c is moved and isinstance(
                    e, sympy.Basic) else e
            return Chain(g, claim.stage, replaced=_printed(g, used, entry))

        candidates: list[tuple[Callable[[int], Values | None], list[Claim] | None, str]] = []
        seen = set()
        for k in range(len(printed), 0, -1):
            chain = replaced(printed[:k])
            used = [c for c in printed[:k] if c.stage in chain.feeding()]
            cited = tuple(c.name for c in used)
            if cited and cited not in seen:  # tables only upstream of others: not read
                seen.add(cited)
                candidates.append((lambda bits, c=chain: _target(c, bits), used, ""))
        candidates[:0] = [(values, None, source)
                          for values, source in self._recomposed(g, claim, before)]
        if not any(c.whole and len(c.values) == g[c.stage].shape[0] for c in printed):
            # no whole table printed before: a reader may have rounded every stage
            decimals = max(0, max(claim.decimals_at(i, j) for i, row in enumerate(claim.values)
                                  for j in range(len(row))))
            rounded = Chain(g, claim.stage, rounded=dict.fromkeys(upstream, decimals))
            candidates.append((lambda bits, c=rounded: _target(c, bits), None,
                               f"every stage before it rounded to {decimals} decimals"))

        def verdicts_of(values: Callable[[int], Values | None]) -> dict | None:
            try:
                return self._decide(claim, values)
            except UndecidedError:  # a reader's rounding nothing decides: no explanation
                return None

        claimed = [(r, c) for r in claim.row_indices for c in claim.col_indices]

        def read(used: list[Claim], moved: Claim | None = None) -> list:
            values = _target(replaced(used, moved), PRECISIONS[0])
            return [values[r][c] for r, c in claimed]

        def cited(used: list[Claim]) -> str:
            # only the tables the claimed entries are read from: one whose numbers, each
            # moved, leave every claimed entry as it was (q_3 for the row q_1 k_j, a
            # table a later one of the same entries replaces) is not cited
            values = read(used)
            used = [c for c in used if _irrational(c)
                    or not all(map(_same, read(used, c), values))] or used
            return _as_printed(used)

        best: tuple[int, str, int] = (0, "", 0)
        for values, used, source in candidates:
            verdicts = verdicts_of(values)
            if verdicts is None:
                continue
            if all(verdicts.values()):
                source = cited(used) if used is not None else source
                return f"reader rounding: every number is what a reader gets recomputing " \
                       f"from {source}"
            explained = sum(verdicts[i, j] for i, j in wrong)
            if explained > best[0]:
                best = (explained, cited(used) if used is not None else source,
                        sum(not ok for ok in verdicts.values()) - (len(wrong) - explained))
        if not best[0]:
            return None
        explained, source, lost = best
        if explained < len(wrong):
            return (f"reader rounding explains {explained} of the {len(wrong)} wrong "
                    f"numbers: recomputed from {source}; the rest do not follow from them")
        every = "the 1 wrong number" if len(wrong) == 1 else f"all {len(wrong)} wrong numbers"
        return (f"reader rounding explains {every}: recomputed from {source}; but "
                f"{plural(lost, 'number')} claimed right would then be wrong")


def _printed(g: Derivation, used: list[Claim], entry: Callable[[Claim, int, int], object]
             ) -> dict[str, object]:
    """The stages ``used`` claims print, each replaced by its claims' numbers (``entry``
    gives each), for a :class:`Chain` or :func:`recompose.evaluate`."""
    by_stage: dict[str, list[Claim]] = {}
    for c in used:
        by_stage.setdefault(c.stage, []).append(c)
    return {s: replacement(cs, entry, g[s].shape) for s, cs in by_stage.items()}


def _as_printed(used: list[Claim]) -> str:
    """The source a reader-rounding "why" cites: the tables of ``used``, by name."""
    return ("the tables printed before it, as printed ("
            + ", ".join(dict.fromkeys(c.name for c in used)) + ")")


def _irrational(claim: Claim) -> bool:
    """Does the claim give an exact irrational number ("log(2)", never moved)?"""
    return any(isinstance(claim.number(i, j), Constant) for i, row in enumerate(claim.values)
               for j in range(len(row)))


def _same(a: object, b: object) -> bool:
    """Are two entries of a chain the same (an exact rational, or an identical ball:
    the same computation from the same numbers)?"""
    if isinstance(a, arb) and isinstance(b, arb):
        return bool(a.mid() == b.mid() and a.rad() == b.rad())
    if isinstance(a, arb) or isinstance(b, arb):
        return False
    return a == b


def _target(chain: Chain, bits: int) -> Values | None:
    """The chain's target at ``bits``, or None when a rounding upstream is undecided."""
    values = chain.evaluate(bits)
    return None if values is None else values[chain.target]


def meets(enclosure, claimed: Fraction | None, half: Fraction) -> bool:
    """Can a value in ``enclosure`` round to ``claimed``?  (False only when certain.)"""
    if enclosure is None or claimed is None:
        return enclosure is None and claimed is None
    centre, h = ball(claimed), ball(half)
    return not (enclosure < centre - h or enclosure > centre + h)


def exact_entry(claim: Claim, i: int, j: int) -> object:
    """The claim's number values[i][j] exactly: a rational (an irrational one as its
    :class:`~symformer.example.expression.Constant`, taken in balls; None: -inf)."""
    n = claim.number(i, j)
    return n if n is None or isinstance(n, Constant) else sympy.Rational(n.numerator,
                                                                         n.denominator)


def replacement(claims: list[Claim], entry: Callable[[Claim, int, int], object],
                shape: tuple[int, int]) -> object:
    """What the claims' numbers (all of one stage, later ones first in a clash) put in
    place of the stage, for a :class:`~symformer.verify.chain.Chain`: ``entry(claim, i,
    j)`` of each number (a value, or a callable giving one at the chain's precision).
    A single claim of the whole ``shape`` gives a matrix (a callable building it when
    ``entry`` gives callables); claims of some rows or entries (a single row printed
    without ``rows`` is row 0) give a :class:`~symformer.verify.chain.Partial`, the other
    entries staying exact."""
    if len(claims) == 1 and claims[0].whole \
            and (len(claims[0].values), len(claims[0].values[0])) == shape:
        c = claims[0]
        cells = [[entry(c, i, j) for j in range(len(row))] for i, row in enumerate(c.values)]
        if any(callable(e) for row in cells for e in row):
            return lambda: [[e() for e in row] for row in cells]
        return cells
    return Partial({(r, col): entry(c, i, j) for c in claims
                    for i, r in enumerate(c.row_indices) for j, col in enumerate(c.col_indices)})


def as_text(values: Values, decimals: int) -> list[list[str]]:
    """Rounded rational entries as fixed-point text ("-inf" for masked scores)."""
    return [["-inf" if e is None else
             round_fraction(Fraction(int(e.p), int(e.q)), decimals=decimals).fixed()
             for e in row] for row in values]


def certified_rounding(g: Derivation, name: str, decimals: int) -> list[list[str]]:
    """A stage's correct roundings: the engine's (exp(-1e9) and exact ties included)."""
    return g[name].values(decimals=decimals)


def summary(results: list[ClaimCheck]) -> tuple[int, int]:
    """(numbers right, numbers checked) over all claims."""
    total = sum(len(r.entries) for r in results)
    return total - sum(len(r.wrong) for r in results), total
