"""Choosing the next token exactly: every decoding decision is a stage.

:func:`add_decoding` appends to a derivation whose ``logits`` are known the stages of
one generation step's decision, in Hugging Face's order (``generate``'s logits
processors, then its warpers):

* ``next_logits`` -- the last position's logits (1 x V);
* ``penalized`` -- the repetition penalty (:mod:`symformer.ops.decoding_penalty`);
* ``allowed`` -- banned tokens, the end tokens before ``min_new_tokens``, every token
  but a forced one: -inf (:mod:`symformer.ops.decoding_ban`);
* ``logits_T``, ``probabilities_T`` -- the logits over the temperature and their softmax;
* ``top_k.rank``, ``top_k.kept``; ``top_p.mass_above``, ``top_p.kept``,
  ``nucleus_mass``; ``min_p.ratio``, ``min_p.kept`` (each filter reads what the one
  before kept, renormalised: ``top_k.probabilities``, ``top_p.probabilities``);
  ``kept`` -- the last filter's mask;
* sampling (a seed): ``distribution`` (the kept tokens' probabilities), ``cumulative``,
  ``uniform`` (u = k / 2^53, exact) and ``draw``; greedy: ``choice`` (the exact argmax,
  a tie reported, never broken).

Every comparison is decided exactly: certified balls at rising precision; when they
never separate, an equality is proved (equal scores by their formulas or closed forms;
a mass exactly at p, a probability ratio exactly at min_p, u exactly at a cumulative
sum, by the closed forms of the exponentials) and the rule names the side it falls
on; failing both, :class:`~symformer.errors.UndecidedError` (never a guess).  Each
decision is said in words with its certified margin (:attr:`StepDecoding.notes`).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction

from flint import arb

from symformer.arbcontext import precision
from symformer.engine.argmax import TieProver
from symformer.engine.graph import Derivation
from symformer.engine.rounding import ball_bounds, certified_rounding, round_fraction
from symformer.engine.zero import is_zero
from symformer.errors import ClosedFormTooLarge, InputError, UndecidedError
from symformer.example.decoding import Decoding
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops import (
    BanTokens,
    Cumulative,
    Draw,
    GreedyChoice,
    Identity,
    Kept,
    MassAbove,
    NucleusMass,
    Parameter,
    Pool,
    RankAbove,
    RatioToTop,
    Renormalize,
    RepetitionPenalty,
    Softmax,
    Temperature,
)

#: Doublings of the precision (from 128 bits) before a comparison is declared undecidable.
_MAX_DOUBLINGS = 6
#: Size limit of the closed forms an equality proof compares.
_MAX_OPS = 800
#: The generator the uniform numbers come from, as the output states it.
GENERATOR = "Python's random.Random(seed) (MT19937): u_t = the t-th random() = k/2^53"
#: The denominator of every uniform number.
TWO_53 = 2 ** 53


def uniform(seed: int, step: int) -> Fraction:
    """The exact uniform number of generation step ``step`` (1-based): the step-th
    ``random()`` of ``random.Random(seed)``, a k / 2^53."""
    rng = random.Random(seed)
    for _ in range(step - 1):
        rng.random()
    u = Fraction(rng.random())
    assert (u * TWO_53).denominator == 1
    return u


@dataclass
class StepDecoding:
    """The stages one step's decision added, its outcome and its notes in words."""

    final: str  # the stage holding the choice: ``draw`` or ``choice``
    chosen: tuple[int, ...]  # the chosen column (several: a greedy tie)
    uniform: Fraction | None = None
    stages: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: The stage each note is about (``top_p.kept``), one a note.
    about: list[str] = field(default_factory=list)

    def addressed(self, step: int) -> list[str]:
        """The notes, each opened by the address its stage is claimed at in a run
        (``[step2.top_p.kept] top-p p = 9/10: ...``)."""
        return [f"[step{step}.{stage}] {note}" for stage, note in zip(self.about, self.notes)]


def needs_decoding(settings: Decoding | None) -> bool:
    """True when a step's choice is more than the plain argmax of the logits."""
    return settings is not None and not settings.plain


def banned_at(settings: Decoding, step: int, vocab: tuple[str, ...],
              end_tokens: tuple[str, ...]) -> tuple[dict[int, str], str]:
    """The columns banned at ``step`` (1-based) and why, in words."""
    why: dict[int, str] = {}
    for t in settings.banned:
        why[vocab.index(t)] = "banned"
    if step - 1 < settings.min_new_tokens:
        for t in end_tokens:
            if t in vocab:
                why.setdefault(vocab.index(t), f"end token before min_new_tokens "
                                                f"{settings.min_new_tokens}")
    forced = settings.forced_at(step)
    if forced is not None:
        for j, t in enumerate(vocab):
            if t != forced:
                why.setdefault(j, f"forced {forced!r} at step {step}")
    return why, forced or ""


class _Decider:
    """Exact comparisons on one derivation: signs by balls, equalities by proof."""

    def __init__(self, g: Derivation, scores: str) -> None:
        self.g, self.scores = g, scores
        self.prover = TieProver(g, scores)
        self._closed: dict[int, sympy.Expr | None] = {}

    def sign(self, ball_of: Callable[[dict], arb], proved_zero: Callable[[], bool],
             what: str) -> int:
        """The sign of a value: certified balls, 0 only when proved."""
        prec, tried = 128, False
        for doubling in range(_MAX_DOUBLINGS):
            values = self.g.evaluate(prec)
            with precision(prec):
                b = ball_of(values)
            low, high = ball_bounds(b)
            if low > 0:
                return 1
            if high < 0:
                return -1
            if low == high == 0 or (not tried and doubling >= 1):
                tried = True
                if low == high == 0 or proved_zero():
                    return 0
            prec *= 2
        raise UndecidedError(f"cannot decide {what}: the balls agree to {prec // 2} bits "
                             f"but no proof of equality was found")

    def compare(self, a: int, b: int) -> int:
        """sign(z_a - z_b) of two allowed scores (0: proved equal)."""
        return self.sign(lambda v: v[self.scores][0][a] - v[self.scores][0][b],
                         lambda: self.prover.equal(0, a, b, closed_forms=True),
                         f"whether score {a} or {b} is larger")

    def closed(self, j: int) -> sympy.Expr | None:
        """The closed form of score j (None: too large)."""
        if j not in self._closed:
            try:
                self._closed[j] = self.g.closed_form(self.scores, 0, j, _MAX_OPS)
            except ClosedFormTooLarge:
                self._closed[j] = None
        return self._closed[j]

    def ratio_is(self, j: int, top: int, value) -> bool:
        """Is e^{z_j - z_top} exactly ``value``?  (False: no proof.)  The closed forms
        are built only here, when the balls have not separated."""
        zj, zt = self.closed(j), self.closed(top)
        return zj is not None and zt is not None and is_zero(sympy.exp(zj - zt) - value)

    def exp_sum_zero(self, terms: dict[int, sympy.Expr]) -> bool:
        """Is sum_j c_j e^{z_j} exactly 0?  (c_j exact rationals; False: no proof.)"""
        closed = {j: self.closed(j) for j in terms}
        if any(c is None for c in closed.values()):
            return False
        expr = sympy.Add(*(c * sympy.exp(closed[j]) for j, c in terms.items()))
        return is_zero(expr)


def add_decoding(g: Derivation, settings: Decoding, vocab: tuple[str, ...],
                 history: tuple[str, ...], step: int, end_tokens: tuple[str, ...],
                 decimals: int = 4, logits: str = "logits") -> StepDecoding:
    """Append step ``step``'s decision stages to ``g`` (see the module's docstring)."""
    V = len(vocab)
    rows = (g[logits].rows[-1],)
    added: list[str] = []
    notes: list[str] = []
    about: list[str] = []

    def say(stage: str, text: str) -> None:
        notes.append(text)
        about.append(stage)

    def add(name: str, op, inputs: tuple[str, ...], cols: tuple[str, ...] = vocab) -> str:
        added.append(g.add(name, "decoding", op, inputs, rows, cols, side="decoding"))
        return name

    def shown(name: str, j: int = 0) -> str:
        return g[name].values(decimals=decimals)[0][j]

    last = g[logits].shape[0] - 1
    cur = add("next_logits", Pool("row", last, Notation("l", "l", "Logits of the next token")),
              (logits,))
    if settings.repetition_penalty is not None:
        seen = tuple(sorted({vocab.index(t) for t in history if t in vocab}))
        negative = tuple(j for j in seen if g.sign(cur, 0, j) < 0)
        cur = add("penalized", RepetitionPenalty(settings.repetition_penalty, seen, negative),
                  (cur,))
        say("penalized", f"repetition penalty {settings.repetition_penalty} on "
                     f"{_names(vocab, seen) or 'no token'} (already in the sequence): a "
                     f"logit >= 0 divided by it, < 0 multiplied (certified signs)")
    banned, forced = banned_at(settings, step, vocab, end_tokens)
    if banned:
        if len(banned) == V:
            raise InputError(f"step {step}: every token is banned (banned, min_new_tokens, "
                             f"forced): nothing can come next")
        cur = add("allowed", BanTokens(tuple(sorted(banned))), (cur,))
        if forced:
            say("allowed", f"forced {forced!r} at step {step}: every other token -inf")
        else:
            say("allowed", "-inf (probability 0): " + ", ".join(
                f"{vocab[j]!r} ({why})" for j, why in sorted(banned.items())))
    allowed = [j for j in range(V) if j not in banned]
    warping = any(x is not None for x in (settings.temperature, settings.top_k,
                                          settings.top_p, settings.min_p))
    if settings.temperature is not None:
        cur = add("logits_T", Temperature(settings.temperature), (cur,))
    decider = _Decider(g, cur)
    if not (warping or settings.sampling):
        return _greedy(g, cur, V, add, added, notes, about)
    p = add("probabilities_T", Softmax(Notation(r"p^{(T)}", "p_T",
                                                "Probabilities after the processors"), "V"),
            (cur,))
    if settings.temperature is not None:
        say("probabilities_T", f"temperature T = {settings.temperature}: probabilities_T = "
                     f"softmax(logits / T)")
    order = _order(decider, allowed)
    kept, mask = set(allowed), None

    def filtered(prefix: str, kept_now: set[int], margin: str, threshold, relation: str,
                 inputs: tuple[str, ...]) -> str:
        return add(f"{prefix}.kept", Kept(tuple(int(j in kept_now) for j in range(V)),
                                          threshold, relation), (margin, *inputs))

    def renormalized(prefix: str) -> str:
        return add(f"{prefix}.probabilities", Renormalize(), (p, mask))

    if settings.top_k is not None:
        k = min(settings.top_k, V)
        ranks = [sum(1 for i in allowed if order[i, j] > 0) if j in kept else V
                 for j in range(V)]
        rank = add("top_k.rank", RankAbove(tuple(ranks)), (cur,))
        now = {j for j in kept if ranks[j] < k}
        mask = filtered("top_k", now, rank, k, "<", ())
        say("top_k.kept", _top_k_note(vocab, ranks, now, k,
                                 lambda a, b: _certified(g, cur, a, b, decimals)))
        kept = now
    q = p
    if settings.top_p is not None:
        if mask is not None:
            q = renormalized("top_k")
        # the tokens before j: more probable, or equally probable and earlier in the
        # vocabulary (ties broken by vocabulary order); a dropped token: all of them
        above = tuple(tuple(i for i in kept if order[i, j] > 0 or order[i, j] == 0 and i < j)
                      if j in kept else tuple(sorted(kept)) for j in range(V))
        mass = add("top_p.mass_above", MassAbove(above), (q,))
        top_p = settings.top_p
        now, exact = set(), []
        for j in sorted(kept):
            terms = {i: sympy.S.One for i in above[j]}
            for i in kept:
                terms[i] = terms.get(i, 0) - sympy.S(top_p)
            s = decider.sign(lambda v, j=j: v[mass][0][j] - _ball(top_p),
                             lambda terms=terms: decider.exp_sum_zero(terms),
                             f"whether the mass above {vocab[j]!r} reaches top_p")
            if s < 0:
                now.add(j)
            if s == 0:
                exact.append(j)
        mask = filtered("top_p", now, mass, top_p, "<", (mask,) if mask else ())
        nucleus = add("nucleus_mass", NucleusMass(), (q, mask), ("mass",))
        say("top_p.kept", _top_p_note(vocab, kept, now, exact, top_p, order, shown, mass,
                                 shown(nucleus)))
        kept = now
    if settings.min_p is not None:  # p_j / p_max: the same renormalised or not
        top = max(kept, key=lambda j: (sum(1 for i in kept if order[j, i] >= 0), -j))
        ratio = add("min_p.ratio", RatioToTop(top), (p,))
        now, exact = set(), []
        for j in sorted(kept):
            s = decider.sign(lambda v, j=j: v[ratio][0][j] - _ball(settings.min_p),
                             lambda j=j: decider.ratio_is(j, top, settings.min_p),
                             f"whether p/p_max of {vocab[j]!r} reaches min_p")
            if s >= 0:
                now.add(j)
            if s == 0:
                exact.append(j)
        mask = filtered("min_p", now, ratio, settings.min_p, ">=", (mask,) if mask else ())
        say("min_p.kept", _min_p_note(vocab, kept, now, exact, settings.min_p, shown, ratio))
        kept = now
    if mask is not None:
        mask = add("kept", Identity(Notation(r"\kappa", "κ", "Kept tokens")), (mask,))
    if not settings.sampling:
        return _greedy(g, cur, V, add, added, notes, about)
    dist = add("distribution", Renormalize(), (p, mask)) if mask is not None else p
    cumulative = add("cumulative", Cumulative(), (dist,))
    u = uniform(settings.seed, step)
    add("uniform", Parameter(sympy.Matrix([[sympy.Rational(u.numerator, u.denominator)]]),
                             Notation("u", "u", "Uniform number"), remark=GENERATOR,
                             source=("u", "u")), (), ("u",))
    chosen, at = _draw(decider, vocab, kept, cumulative, u)
    final = add("draw", Draw(chosen, V), (cumulative, "uniform"))
    say("draw", _draw_note(vocab, settings.seed, step, u, chosen, at, shown, cumulative))
    return StepDecoding(final, (chosen,), u, added, notes, about)


def _greedy(g: Derivation, scores: str, V: int, add, added: list[str], notes: list[str],
            about: list[str]) -> StepDecoding:
    """The exact argmax of the processed scores (a tie: every tied column)."""
    winners = tuple(sorted(TieProver(g, scores).winners(0)))
    add("choice", GreedyChoice(winners, V), (scores,))
    return StepDecoding("choice", winners, None, added, notes, about)


def _certified(g: Derivation, scores: str, a: int, b: int, decimals: int) -> str:
    """z_a - z_b of a scores row, correctly rounded (certified)."""
    rounded = certified_rounding(
        lambda prec: g.evaluate(prec)[scores][0][a] - g.evaluate(prec)[scores][0][b],
        f"{scores}[{a}] - {scores}[{b}]", decimals=decimals)
    return rounded.fixed()


def _ball(value) -> arb:
    value = sympy.S(value)
    return arb(int(value.p)) / int(value.q)


def _names(vocab: tuple[str, ...], columns) -> str:
    return ", ".join(repr(vocab[j]) for j in sorted(columns))


def _order(decider: _Decider, allowed: list[int]) -> dict[tuple[int, int], int]:
    """sign(z_a - z_b) for every pair of allowed columns."""
    order = {}
    for a in allowed:
        order[a, a] = 0
        for b in allowed:
            if a < b:
                s = decider.compare(a, b)
                order[a, b], order[b, a] = s, -s
    return order


def _top_k_note(vocab, ranks, kept, k, gap: Callable[[int, int], str]) -> str:
    text = (f"top-k k = {k}: kept {_names(vocab, kept)} (rank = tokens with a larger "
            f"score < {k})")
    boundary = [j for j in kept if ranks[j] == max(ranks[i] for i in kept)]
    if len(kept) > k:
        text += (f"; tie at the k-th place: {_names(vocab, boundary)} have proved equal "
                 f"scores, all kept (every score >= the k-th largest: Hugging Face's "
                 f"TopKLogitsWarper)")
    dropped = [j for j in range(len(vocab)) if j not in kept and ranks[j] < len(vocab)]
    if dropped:
        first = min(dropped, key=lambda j: (ranks[j], j))
        text += (f"\n  margin: the last kept {vocab[boundary[0]]!r} scores "
                 f"{gap(boundary[0], first)} above the first dropped {vocab[first]!r}")
    return text


def _top_p_note(vocab, before, kept, exact, top_p, order, shown, mass, nucleus) -> str:
    lines = [f"top-p p = {top_p}: nucleus {_names(vocab, kept)}, mass {nucleus} (the "
             f"smallest set of most probable tokens whose mass reaches p, the crossing "
             f"token included: kept when the mass m of the tokens before it is < p)"]
    for j in sorted(before, key=lambda j: (-len([i for i in before if order[j, i] > 0]), j)):
        m = shown(mass, j)
        if not any(order[i, j] > 0 or order[i, j] == 0 and i < j for i in before):
            lines.append(f"  {vocab[j]!r} is the most probable: in the nucleus for every p > 0")
        elif j in kept:
            lines.append(f"  {vocab[j]!r} stays in the nucleus unless p drops to m = {m} "
                         f"or below")
        elif j in exact:
            lines.append(f"  {vocab[j]!r}: m = p exactly (proved): the tokens before it "
                         f"already reach p, so it is dropped (the boundary rule: m < p)")
        else:
            lines.append(f"  {vocab[j]!r} is dropped unless p rises above m = {m}")
    split = [(j, i) for j in kept for i in before if i not in kept and order[i, j] == 0]
    if split:
        j, i = split[0]
        lines.append(f"  tie at the boundary: {vocab[j]!r} and {vocab[i]!r} have proved "
                     f"equal probabilities; broken by vocabulary order (a stable sort, most "
                     f"probable first): {vocab[j]!r} is kept, {vocab[i]!r} dropped. Hugging "
                     f"Face's TopPLogitsWarper keeps the later token of a tie instead")
    return "\n".join(lines)


def _min_p_note(vocab, before, kept, exact, min_p, shown, ratio) -> str:
    lines = [f"min-p {min_p}: kept {_names(vocab, kept)} (p / p_max >= min_p)"]
    for j in sorted(before):
        r = shown(ratio, j)
        if j in exact:
            lines.append(f"  {vocab[j]!r}: p / p_max = min_p exactly (proved): kept (only "
                         f"p < min_p p_max is removed)")
        elif j in kept:
            lines.append(f"  {vocab[j]!r} stays unless min_p rises above {r}")
        else:
            lines.append(f"  {vocab[j]!r} is dropped unless min_p drops to {r} or below")
    return "\n".join(lines)


def _draw(decider: _Decider, vocab, kept, cumulative: str, u: Fraction
          ) -> tuple[int, list[int]]:
    """The first column whose cumulative sum exceeds u; the columns where C_j = u."""
    exact = []
    value = sympy.Rational(u.numerator, u.denominator)
    for j in range(len(vocab)):
        if j not in kept:
            continue
        terms = {i: (sympy.S.One if i <= j else sympy.S.Zero) - value for i in kept}
        s = decider.sign(lambda v, j=j: v[cumulative][0][j] - _ball(value),
                         lambda terms=terms: decider.exp_sum_zero(terms),
                         f"whether the cumulative sum at {vocab[j]!r} exceeds u")
        if s > 0:
            return j, exact
        if s == 0:
            exact.append(j)
    raise UndecidedError("no cumulative sum exceeds u")  # C_last = 1 > u: unreachable


def _draw_note(vocab, seed, step, u, chosen, exact, shown, cumulative) -> str:
    k = u * TWO_53
    low = shown(cumulative, chosen - 1) if chosen else "0"
    decimal = round_fraction(u, significant=17).fixed()
    text = (f"draw: u = {k}/2^53 ({decimal} to 17 digits; seed {seed}, draw {step}; {GENERATOR});"
            f" drawn {vocab[chosen]!r}: the first token with cumulative C > u, "
            f"C in [{low}, {shown(cumulative, chosen)}) holds u")
    for j in exact:
        text += (f"; u = C at {vocab[j]!r} exactly (proved): the draw falls to the next "
                 f"token (C_j > u is strict)")
    return text


def decide_logits(logits, vocab: tuple[str, ...], settings: Decoding,
                  history: tuple[str, ...] = (), step: int = 1,
                  end_tokens: tuple[str, ...] = ("</s>",)) -> tuple[Derivation, StepDecoding]:
    """One decision on given exact logits (a row: numbers, SymPy expressions such as
    ``log(2)``): a derivation whose stage ``logits`` is the row, with the decision's
    stages appended -- a lecturer's worked example of top-p on a given distribution."""
    row = sympy.Matrix([[sympy.S(x) for x in logits]])
    if row.cols != len(vocab):
        raise InputError(f"{row.cols} logits for a vocabulary of {len(vocab)}")
    g = Derivation(None, False)
    g.add("logits", "logits", Parameter(row, Notation("l", "l", "Logits"),
                                        remark="the logits as given", source=("l", "l")),
          (), ("next",), tuple(vocab))
    return g, add_decoding(g, settings, tuple(vocab), history, step, end_tokens)
