"""Equations as claims: an author's general equation checked against the derivation.

A claims file's ``[[equation]]`` table (or a ``% symformer: equation STAGE`` tag in
notes, before an ``equation``/``align``/``$$`` block) gives a stage and the LaTeX an
author printed for it.  The left-hand side is the stage (its index letters are free:
every entry); every other symbol is bound through the example's notation
(:mod:`symformer.verify.equation_bind`) or the claim's ``where``.  Each right-hand
side (an ``align`` chain: each link) is evaluated at every entry in certified ball
arithmetic (:mod:`symformer.verify.equation_eval`) and compared with the stage's
certified value -- on the example and on a few random examples of the same shape
and conventions (other exact small rational weights, drawn as exercise sheets draw
theirs: :mod:`symformer.exercise.draw`), so that a wrong equation cannot pass by
coincidence at one example's numbers.

Verdicts (:class:`EquationCheck`): ``holds`` (every entry of every example tried
agrees to :data:`DIGITS` digits: checked, not proved), ``fails`` (a certified
difference, with the first entry and both values), ``example only`` (holds on the
example, fails on a random one), ``undecided``.  A failing equation is also tried
under the other conventions of :mod:`symformer.conventions`, with its indices
counted from the other base, and as a constant multiple (a mean for a sum).
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path

from flint import arb, fmpq

from symformer import conventions
from symformer.blocks.backward import stage_of
from symformer.blocks.train import Run, is_training_stage, step_of, train
from symformer.blocks.work import check_work
from symformer.engine import Derivation
from symformer.engine.arbmath import precision
from symformer.errors import InputError
from symformer.example import Example
from symformer.example.loader import read_text_file, read_toml
from symformer.verify import equation_cost as cost
from symformer.verify import equation_steps as steps
from symformer.verify import equation_variants as variants
from symformer.verify import latex_math as lm
from symformer.verify.equation_bind import (
    SymbolTable,
    Target,
    key_of,
    own_symbols,
    where_table,
)
from symformer.verify.equation_defs import expand, split_definitions
from symformer.verify.equation_eval import (
    Env,
    Evaluator,
    Inapplicable,
    Mat,
    NotAtStep,
    Outside,
    Undecided,
    symbols_of,
)
from symformer.verify.equation_random import random_derivation

#: Digits to which an equation's value must agree with the stage's at every entry.
DIGITS = 50
#: Precisions (bits) tried in turn.
PRECISIONS = (200, 400, 800)
#: Random examples tried by default (``examples = k`` in a claim: 0 to MAX_EXAMPLES).
EXAMPLES = 4
MAX_EXAMPLES = 8
#: The relative tolerances (10^-k) an approximation (``\\approx``) is tried within.
APPROXIMATION_DIGITS = (8, 6, 4, 3, 2)
_KEYS = {"name", "stage", "latex", "where", "vectors", "examples", "causal", "tolerance",
         "layout", "tile"}
_TAG = re.compile(r"(?:(?<!\\)%|<!--)\s*symformer:\s*equation\s+(?P<body>.*?)\s*(?:-->)?\s*$")


@dataclass
class EquationClaim:
    """One claimed equation: the stage it describes, its LaTeX, its bindings."""

    name: str
    stage: str
    latex: str
    where: dict[str, str] = field(default_factory=dict)
    vectors: str = "row"          # "row" (q = x W_Q) or "column" (q = W_Q^T x)
    examples: int = EXAMPLES      # random examples besides the example itself
    causal: bool | None = None
    source: str = ""              # for messages: file and claim number or line
    line: int | None = None       # a document's line of the block
    chains: list[lm.Chain] = field(default_factory=list)
    #: Why the LaTeX cannot be read, when ``lenient`` (else that is raised at once).
    unreadable: str = ""
    lenient: bool = False
    #: a relative tolerance (``tolerance = "1e-6"``: constants printed to a few digits)
    tolerance: Fraction | None = None
    #: ``"rows"`` (a token per row, the example's) or ``"columns"`` (a token per column:
    #: every matrix the equation names is the stage's transpose, softmax per column)
    layout: str = "rows"
    #: keys per tile (``tile = 2``): each ``where`` symbol X bound to a stage also names
    #: its tiles of keys X_1, X_2, ... (FlashAttention's K_j, V_j, S_j); None: no tiles
    tile: int | None = None

    def __post_init__(self) -> None:
        if not self.chains:
            try:
                self.chains = lm.parse_equations(self.latex)
            except InputError as error:
                if not self.lenient:
                    raise InputError(f"{self.source}: {error}") from None
                self.unreadable = f"{self.source}: {error}"


#: The verdict on an equation that cannot be read (an unknown macro or symbol).
UNREADABLE = "cannot be read"


@dataclass
class Link:
    """The verdict on one right-hand side of one line."""

    line: int
    link: int
    status: str                 # holds, fails, example only, undecided
    message: str
    entries: int = 0
    notes: list[str] = field(default_factory=list)
    #: the entries (i, j) of the stage it was compared at, of ``total``
    covered: frozenset = field(default=frozenset(), repr=False)
    total: int = 0
    #: the stage it is about (an align's line about another stage of a run: its own)
    stage: str = field(default="", repr=False)


#: The verdict on an equation that agrees at every entry of the example but could not be
#: tried on a random example (not "holds": it may agree by coincidence).
UNTRIED = "holds on this example only"
#: The verdict on an equation that agrees where it was compared but does not cover
#: every entry of its stage (never "holds": a verdict only over what was compared).
INCOMPLETE = "incomplete"


@dataclass
class EquationCheck:
    """The verdicts on every link of one claimed equation."""

    claim: EquationClaim
    links: list[Link]

    @property
    def unreadable(self) -> str:
        """The one line saying why the equation cannot be read, naming the claim ("": it
        was read)."""
        why = next((k.message for k in self.links if k.status == UNREADABLE), "")
        return f"{self.claim.source}: {why}" if why and self.claim.source else why

    @property
    def ok(self) -> bool:
        """Does every link hold?"""
        return all(k.status == "holds" for k in self.links)


# -- reading ------------------------------------------------------------------------
def equations_from_toml(data: Mapping, source: str) -> list[EquationClaim]:
    """The ``[[equation]]`` tables of a parsed claims file."""
    tables = data.get("equation", [])
    if not isinstance(tables, list):
        raise InputError(f"{source}: equation must be [[equation]] tables")
    out = []
    for n, t in enumerate(tables, start=1):
        where = f"{source}, equation {n}"
        if not isinstance(t, dict):
            raise InputError(f"{where}: must be a table")
        unknown = sorted(set(t) - _KEYS)
        if unknown:
            raise InputError(f"{where}: unknown key {unknown[0]!r} "
                             f"(known keys: {', '.join(sorted(_KEYS))})")
        for key in ("stage", "latex"):
            if not isinstance(t.get(key), str):
                raise InputError(f"{where}: {key} must be a string")
        bindings = t.get("where", {})
        if not isinstance(bindings, dict) or not all(
                isinstance(v, str) for v in bindings.values()):
            raise InputError(f"{where}: where must map symbols to stage names, "
                             f"e.g. {{ s = \"layer1.head1.scores\" }}")
        vectors = t.get("vectors", "row")
        if vectors not in ("row", "column"):
            raise InputError(f"{where}: vectors must be \"row\" or \"column\"")
        examples = t.get("examples", EXAMPLES)
        if isinstance(examples, bool) or not isinstance(examples, int) \
                or not 0 <= examples <= MAX_EXAMPLES:
            raise InputError(f"{where}: examples must be a whole number from 0 to "
                             f"{MAX_EXAMPLES}")
        causal = t.get("causal")
        if causal is not None and not isinstance(causal, bool):
            raise InputError(f"{where}: causal must be true or false")
        name = t.get("name", t["stage"])
        out.append(EquationClaim(str(name), t["stage"], t["latex"], dict(bindings),
                                 vectors, examples, causal, f"{where} ({name})",
                                 lenient=True, tolerance=_tolerance(t, where),
                                 layout=_layout(t, where), tile=_tile(t, where)))
    return out


def _tile(table: Mapping, where: str) -> int | None:
    """A claim's ``tile``: how many keys a tile holds (None: no tiles)."""
    tile = table.get("tile")
    if tile is None:
        return None
    if isinstance(tile, bool) or not isinstance(tile, int) or not 1 <= tile <= 1_000_000:
        raise InputError(f"{where}: tile must be a whole number of keys from 1 to "
                         f"1,000,000")
    return tile


def _layout(table: Mapping, where: str) -> str:
    layout = table.get("layout", "rows")
    if layout not in ("rows", "columns"):
        raise InputError(f"{where}: layout must be \"rows\" or \"columns\" (a token per "
                         f"column: Q = W_Q X)")
    return layout


def _tolerance(table: Mapping, where: str) -> Fraction | None:
    """A claim's ``tolerance``: a relative tolerance, ``"1e-6"`` (a string or a number
    above 0 and below 1), read exactly."""
    value = table.get("tolerance")
    if value is None:
        return None
    text = str(value).strip()
    if isinstance(value, bool) or not re.fullmatch(r"\d{0,20}(?:\.\d{0,40})?(?:[eE]-?\d{1,3})?",
                                                   text) or not re.search(r"\d", text):
        raise InputError(f"{where}: tolerance must be a relative tolerance such as \"1e-6\"")
    exact = Fraction(text)
    if not 0 < exact < 1:
        raise InputError(f"{where}: tolerance must be above 0 and below 1, found {text}")
    return exact


def has_equation_tags(text: str) -> bool:
    """Does a document hold ``symformer: equation`` tags?"""
    return any(_TAG.search(line) for line in text.splitlines())


def equations_from_document(text: str, source: str) -> list[EquationClaim]:
    """The tagged ``equation``/``align``/``$$``/``\\[`` blocks of LaTeX or Markdown notes."""
    lines = text.splitlines()
    out = []
    for n, line in enumerate(lines, start=1):
        match = _TAG.search(line)
        if not match:
            continue
        where = f"{source}, line {n}"
        stage, bindings = _tag_body(match.group("body"), where)
        start = n
        while start < len(lines) and not lines[start].strip():
            start += 1
        if start >= len(lines):
            raise InputError(f"{where}: no equation block after the tag")
        block, first = _block(lines, start, where)
        out.append(EquationClaim(f"line {first}", stage, block, bindings,
                                 source=f"{source}, line {first}", line=first, lenient=True))
    return out


def _tag_body(body: str, where: str) -> tuple[str, dict[str, str]]:
    stage, _, rest = body.partition(" ")
    if not re.fullmatch(r"[A-Za-z_][\w.]*", stage):
        raise InputError(f"{where}: expected 'symformer: equation STAGE' "
                         f"(optionally 'where s=STAGE, ...'), found {body!r}")
    rest = rest.strip()
    bindings: dict[str, str] = {}
    if rest:
        if not rest.startswith("where "):
            raise InputError(f"{where}: expected 'where SYMBOL=STAGE, ...' after the "
                             f"stage, found {rest!r}")
        for item in rest.removeprefix("where ").split(","):
            symbol, sep, target = item.partition("=")
            if not sep or not symbol.strip() or not target.strip():
                raise InputError(f"{where}: expected SYMBOL=STAGE, found {item.strip()!r}")
            bindings[symbol.strip()] = target.strip()
    return stage, bindings


_BEGIN = re.compile(r"\\begin\{(equation\*?|align\*?|gather\*?)\}")


def _block(lines: list[str], start: int, where: str) -> tuple[str, int]:
    """The math block starting at ``lines[start]`` and its 1-based line."""
    first = lines[start].strip()
    begin = _BEGIN.match(first)
    if begin:
        end = f"\\end{{{begin.group(1)}}}"
        for k in range(start, len(lines)):
            if end in lines[k]:
                body = "\n".join(lines[start:k + 1])
                return body[body.index("}") + 1:body.rindex(end)], start + 1
        raise InputError(f"{where}: no {end} after \\begin{{{begin.group(1)}}}")
    for open_, close in (("$$", "$$"), ("\\[", "\\]")):
        if first.startswith(open_):
            rest = "\n".join(lines[start:])[len(open_):]
            stop = rest.find(close)
            if stop < 0:
                raise InputError(f"{where}: no closing {close}")
            return rest[:stop], start + 1
    raise InputError(f"{where}: the tag must stand on the line before an equation, "
                     f"align or $$ block (found {first[:40]!r})")


def load_equations(path: str | Path) -> list[EquationClaim]:
    """The equation claims of a claims TOML file or of tagged notes (none: [])."""
    path = Path(path)
    text = read_text_file(path, "a claims file")
    if path.suffix == ".toml":
        return equations_from_toml(read_toml(text, str(path)), str(path))
    return equations_from_document(text, str(path))


# -- judging ------------------------------------------------------------------------
@dataclass
class _Outcome:
    status: str          # holds, fails, undecided
    entries: int = 0
    message: str = ""
    ratio: object = None  # rhs / stage when every entry's ratio is one constant
    total: int = 0       # the stage's entries (more than ``entries``: a line covers some)
    covered: frozenset = frozenset()  # the entries (i, j) compared


class Judge:
    """Checks equation claims on one example (and its random variants)."""

    def __init__(self, example: Example, derivation: Callable[..., Derivation],
                 causal: bool, run: Run | None = None, max_work: int | None = None) -> None:
        self.example = example
        self.derivation = derivation  # (causal, convention, stage) -> Derivation
        self.causal = causal
        self.run = run  # the [train] run a training stage's equation is about
        #: the work limit each equation's estimate is held to (None: the default)
        self.max_work = max_work
        self._random: dict[tuple[int, bool, bool], Derivation | None] = {}
        self._tables: dict[int, SymbolTable] = {}
        self._own: dict[tuple[int, str], dict] = {}

    def check_each(self, claims: list[EquationClaim]) -> list[EquationCheck]:
        """Every claim's verdicts; one that cannot be read (its LaTeX, or a symbol the
        notation does not have) gets the verdict :data:`UNREADABLE` with its one line,
        and the others are judged all the same."""
        out = []
        for claim in claims:
            try:
                out.append(self.check(claim))
            except InputError as error:
                why = str(error).removeprefix(f"{claim.source}: ")
                out.append(EquationCheck(claim, [Link(1, 1, UNREADABLE, why)]))
            except (IndexError, KeyError, TypeError, ValueError, AttributeError,
                    RecursionError) as error:
                if os.environ.get("SYMFORMER_DEBUG"):  # the tests: a bug shows itself
                    raise
                # a form this reader does not handle: never a verdict, one line
                why = (f"cannot read the equation: a form the checker does not read "
                       f"({type(error).__name__})")
                out.append(EquationCheck(claim, [Link(1, 1, UNREADABLE, why)]))
        return out

    def check(self, claim: EquationClaim) -> EquationCheck:
        """Every link of every line of ``claim`` (an unreadable or unbound symbol: an
        InputError naming the claim)."""
        if claim.unreadable:
            raise InputError(claim.unreadable)
        try:
            return self._check(claim)
        except InputError as error:
            text = str(error)
            if claim.source and not text.startswith(claim.source):
                raise InputError(f"{claim.source}: {text}") from None
            raise

    def _check(self, claim: EquationClaim) -> EquationCheck:
        causal = self.causal if claim.causal is None else claim.causal
        if is_training_stage(claim.stage):
            return EquationCheck(claim, self._check_steps(claim, causal))
        return EquationCheck(claim, self._check_at(claim, causal))

    def _check_at(self, claim: EquationClaim, causal: bool, repeats: int = 1) -> list[Link]:
        """Every link of ``claim`` on its stage (one step of a run; ``repeats``: the
        steps it is judged at, counted in the work estimate)."""
        g = self._derivation(causal, claim.stage)
        self._gradients(g, claim)
        links = []
        training = is_training_stage(claim.stage)
        claimed, definitions = split_definitions(
            claim.chains, (lambda c: self.lhs_stage(claim, c, g) is not None)
            if training else None)
        chains = [expand(chain, definitions) for chain in claimed]
        if training:  # θ ← θ − η g: θ on the right is θ_{t-1}
            chains = [steps.before_update(chain) for chain in chains]
        # an align of several lines: a line whose left-hand side is another stage of the
        # run (m_t above θ_t) is judged against that stage
        about = [self.lhs_stage(claim, c, g) if training and len(chains) > 1 else None
                 for c in chains]
        work = 0
        for chain in chains:
            for rhs in chain.rhs:
                cost.check_tree(rhs)
                work += self.work(claim, rhs, g)
        check_work(work * repeats, self.max_work, f"{claim.source}: judging the equation")
        for chain, stage in zip(chains, about):
            mine = claim if stage is None else replace(claim, stage=stage)
            found = [self.judge_link(mine, chain, rhs, k, g, causal)
                     for k, rhs in enumerate(chain.rhs, start=1)]
            for link in found:
                link.stage = mine.stage
                if stage is not None:
                    link.message = f"(of {stage}) {link.message}"
            links += found
        for stage in {link.stage for link in links}:
            _coverage([k for k in links if k.stage == stage], stage)
        return links

    def lhs_stage(self, claim: EquationClaim, chain: lm.Chain, g: Derivation) -> str | None:
        """The run's stage a training line's step-subscripted left-hand side names
        (``m_t``: the first moment at the claimed step), when it is not the claimed one;
        else None."""
        lhs = chain.lhs
        if not (isinstance(lhs, lm.Sym) and steps.step_subscript(lhs) is not None):
            return None
        ev = Evaluator(g, self.table(g), where_table(claim.where, g, claim.source, claim.tile),
                       claim.stage, {}, own=self.own(g, claim.stage),
                       step=step_of(claim.stage))
        try:
            target, _, _ = ev.resolve(lhs)
        except (InputError, Inapplicable, NotAtStep):
            return None
        if not isinstance(target, Target) or target.parameter is not None \
                or target.stage is None or target.stage == claim.stage \
                or target.stage not in g.stages:
            return None
        return target.stage

    def _check_steps(self, claim: EquationClaim, causal: bool) -> list[Link]:
        """A training stage's claim at its step, and -- an equation in t, general -- at
        every step of the run (at least :data:`~.equation_steps.MIN_STEPS`), its stage
        and ``where`` moved to each: the first step where a link does not hold is
        reported."""
        claimed = step_of(claim.stage)
        general = steps.mentions_t(claim.chains) or any(c.update for c in claim.chains)
        run_steps = self.run.steps if self.run is not None else claimed
        links: list[Link] = []
        judged = []
        judging = steps.steps_to_judge(claimed, run_steps, general)
        for s in judging:
            stage = steps.shift(claim.stage, s - claimed)
            where = steps.shifted_where(claim.where, s - claimed)
            if stage is None or where is None:
                continue
            try:
                found = self._check_at(replace(claim, stage=stage, where=where), causal,
                                       len(judging))
            except NotAtStep as error:
                if s == claimed:
                    raise InputError(str(error)) from None
                continue  # a step the equation's symbols do not all exist at
            judged.append(s)
            if not links:
                links = found
                continue
            for k, link in enumerate(found):
                if links[k].status in ("holds", UNTRIED) and link.status != links[k].status:
                    link.message = f"at step {s} ({stage}): {link.message}"
                    links[k] = link
        if general and len(judged) > 1:
            for link in links:
                if link.status in ("holds", UNTRIED):
                    link.message += (f"; at each of the steps {_steps(judged)} of the run "
                                     f"(t the step)")
        return links

    def _derivation(self, causal: bool, stage: str) -> Derivation:
        """The derivation ``stage`` is in; a step past the run's own is in a longer run
        of the same settings (a general equation is judged at every step, at least
        :data:`~.equation_steps.MIN_STEPS`)."""
        if not is_training_stage(stage) or self.run is None \
                or step_of(stage) <= self.run.steps:
            return self.derivation(causal, None, stage)
        key = (-1, causal, True)
        if key not in self._random:
            run = self.run
            longer = max(run.steps, steps.MIN_STEPS, step_of(stage))
            self._random[key] = train(self.derivation(causal), run.lr, longer,
                                      run.optimizer, settings=run.options).graph
        g = self._random[key]
        stage_of(g, stage)
        return g

    def _gradients(self, g: Derivation, claim: EquationClaim) -> None:
        """The backward pass, when the example has a loss (an equation may read any
        gradient)."""
        if self.example.loss is not None and "grad.loss" not in g.stages \
                and not is_training_stage(claim.stage):
            stage_of(g, "grad.loss")

    def work(self, claim: EquationClaim, rhs: lm.Node, g: Derivation) -> int:
        """The estimated operations of judging one link (:mod:`.equation_cost`): its
        nodes at every entry, a sum's terms counted from its limits."""
        if claim.stage not in g.stages:
            stage_of(g, claim.stage)
        r, c = g[claim.stage].shape
        widest = max(max(s.shape) for s in g)
        ev = Evaluator(g, self.table(g), {}, claim.stage, {},
                       own=self.own(g, claim.stage))

        def size(sym: lm.Node) -> int | None:
            try:
                target, _, _ = ev.resolve(sym)
                return ev.size(target) if isinstance(target, str) else None
            except (InputError, Inapplicable, NotAtStep, ValueError, AttributeError):
                return None

        count = cost.nodes(rhs, size, widest)
        return cost.equation_work(count, r * c, 1 + max(claim.examples, cost.EXPLAINED))

    def own(self, g: Derivation, stage: str) -> dict:
        """:func:`own_symbols`, once per derivation and stage."""
        key = (id(g), stage)
        if key not in self._own:
            self._own[key] = own_symbols(g, stage)
        return self._own[key]

    def table(self, g: Derivation) -> SymbolTable:
        key = id(g)
        if key not in self._tables or self._tables[key].g is not g:
            self._tables[key] = SymbolTable(g)
        return self._tables[key]

    def judge_link(self, claim: EquationClaim, chain: lm.Chain, rhs: lm.Node, k: int,
             g: Derivation, causal: bool) -> Link:
        base = _base(chain)
        here = self.outcome(claim, chain.lhs, rhs, g, base)
        lhs = _shown_lhs(chain.lhs)
        if here.status == "undecided":
            return Link(chain.line, k, "undecided", here.message, here.entries)
        covered = {"covered": here.covered, "total": here.total}
        if here.status == "fails":
            return Link(chain.line, k, "fails", here.message, here.entries,
                        self.explain(claim, chain, rhs, g, causal, base, here))
        tried = 0
        for variant in range(1, claim.examples + 1):
            other = self.random(variant, causal, claim.stage)
            if other is None:
                break
            tried += 1
            there = self.outcome(claim, chain.lhs, rhs, other, base)
            if there.status == "fails":
                return Link(chain.line, k, "example only",
                            f"{lhs} agrees at {_all(here)} of this "
                            f"example but not on random example {variant}: "
                            f"{there.message}", here.entries)
        if not tried:
            why = "this example's weights cannot be redrawn" if claim.examples else \
                "examples = 0"
            return Link(chain.line, k, UNTRIED,
                        f"agrees at {_all(here)} of this example (certified to {DIGITS} "
                        f"digits), but no random example was tried ({why}): a check at "
                        f"one example's numbers is not enough to say it holds",
                        here.entries, **covered)
        how = f"certified to {DIGITS} digits" if claim.tolerance is None else \
            f"within the relative tolerance {_decimal(claim.tolerance)}, certified"
        return Link(chain.line, k, "holds",
                    f"agrees at {_all(here)} of this example and of "
                    f"{plural(tried, 'random example')} ({how})",
                    here.entries, **covered)

    def outcome(self, claim: EquationClaim, lhs: lm.Node, rhs: lm.Node, g: Derivation,
                base: int, tolerance: Fraction | None = None) -> _Outcome:
        """Compare ``rhs`` with the stage at every entry of ``lhs``, raising the
        precision until every entry is decided (within the relative ``tolerance``, else
        the claim's, else to :data:`DIGITS` digits)."""
        relative = tolerance if tolerance is not None else claim.tolerance
        if claim.stage not in g.stages:
            stage_of(g, claim.stage)
        table = self.table(g)
        where = {**_argument_bindings(lhs, g, claim.stage),
                 **where_table(claim.where, g, claim.source, claim.tile)}
        words = frozenset(k[0] for k in table.entries if len(k[0]) > 1 and k[0].isalpha())
        if isinstance(lhs, lm.Binary) and lhs.op == "jux":
            merger = Evaluator(g, table, where, claim.stage, {}, base, words=words)
            lhs = merger.merge_words(lhs, Env())
        step = None
        if is_training_stage(claim.stage):  # θ_t, θ_{t+1}: the left-hand side fixes t
            step = step_of(claim.stage)
            if isinstance(lhs, lm.Sym) and (k := steps.step_subscript(lhs)) is not None:
                lhs, step = replace(lhs, sub=None), step - k
            _moved_stages(g, claim, lm.Chain(lhs, (rhs,)), step)
        name, row_form = _function_form(lhs)
        shown = _shown_lhs(lhs if row_form is None else name)
        for bits in PRECISIONS:
            with precision(bits):
                balls = g.evaluate(bits)
                ev = Evaluator(g, table, where, claim.stage, balls, base,
                               claim.vectors == "column", words, self.own(g, claim.stage),
                               step, claim.layout == "columns")
                try:
                    pairs = list(self.pairs(ev, lhs, rhs, claim, balls))
                except Inapplicable as error:
                    return _Outcome("fails", 0, f"{shown}: {error}")
                except Undecided:
                    continue
                except ZeroDivisionError:
                    return _Outcome("fails", 0, f"{shown}: a division by 0")
                tolerance = arb(10) ** -DIGITS
                undecided = False
                for at, mine, exact, _ in pairs:
                    if exact is None:  # a masked score, -inf
                        if mine.is_finite():
                            return _Outcome("fails", len(pairs),
                                            f"your {shown} at {at} is {_show(mine)}, the "
                                            f"stage is -inf (masked)")
                        continue
                    d = mine - exact
                    bound = tolerance if relative is None else tolerance + abs(exact) * arb(
                        fmpq(relative.numerator, relative.denominator))
                    if not mine.is_finite() and exact.is_finite():
                        return _Outcome("fails", len(pairs),
                                        f"your {shown} at {at} is too large to evaluate "
                                        f"(or not finite), the stage is {_show(exact)}")
                    if not mine.is_finite() or (relative is None and not d.contains(0)) \
                            or (relative is not None and abs(d) > bound):
                        beyond = "" if relative is None else \
                            f" (beyond the relative tolerance {_decimal(relative)})"
                        return _Outcome("fails", len(pairs),
                                        f"your {shown} at {at} is {_show(mine)}, the "
                                        f"stage is {_show(exact)}{beyond}",
                                        _ratio(pairs))
                    if not abs(d) < bound:
                        undecided = True
                if not undecided:
                    stage = balls[claim.stage]
                    return _Outcome("holds", len(pairs), total=len(stage) * len(stage[0]),
                                    covered=frozenset(key for *_, key in pairs))
        return _Outcome("undecided", 0, f"{shown}: not decided at {PRECISIONS[-1]} bits")

    def pairs(self, ev: Evaluator, lhs: lm.Node, rhs: lm.Node, claim: EquationClaim,
              balls: Mapping) -> list[tuple[str, arb, arb, tuple[int, int]]]:
        """(entry as shown, the equation's value, the stage's, the entry) at every entry
        of the stage the left-hand side covers.  On an equation of several lines about
        the stage (RoPE's halves), an entry where a line reads outside a stage is not
        one that line covers (:func:`_coverage` then requires another to)."""
        several = len(split_definitions(claim.chains)[0]) > 1
        if isinstance(lhs, lm.Matrix):
            return self.matrix_pairs(ev, lhs, rhs, claim, balls)
        named = False
        lhs, row_form = _function_form(lhs)
        if ev.columns and (isinstance(lhs, lm.Subscripted) or not isinstance(lhs, lm.Sym)
                           or lhs.sub or row_form):
            raise InputError(f"{claim.source}: layout = \"columns\" reads an equation "
                             f"about whole matrices (Q = W_Q X)")
        if isinstance(lhs, lm.Subscripted):  # (W_2)_{mj}, softmax(x)_i
            operand = lhs.operand if isinstance(lhs.operand, lm.Sym) else lm.Sym("f")
            lhs, named = replace(operand, sub=lhs.sub), True
        if not isinstance(lhs, lm.Sym):
            raise InputError(f"{claim.source}: cannot read the left-hand side at column "
                             f"{lhs.col}: it must be the stage's symbol (q_{{ic}}, Q, "
                             f"\\partial L/\\partial k_{{ic}})")
        stage = balls[claim.stage]
        r, c = len(stage), len(stage[0])
        if _superscript_indices(lhs, r, c, ev):  # A^{ij} = ...: the entries A_{ij}
            lhs = replace(lhs, sub=lhs.sup, sup=None)
        out = []
        if lhs.bold and lhs.sub and c > 1 and not _sub_is_name(lhs, ev):
            # \mathbf{y}_i = ...: token i's row, every row
            (part,) = lm.split_indices(lhs.sub, 1)
            if not isinstance(part, lm.Sym):
                raise InputError(f"{claim.source}: cannot read the left-hand side at column "
                                 f"{lhs.col}: a bold row's index must be one letter")
            for i in range(r):
                value = ev.value(rhs, Env({part.base: i + ev.base}, i))
                _fits(value, (c, 1) if ev.column else (1, c), _shown_lhs(lhs))
                flat = [x for row in value.rows for x in row]
                out.extend((_at(i, j, ev.base), flat[j], stage[i][j], (i, j))
                           for j in range(c))
            return out
        if lhs.sub and (named or not _sub_is_name(lhs, ev)):
            parts = lm.split_indices(lhs.sub, 2 if r > 1 and c > 1 else 1)
            fixed: dict[str, int] = {}
            if len(parts) == 4 and ev.token_row is not None:
                # ∂A_{ij}/∂S_{mn} on one softmax row's Jacobian: i = m = that row
                rows_at = [parts[0], parts[2]]
                if not all(isinstance(p, lm.Sym) and not p.sub for p in rows_at):
                    raise InputError(f"{claim.source}: cannot read the left-hand side at "
                                     f"column {lhs.col}: ∂A_{{ij}}/∂S_{{mn}} with letters "
                                     f"for the rows i and m")
                fixed = {p.base: ev.token_row + ev.base for p in rows_at}
                parts = [parts[1], parts[3]]
            free: list[str] = []
            for part in parts:
                for sym in _index_names(part):
                    if sym not in free and (not _is_size(sym, ev)
                                            or _free_size(sym, part, lhs, rhs, ev)):
                        free.append(sym)
            implicit = len(parts) == 1 and r > 1 and c > 1
            rows = range(r) if implicit else [None]
            seen = set()
            for row in rows:
                for values in _assignments(len(free), ev.base, max(r, c)):
                    env = Env({**fixed, **dict(zip(free, values))}, row)
                    at = [ev.index(p, env) for p in parts]
                    if any(v.denominator != 1 for v in at):
                        continue
                    k = [int(v) - ev.base for v in at]
                    if len(k) == 2:
                        i, j = k
                    elif implicit:
                        i, j = row, k[0]
                    else:
                        i, j = (k[0], 0) if c == 1 else (0, k[0])
                    if not (0 <= i < r and 0 <= j < c) or (i, j) in seen:
                        continue
                    seen.add((i, j))
                    env.row = i
                    try:
                        value = ev.value(rhs, env)
                    except Outside:
                        if not several:
                            raise
                        continue  # this line does not apply here: another must cover it
                    out.append((_at(i, j, ev.base), _scalar(value, f"{i},{j}", (i, j),
                                                            (r, c)),
                                stage[i][j], (i, j)))
            return out
        # a bare symbol: a number (L), one per row (μ), a row (q) or the matrix (Q)
        matrix_form = not row_form if row_form is not None else _matrix_form(lhs, ev, r, c)
        if (r, c) == (1, 1) or (c == 1 and not matrix_form):
            for i in range(r):
                value = ev.value(rhs, Env({}, i))
                out.append((_at(i, 0, ev.base), _scalar(value, f"{i},0"), stage[i][0],
                            (i, 0)))
            return out
        if matrix_form:
            value = ev.value(rhs, Env())
            if ev.columns:  # a token per column: the value is the stage's transpose
                _fits(value, (c, r), _shown_lhs(lhs))
                value = value.t()
            _fits(value, (r, c), _shown_lhs(lhs))
            return [(_at(i, j, ev.base), value.rows[i][j], stage[i][j], (i, j))
                    for i in range(r) for j in range(c)]
        if ev.columns:
            raise InputError(f"{claim.source}: layout = \"columns\" reads an equation "
                             f"about whole matrices (Q = W_Q X)")
        for i in range(r):
            value = ev.value(rhs, Env({}, i))
            wanted = (c, 1) if ev.column else (1, c)
            _fits(value, wanted, _shown_lhs(lhs))
            flat = [x for row in value.rows for x in row]
            out.extend((_at(i, j, ev.base), flat[j], stage[i][j], (i, j)) for j in range(c))
        return out

    def matrix_pairs(self, ev: Evaluator, lhs: lm.Matrix, rhs: lm.Node,
                     claim: EquationClaim, balls: Mapping) -> list:
        """A left-hand side written as a matrix of the stage's entries (a rotation's
        pair, ``[\\tilde q_{p,2c}; \\tilde q_{p,2c+1}] = R(p\\theta_c) [..]``): every value
        of its indices, the right-hand side a matrix of its shape."""
        stage = balls[claim.stage]
        r, c = len(stage), len(stage[0])
        cells = [(a, b, e) for a, row in enumerate(lhs.rows) for b, e in enumerate(row)]
        if not all(isinstance(e, lm.Sym) and e.sub for _, _, e in cells):
            raise InputError(f"{claim.source}: cannot read the left-hand side at column "
                             f"{lhs.col}: a matrix of the stage's entries (q_{{p,2c}})")
        parts = {(a, b): lm.split_indices(e.sub, 2) for a, b, e in cells}
        free: list[str] = []
        for found in parts.values():
            for part in found:
                free += [n for n in _index_names(part) if n not in free
                         and (not _is_size(n, ev) or _free_size(n, part, cells[0][2], rhs, ev))]
        out, seen = [], set()
        for values in _assignments(len(free), ev.base, max(r, c)):
            env = Env(dict(zip(free, values)))
            at = {key: [ev.index(p, env) for p in found] for key, found in parts.items()}
            if any(len(v) != 2 or any(x.denominator != 1 for x in v) for v in at.values()):
                continue
            places = {key: (int(v[0]) - ev.base, int(v[1]) - ev.base) for key, v in at.items()}
            if not all(0 <= i < r and 0 <= j < c for i, j in places.values()) \
                    or set(places.values()) <= seen:
                continue
            env.row = next(iter(places.values()))[0]
            value = ev.value(rhs, env)
            _fits(value, (len(lhs.rows), len(lhs.rows[0])), "the left-hand side")
            for (a, b), (i, j) in places.items():
                if (i, j) not in seen:
                    seen.add((i, j))
                    out.append((_at(i, j, ev.base), value.rows[a][b], stage[i][j], (i, j)))
        return out

    def random(self, variant: int, causal: bool, stage: str) -> Derivation | None:
        """Random example ``variant``: the example's file with its embeddings and
        weights drawn anew (exact small rationals), derived (None: nothing to redraw)."""
        training = is_training_stage(stage)
        key = (variant, causal, training)
        if key not in self._random:
            g = random_derivation(self.example, variant, causal)
            if g is not None and training and self.run is not None:
                run = self.run
                g = train(g, run.lr, max(run.steps, steps.MIN_STEPS), run.optimizer,
                          settings=run.options).graph
            self._random[key] = g
        g = self._random[key]
        if g is not None and training:
            stage_of(g, stage)  # a side stage added; unknown: the message
        elif g is not None:
            if self.example.loss is not None and "grad.loss" not in g.stages:
                stage_of(g, "grad.loss")
            if stage not in g.stages:
                stage_of(g, stage)
        return g

    def explain(self, claim: EquationClaim, chain: lm.Chain, rhs: lm.Node, g: Derivation,
                causal: bool, base: int, failed: _Outcome) -> list[str]:
        """Other conventions, index bases or a constant factor under which it holds."""
        notes = []
        for convention in conventions.ALTERNATIVES:
            if convention.mask is not None or not conventions.replaced(self.example,
                                                                       convention):
                continue
            try:
                other = self.derivation(causal, convention, claim.stage)
                if self.example.loss is not None and "grad.loss" not in other.stages:
                    stage_of(other, "grad.loss")
                if self.outcome(claim, chain.lhs, rhs, other, base).status == "holds":
                    notes.append(f"it holds under another convention: "
                                 f"{convention.describe()}")
            except (InputError, Inapplicable):
                continue
        try:
            flipped = self.outcome(claim, chain.lhs, rhs, g, 1 - base)
            if flipped.status == "holds":
                counted = "from 1" if base == 0 else "from 0"
                notes.append(f"it holds with its indices counted {counted}")
        except (InputError, Inapplicable):
            pass
        try:
            other = replace(claim, vectors="row" if claim.vectors == "column" else "column")
            if self.outcome(other, chain.lhs, rhs, g, base).status == "holds":
                notes.append(f"it holds with {other.vectors} vectors (vectors = "
                             f"\"{other.vectors}\")")
        except (InputError, Inapplicable):
            pass
        if failed.ratio is not None:
            notes.append(f"it is {failed.ratio} times the stage at every entry "
                         f"(a sum for a mean, or a missing factor?)")
        if "n" not in claim.where and not is_training_stage(claim.stage):
            try:  # the RMSNorm paper's n: the features, not the tokens
                other = replace(claim, where={**claim.where, "n": "d_model"})
                if self.outcome(other, chain.lhs, rhs, g, base).status == "holds":
                    notes.append("it holds with n the number of features (where = "
                                 "{ n = \"d_model\" })")
            except (InputError, Inapplicable, NotAtStep):
                pass
        if claim.layout == "rows":
            try:
                other = replace(claim, layout="columns")
                if self.outcome(other, chain.lhs, rhs, g, base).status == "holds":
                    notes.append("it holds if tokens are columns (layout = \"columns\")")
            except (InputError, Inapplicable, NotAtStep):
                pass
        notes += self.rewritten(claim, chain, rhs, g, base)
        return notes

    def approximation(self, claim: EquationClaim, chain: lm.Chain, rhs: lm.Node,
                      g: Derivation, base: int) -> list[str]:
        """An equation written with ``\\approx`` that is not exact: the smallest relative
        tolerance of 10^-8, 10^-6, 10^-4, 10^-3, 10^-2 within which it holds, named (it stays
        *fails*: exactly, it does not hold; ``tolerance`` accepts it)."""
        for k in APPROXIMATION_DIGITS:
            try:
                if self.outcome(claim, chain.lhs, rhs, g, base,
                                Fraction(1, 10 ** k)).status == "holds":
                    return [f"written with ≈, and not exact: it holds within a relative "
                            f"1e-{k} (tolerance = \"1e-{k}\" accepts it)"]
            except (InputError, Inapplicable, NotAtStep, ZeroDivisionError):
                return []
        return [f"written with ≈, and not within a relative 1e-{APPROXIMATION_DIGITS[-1]}"
                " either"]

    def rewritten(self, claim: EquationClaim, chain: lm.Chain, rhs: lm.Node, g: Derivation,
                  base: int) -> list[str]:
        """The conventions authors differ on, each tried as a rewriting of ``rhs``:
        constants printed to a few digits, ε inside or outside the root, √d_k missing
        or extra, β^t for β^{t-1}."""
        notes: list[str] = []
        for k, text in variants.printed_constants(rhs) if claim.tolerance is None else ():
            try:  # the constant printed with the most digits whose rounding explains it
                if self.outcome(claim, chain.lhs, rhs, g, base,
                                Fraction(1, 10 ** (k - 1))).status == "holds":
                    notes.append(f"it holds to the {k} digits of {text} as printed "
                                 f"(tolerance = \"1e-{k - 1}\")")
                    break
            except (InputError, Inapplicable, NotAtStep, ZeroDivisionError):
                break
        if chain.approx and claim.tolerance is None and not notes:
            notes += self.approximation(claim, chain, rhs, g, base)
        tries: list[tuple[lm.Node, str]] = []
        moved = variants.epsilon_moved(rhs)
        if moved is not None:
            tries.append((moved[0], f"it holds with ε {moved[1]} the square root"))
        if any(s.op.score_key is not None or s.op.keeps_mask for s in g) \
                and not is_training_stage(claim.stage):
            tries.append((variants.sqrt_dk(rhs, True), "it holds multiplied by √d_k "
                          "(a 1/√d_k too many)"))
            tries.append((variants.sqrt_dk(rhs, False), "it holds divided by √d_k "
                          "(the scaling by 1/√d_k missing)"))
        if is_training_stage(claim.stage):
            shifted = variants.step_powers_shifted(rhs)
            if shifted is not None:
                old = "t-1" if shifted[1] == "t" else "t"
                tries.append((shifted[0], f"it holds with β^{{{shifted[1]}}} for "
                                          f"β^{{{old}}} (the bias correction a step off)"))
        for node, note in tries:
            try:
                if self.outcome(claim, chain.lhs, node, g, base).status == "holds":
                    notes.append(note)
            except (InputError, Inapplicable, NotAtStep, ZeroDivisionError):
                continue
        return notes


def _moved_stages(g: Derivation, claim: EquationClaim, chain: lm.Chain, step: int) -> None:
    """The stages ``where`` binds moved to the steps the equation reads them at
    (``m_{t-1}`` with ``m`` bound at step t), added to ``g`` when they are side stages
    (an Adam step's m̂, v̂); one before step 0 or past the run is left out."""
    for k in steps.offsets([chain]):
        delta = step + k - step_of(claim.stage)
        for name in claim.where.values():
            moved = steps.shift(name, delta)
            if moved is not None and moved not in g.stages:
                try:
                    stage_of(g, moved)
                except InputError:
                    continue


def _decimal(x: Fraction) -> str:
    """``1e-6`` for 1/1000000, else the fraction."""
    if x.numerator == 1 and str(x.denominator).strip("0") == "1":
        return f"1e-{len(str(x.denominator)) - 1}"
    return str(x)


def _steps(judged: list[int]) -> str:
    """``1 to 4`` (every step from the first), else ``2, 1, 3``."""
    ordered = sorted(judged)
    if ordered == list(range(ordered[0], ordered[-1] + 1)):
        return f"{ordered[0]} to {ordered[-1]}"
    return ", ".join(map(str, judged))


def _coverage(links: list[Link], stage: str) -> None:
    """Links that agree where they were compared, when the equation's lines together do
    not cover every entry of the stage, are :data:`INCOMPLETE` (so is a line that covers
    no entry at all: its indices name none of the stage's)."""
    total = max((k.total for k in links), default=0)
    if not total or any(k.status not in ("holds", UNTRIED) for k in links):
        return  # a line that fails: the equation fails (its other lines hold where shown)
    union = frozenset().union(*(k.covered for k in links))
    if len(union) >= total:
        return
    for link in links:
        if link.status not in ("holds", UNTRIED):
            continue
        if not link.covered:
            link.message = (f"it covers none of the {plural(total, 'entry')} of {stage}: "
                            f"its left-hand side's indices name no entry of the stage")
        else:
            link.message = (f"{link.message}; but the equation covers only "
                            f"{len(union)} of the {plural(total, 'entry')} of {stage}")
        link.status = INCOMPLETE

def _base(chain: lm.Chain) -> int:
    """1 when a sum of the line starts at 1 (``\\sum_{j=1}^{n}``: indices counted from
    1), else 0."""
    nodes = [chain.lhs, *chain.rhs]
    stack = list(nodes)
    while stack:
        n = stack.pop()
        if isinstance(n, lm.Reduce) and isinstance(n.low, lm.Num) and n.low.value == 1:
            return 1
        for value in vars(n).values():
            if isinstance(value, lm.Node):
                stack.append(value)
            elif isinstance(value, tuple):
                stack.extend(v for v in value if isinstance(v, lm.Node))
    return 0


def _superscript_indices(lhs: lm.Sym, r: int, c: int, ev: Evaluator) -> bool:
    """A left-hand side ``A^{ij}`` of a matrix stage: two letters as a superscript, no
    subscript, neither letter a size, the step t or a transpose's T -- its entries,
    not a power."""
    if lhs.sub or not lhs.sup or r < 2 or c < 2:
        return False
    letters = [u for u in lhs.sup if not (u.kind == "char" and u.text == ",")]
    return len(letters) == 2 and all(
        u.kind == "letter" and u.text.islower() and u.text != "t"
        and not _is_size(u.text, ev) for u in letters)


def _function_form(lhs: lm.Node) -> tuple[lm.Node, bool | None]:
    """A left-hand side written as a function, ``\\mathrm{Attention}(Q, K, V)``,
    ``\\mathrm{FFN}(x)``, ``\\operatorname{softmax}(x)_i``: the stage itself, in row
    form when every argument is a lowercase symbol (x: one token's row), else as a
    matrix (None: not a function form)."""
    if isinstance(lhs, lm.Binary) and lhs.op == "jux" and isinstance(lhs.right, lm.Subscripted) \
            and isinstance(lhs.left, lm.Sym) and len(lhs.left.base) > 1 \
            and isinstance(lhs.right.operand, (lm.Sym, lm.Arguments)):
        # \sigma(\mathbf{z})_i: the function's value at i
        lhs = lm.Subscripted(lm.Binary("jux", lhs.left, lhs.right.operand, col=lhs.col),
                             lhs.right.sub, col=lhs.col)
    inner = lhs.operand if isinstance(lhs, lm.Subscripted) else lhs
    if isinstance(inner, lm.Call) and inner.name != "max":  # softmax(x)_i, SiLU(x)
        args = inner.args
    elif isinstance(inner, lm.Binary) and inner.op == "jux" and isinstance(inner.left, lm.Sym) \
            and inner.left.primes and not inner.left.grad:
        raise InputError(f"cannot read the left-hand side at column {lhs.col}: the "
                         f"derivative of a function is not a stage; write it beside the "
                         f"gradient it enters (\\frac{{\\partial L}}{{\\partial h}} = "
                         f"\\frac{{\\partial L}}{{\\partial a}} \\mathrm{{GELU}}'(h), \\quad "
                         f"\\mathrm{{GELU}}'(x) = ...)")
    elif isinstance(inner, lm.Binary) and inner.op == "jux" and isinstance(inner.left, lm.Sym) \
            and len(inner.left.base) > 1 and _name_subscript(inner.left):
        # FFN(x), Attention(Q, K, V), FFN_{SwiGLU}(x): a name, its subscript a word
        args = inner.right.items if isinstance(inner.right, lm.Arguments) else (inner.right,)
    else:
        return lhs, None
    row = all(isinstance(a, lm.Sym) and a.base[:1].islower() for a in args)
    name = lm.Sym(inner.name if isinstance(inner, lm.Call) else inner.left.base, col=lhs.col)
    if isinstance(lhs, lm.Subscripted):
        return lm.Subscripted(name, lhs.sub, col=lhs.col), row
    return name, row


def _name_subscript(sym: lm.Sym) -> bool:
    """No subscript, or one that is a word (``\\mathrm{FFN}_{\\mathrm{SwiGLU}}``), not an
    index."""
    if not sym.sub:
        return True
    letters = [t.text for t in sym.sub if t.kind == "letter"]
    return len(letters) > 1 and all(t.kind in ("letter", "macro") or t.text in "{}"
                                    for t in sym.sub)


def _argument_bindings(lhs: lm.Node, g: Derivation, stage: str) -> dict:
    """A function's row arguments on the left (``\\mathrm{FFN}(x)``,
    ``\\mathrm{softmax}(x)_i``) stand for what the claimed stage reads: a sub-layer
    output's (``layer1.ffn.output``) the one stage its sub-layer reads from outside, an
    operation's stage its own input.  Bound only when the count matches (a ``where``
    binding overrides)."""
    name, row_form = _function_form(lhs)
    if not row_form:
        return {}
    inner = lhs.operand if isinstance(lhs, lm.Subscripted) else lhs
    args = inner.args if isinstance(inner, lm.Call) else (
        inner.right.items if isinstance(inner.right, lm.Arguments) else (inner.right,))
    if any(not isinstance(a, lm.Sym) for a in args):
        return {}
    if stage not in g.stages:
        return {}
    reads = _reads_from_outside(g, stage)
    if len(args) == 1 and len(reads) > 1:  # LN(x): the one input of the stage's shape
        same = [r for r in reads if g[r].shape == g[stage].shape]
        reads = same if len(same) == 1 else reads
    if len(reads) != len(args):
        return {}
    return {key_of(a): Target(stage=r) for a, r in zip(args, reads)}


def _reads_from_outside(g: Derivation, stage: str) -> list[str]:
    """The stages ``stage`` reads; for a sub-layer's output (``layer1.ffn.output``,
    ``layer1.attention.output``), the stages its sub-layer reads from outside it."""
    own = [i for i in g[stage].inputs if i in g.stages]
    group, _, last = stage.rpartition(".")
    if last != "output" or not group:
        return own
    inside = {s.name for s in g if s.name.startswith(group + ".")}
    found: list[str] = []
    for s in g:
        if s.name in inside:
            found.extend(i for i in s.inputs if i in g.stages and i not in inside
                         and i not in found)
    return found


def _sub_is_name(sym: lm.Sym, ev: Evaluator) -> bool:
    """``W_Q`` on the left: the subscript is part of the name."""
    try:
        found = ev.table.lookup(sym, ev.near)
    except InputError:
        return False
    return found is not None and found[1]


def _index_names(node: lm.Node) -> list[str]:
    out = []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, lm.Sym) and not n.sub and not n.sup:
            out.append(n.base + "'" * n.primes)  # j' is an index of its own
        for value in vars(n).values():
            if isinstance(value, lm.Node):
                stack.append(value)
    return out[::-1]


def _is_size(name: str, ev: Evaluator) -> bool:
    return ev.table.scalar(lm.Sym(name)) is not None


def _free_size(name: str, part: lm.Node, lhs: lm.Sym, rhs: lm.Node, ev: Evaluator
               ) -> bool:
    """A size's letter written alone as an index of the left-hand side (``\\alpha_{in}``,
    ``\\partial L/\\partial v_{mn}``) is that entry's free index -- unless the equation
    also uses the letter as the size (``\\sum_{m=1}^{n}``), an ambiguity refused naming
    the letter.  Any other use of a size in an index (``x_{n-1}``) is the size."""
    if not (isinstance(part, lm.Sym) and part.base + "'" * part.primes == name):
        return False
    if any(s.base == name and not s.sub and not s.sup and not s.grad
           for s in symbols_of(rhs)):
        what = ev.table.scalar(lm.Sym(name))
        raise InputError(f"cannot read the left-hand side {lhs.show()}: its index {name} "
                         f"is also the size {what} on the right-hand side; write the "
                         f"index with another letter")
    return True


def _assignments(count: int, base: int, size: int):
    """Every value of ``count`` free indices, each from ``base`` over ``size`` values."""
    return itertools.product(range(base, base + size), repeat=count)


def _matrix_form(lhs: lm.Sym, ev: Evaluator, r: int, c: int) -> bool:
    """Is a bare left-hand side the whole matrix (``Q``, ``dK``) rather than one row?"""
    k = key_of(lhs)
    if k in ev.where:
        return getattr(ev.where[k], "matrix", False)
    try:
        found = ev.table.lookup(lhs, ev.near)
    except InputError:
        found = None
    if found is not None:
        return found[0].matrix
    return lhs.base[:1].isupper()


def _fits(value: object, shape: tuple[int, int], shown: str) -> None:
    got = value.shape if isinstance(value, Mat) else (1, 1)
    if got != shape:
        raise Inapplicable(f"the right-hand side is {got[0]}x{got[1]} but {shown} is "
                           f"{shape[0]}x{shape[1]}")


def _scalar(value: object, at: str, entry: tuple[int, int] | None = None,
            shape: tuple[int, int] | None = None) -> arb:
    """One number of an entry's right-hand side; in an equation of indices a row of the
    stage's width (a gain written bare, ``y_j = \\gamma \\hat{x}_j + \\beta``) is read
    at the entry's column, a column of its height at its row, a matrix of its shape at
    the entry (entry by entry, as the author broadcasts it)."""
    if isinstance(value, Mat):
        if value.shape == (1, 1):
            return value.rows[0][0]
        if entry is not None and shape is not None:
            i, j = entry
            r, c = shape
            if value.shape == (1, c) and c > 1:
                return value.rows[0][j]
            if value.shape == (r, 1) and r > 1:
                return value.rows[i][0]
            if value.shape == (r, c):
                return value.rows[i][j]
        raise Inapplicable(f"the right-hand side is a {value.shape[0]}x{value.shape[1]} "
                           f"matrix where one number is meant (entry {at})")
    return value


def _at(i: int, j: int, base: int) -> str:
    return f"[{i + base},{j + base}]"


def _shown_lhs(lhs: lm.Node) -> str:
    if isinstance(lhs, lm.Matrix):  # a rotation's pair: its first entry's symbol
        lhs = lhs.rows[0][0]
    if isinstance(lhs, lm.Subscripted) and isinstance(lhs.operand, lm.Sym):
        lhs = lhs.operand
    if isinstance(lhs, lm.Sym):
        # a subscript that names (W_1, W_Q, b_2) stays; one of indices (K_{ij}) goes
        sub = lhs.sub if lhs.sub and all(ch.isdigit() or ch.isupper()
                                         for ch in lhs.sub_text) else None
        if lhs.grad:
            return "d" + lm.Sym(lhs.base, sub, lhs.sup, lhs.primes).show() \
                if lhs.base[:1].isupper() else f"dL/d{lm.Sym(lhs.base, sub).show()}"
        return lm.Sym(lhs.base, sub, lhs.sup, lhs.primes).show()
    return "the left-hand side"


def _show(x: arb) -> str:
    """A ball's value to 12 significant digits (trailing zeros dropped)."""
    if not x.is_finite():
        return "not finite"
    text = x.str(12, radius=False)
    if "e" not in text and "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def _ratio(pairs: list[tuple[str, arb, arb]]) -> str | None:
    """``1/16`` (or ``16``) when the equation is that multiple of the stage at every
    entry (a whole number or its reciprocal, up to 10,000)."""
    ratios = []
    for _, mine, exact, _ in pairs:
        if exact is None or not mine.is_finite():
            continue
        if exact.contains(0):
            if not mine.contains(0):
                return None
            continue
        ratios.append(mine / exact)
    if not ratios:
        return None
    first = ratios[0]
    for candidate, text in _candidates(first):
        if all(r.contains(candidate) and r.rad() < arb(10) ** -20 for r in ratios):
            return text
    return None


def _candidates(x: arb):
    if not x.is_finite() or x.contains(0):
        return
    for value in (x, 1 / x):
        n = value.mid().unique_fmpz() if value.rad() < 0.25 else None
        if n is None:
            try:
                n = (value + arb(1) / 2).floor().unique_fmpz()
            except Exception:
                n = None
        if n is None or abs(int(n)) < 2 or abs(int(n)) > 10_000:
            continue
        if value is x:
            yield arb(int(n)), str(int(n))
        else:
            yield arb(1) / int(n), f"1/{int(n)}"


def _all(outcome: _Outcome) -> str:
    """``all 16 entries``, ``its one entry``, ``the 8 entries it covers (of 16)``."""
    n = outcome.entries
    if outcome.total > n:
        return f"the {plural(n, 'entry')} it covers (of {outcome.total})"
    return "its one entry" if n == 1 else f"all {n} entries"


def plural(n: int, word: str) -> str:
    """``16 entries``, ``1 random example``."""
    if n == 1:
        return f"1 {word}"
    return f"{n} {word[:-1]}ies" if word.endswith("y") else f"{n} {word}s"


def report(results: list[EquationCheck]) -> list[str]:
    """The plain-text lines of the equation verdicts."""
    lines = []
    for r in results:
        c = r.claim
        for link in r.links:
            place = f"line {link.line}" + (f", link {link.link}" if link.link > 1 else "")
            lines.append(f"equation {c.name} -> {c.stage} ({place}): {link.status}: "
                         f"{link.message}")
            lines.extend(f"  why: {note}" for note in link.notes)
    held = sum(r.ok for r in results)
    if results:
        lines.append("")
        verb = "holds" if len(results) == 1 else "hold"
        lines.append(f"{held} of {plural(len(results), 'equation')} {verb}")
    return lines


def as_json(results: list[EquationCheck]) -> list[dict]:
    """The ``--json`` form of the equation verdicts."""
    return [{"name": r.claim.name, "stage": r.claim.stage, "latex": r.claim.latex,
             "ok": r.ok,
             "links": [{"line": k.line, "link": k.link, "status": k.status,
                        "message": k.message, "entries": k.entries, "notes": k.notes}
                       for k in r.links]} for r in results]
