"""What an example leaves inactive, decided exactly, and the sentences that say so.

A lecturer must not discover alone that the example's FFN does nothing: in the
built-in block (the blog post's own weights) every hidden unit is negative for every
token, so the ReLU clips them all, the FFN's output is exactly its bias b_2, the
second Add & Norm nearly gives back its input, and the gradients of W_1, b_1 and W_2
are exactly 0.  :func:`inactive` finds such facts in a derivation (and its backward
pass, when it has one) and returns them as plain records:

* :class:`DeadUnits` -- a clipping step (an operation with ``clips``, the ReLU; the
  sentences name it by its ``function_name``) whose input is <= 0 in some column for
  every token: those units are 0 everywhere and pass no gradient back;
* :class:`ConstantOutput` -- the step reading a wholly clipped activation outputs its
  bias (or 0) for every token: f = b_2;
* :class:`ZeroGradient` -- a weight whose gradient is exactly 0 at every entry, with
  the dead units that explain it when they do;
* :class:`AttentionPattern` -- an attention head whose weights are exactly uniform
  (every score of a row equal) or exactly one-hot (one key per row) for every query;
* :class:`NearIdentity` -- a sub-layer (residual and norm) or a norm whose output is
  exactly its input, or within 10^-k of it at every entry (certified bound, k >= 3).

Every decision is certified: signs are the engine's (:meth:`Derivation.sign`: balls,
then the exact forward pass, then a proof), equalities are a ball of radius 0 or an
exact proof (:meth:`Derivation.prove_zero`), bounds are ball bounds; no float enters.
:func:`pieces` words a record (plain words and :class:`~symformer.notation_types.Notation` math,
the symbols asked from :mod:`symformer.notation`), the one wording every format
renders: :func:`summary` for a terminal (``derive``, ``backward``), and
:mod:`symformer.latex.inactive` for the notes (LaTeX and Markdown).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from functools import singledispatch

from flint import arb, fmpq

from symformer.engine import Derivation, Stage
from symformer.engine.arbmath import NEG_INF
from symformer.engine.rounding import ball_bounds, moderate, start_precision
from symformer.errors import NotSupportedError, UndecidedError
from symformer.notation import notation, parameter, pieces_text
from symformer.notation_types import Notation
from symformer.placement import part_of

#: The largest k a near-identity bound states (|z - y| < 10^-k); and the smallest:
#: a sub-layer that changes an entry by 10^-3 or more is not "nearly the identity"
#: (the tables' third decimal could show it).
MAX_DIGITS = 12
MIN_DIGITS = 3
#: The effort of the analysis, so that it stays within what the work estimate charges:
#: an equality the balls cannot decide at the working precision is tried again at up to
#: REFINE_PRECISION bits (4 times more each time), then by at most MAX_PROOFS exact
#: proofs of PROOF_OPS operations and PROOF_UNFOLD unfoldings each (as the argmax's tie
#: proofs); past that nothing is called exactly equal or exactly 0.
REFINE_PRECISION = 4096
MAX_PROOFS = 64
PROOF_OPS, PROOF_UNFOLD = 800, 12
#: :func:`_upper`'s floor: 2^-60, below 10^-(MAX_DIGITS + 1).
_TINY_EXACT = Fraction(1, 2 ** 60)
_TINY = arb(fmpq(1, 2 ** 60))
#: What a sub-layer is called, by the kind of the stage its residual adds.

Piece = str | Notation


@dataclass(frozen=True)
class DeadUnits:
    """Columns (units) of a clipping step whose input is <= 0 for every token.

    ``stage`` is the clipping step (``layer1.ffn.activation``), ``source`` its input
    (``layer1.ffn.hidden``), ``units`` the dead columns of ``width``; ``touches_zero``:
    some input entry of a dead unit is exactly 0 (not negative).
    """

    stage: str
    source: str
    units: tuple[int, ...]
    width: int
    touches_zero: bool = False

    @property
    def every(self) -> bool:
        """True when every unit is dead: the step outputs 0 for every token."""
        return len(self.units) == self.width


@dataclass(frozen=True)
class ConstantOutput:
    """A step that reads a wholly clipped activation (``source``): its output is its bias
    ``parameter`` (``b_2``) for every token, or exactly 0 when ``parameter`` is None."""

    stage: str
    source: str
    parameter: str | None


@dataclass(frozen=True)
class ZeroGradient:
    """A weight's gradient (``stage``, ``grad.layer1.W_1``) exactly 0 at every entry.

    ``owner`` is the step the weight ``parameter`` belongs to; ``through`` the clipping
    step whose dead units explain the zero (None: no such explanation found);
    ``reads``: the owner reads the clipped activation (W_2 multiplies a = 0) rather
    than feeding it (W_1, b_1: no gradient passes back through a clipped unit).
    """

    stage: str
    owner: str
    parameter: str
    through: str | None = None
    reads: bool = False


@dataclass(frozen=True)
class AttentionPattern:
    """An attention head's weights (``stage``), exactly ``"uniform"`` (every score of a
    row equal) or exactly ``"one_hot"`` (one key per row) for every query."""

    stage: str
    pattern: str


@dataclass(frozen=True)
class NearIdentity:
    """A sub-layer or a norm that gives back its input: ``stage`` (its output) differs
    from ``source`` (its input) by less than 10^-``digits`` at every entry, or not at
    all (``digits`` None: exactly the identity).  ``added`` is the stage the residual
    adds (``layer1.ffn.output``), empty for a norm on its own."""

    stage: str
    source: str
    digits: int | None
    added: str = ""


Inactive = DeadUnits | ConstantOutput | ZeroGradient | AttentionPattern | NearIdentity
#: The records found in one derivation, in stage order.
Found = tuple[Inactive, ...]

#: Per derivation: (its number of stages when analysed, the records).
_FOUND: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def inactive(g: Derivation, stages: Iterable[str] | None = None) -> tuple[Inactive, ...]:
    """Everything ``g`` leaves inactive, in stage order (see the module).

    ``stages``: only records about these stages (a command that prints a few stages);
    None: every stage, the gradients' too when ``g`` has its backward pass.  The whole
    derivation's records are cached per derivation (the notes ask stage by stage).
    """
    if stages is not None:
        return _analyse(g, set(stages))
    known = _FOUND.get(g)
    if known is None or known[0] != len(g.stages):
        known = _FOUND[g] = (len(g.stages), _analyse(g, None))
    return known[1]


def _analyse(g: Derivation, names: set[str] | None) -> tuple[Inactive, ...]:
    prec = g.certification.working_precision(start_precision(3, None))
    wanted = [s for s in g if names is None or s.name in names]
    found: list[Inactive] = []
    dead: dict[str, DeadUnits] = {}
    for stage in _clipping(g, names):  # their dead units explain zero gradients too
        if stage.op.clips and stage.inputs and not stage.name.startswith("grad."):
            record = _dead_units(g, stage, prec)
            if record is not None:
                dead[stage.name] = record
    for record in list(dead.values()):
        if record.every:
            found.extend(_constant_outputs(g, record, names))
    for stage in wanted:
        if stage.op.rows_sum_to_one and stage.op.columns == "keys" and stage.inputs:
            pattern = _attention_pattern(g, stage, prec)
            if pattern is not None:
                found.append(AttentionPattern(stage.name, pattern))
        elif getattr(stage.op, "residual", False) and len(stage.inputs) == 2:
            found.extend(_sublayer_identity(g, stage, prec, names))
        elif _normalises(stage) and not _reads_residual(g, stage):
            record = _identity(g, stage.name, stage.inputs[0], prec)
            if record is not None:
                found.append(record)
        elif stage.op.of_weight:
            record = _zero_gradient(g, stage, prec, dead)
            if record is not None:
                found.append(record)
    explains = {r.through for r in found if isinstance(r, ZeroGradient)}
    found += [r for name, r in dead.items() if names is None or name in names
              or name in explains]
    order = {name: k for k, name in enumerate(g.stages)}
    return tuple(sorted(found, key=lambda r: order[r.stage]))


def _clipping(g: Derivation, names: set[str] | None) -> list[Stage]:
    """The clipping steps to examine: every one, or (``names`` given) those named and
    those next to a named weight gradient's step (a slice evaluates no more)."""
    found = [s for s in g if s.op.clips and s.inputs and not s.name.startswith("grad.")]
    if names is None:
        return found
    owners = {g[s.inputs[-2]].name for s in g if s.name in names
              and s.op.of_weight and len(s.inputs) >= 2}
    return [s for s in found if s.name in names or s.inputs[0] in owners
            or any(s.name in g[o].inputs for o in owners)]


def _sign_at_most_zero(g: Derivation, balls, name: str, i: int, j: int) -> int | None:
    """-1 or 0 when entry (i, j) is <= 0 (certified), None when it is positive."""
    ball = balls[i][j]
    if ball is NEG_INF or ball < 0:
        return -1
    if ball > 0:
        return None
    sign = g.sign(name, i, j)
    return None if sign > 0 else sign


def _dead_units(g: Derivation, stage: Stage, prec: int) -> DeadUnits | None:
    source = stage.inputs[0]
    balls = g.evaluate(prec, source)[source]
    rows, width = g[source].shape
    units, zero = [], False
    for j in range(width):
        if any(balls[i][j] is not NEG_INF and balls[i][j] > 0 for i in range(rows)):
            continue  # alive, by a ball alone: no sign to decide
        signs = []
        for i in range(rows):
            sign = _sign_at_most_zero(g, balls, source, i, j)
            if sign is None:
                break
            signs.append(sign)
        else:
            units.append(j)
            zero = zero or 0 in signs
    if not units:
        return None
    return DeadUnits(stage.name, source, tuple(units), width, zero)


def _consumers(g: Derivation, name: str) -> list[Stage]:
    return [s for s in g if name in s.inputs and not s.name.startswith("grad.")]


def _constant_outputs(g: Derivation, dead: DeadUnits, names: set[str] | None
                      ) -> list[ConstantOutput]:
    """The steps that read only a wholly clipped activation (exactly 0): what each
    declares it outputs at input 0 (``Operation.output_at_zero``: a projection's bias)."""
    found = []
    for consumer in _consumers(g, dead.stage):
        if consumer.inputs != (dead.stage,) or (names is not None
                                                 and consumer.name not in names):
            continue
        value = consumer.op.output_at_zero()
        if value is not None:
            found.append(ConstantOutput(consumer.name, dead.stage, value or None))
    return found


def _attention_pattern(g: Derivation, stage: Stage, prec: int) -> str | None:
    """``"one_hot"`` when every row has one key (the others masked with -inf),
    ``"uniform"`` when every row's scores are exactly equal over its keys (and some row
    has two), else None."""
    scores = stage.inputs[0]
    balls = g.evaluate(prec, scores)[scores]
    keys = [[j for j, b in enumerate(row) if b is not NEG_INF] for row in balls]
    pairs = [((i, row[0]), (i, j)) for i, row in enumerate(keys) for j in row[1:]]
    undecided = []
    for a, b in pairs:  # balls first: an exact comparison only when none differs
        difference = balls[a[0]][a[1]] - balls[b[0]][b[1]]
        if difference > 0 or difference < 0:
            return None
        if not difference == 0:
            undecided.append(((scores, *a), (scores, *b)))
    if not _all_equal(g, undecided, prec):
        return None
    return "one_hot" if max(map(len, keys), default=0) == 1 else "uniform"


Entry = tuple[str, int, int]


def _all_equal(g: Derivation, pairs: list[tuple[Entry, Entry]], prec: int) -> bool:
    """Whether the two entries of every pair are exactly equal, with a bounded effort
    (the pairs are those whose difference ball at ``prec`` bits contains 0 but is not
    exactly 0).  Balls first, at up to :data:`REFINE_PRECISION` bits (one difference
    excluding 0 says no: a LayerNorm with eps = 1e-100 changes its input by 1e-101);
    then the exact rational values; then at most :data:`MAX_PROOFS` proofs of
    :data:`PROOF_OPS` operations and :data:`PROOF_UNFOLD` unfoldings each.  False when
    the effort runs out: exact equality is said only when shown."""
    while pairs and prec < REFINE_PRECISION:
        prec = min(4 * prec, REFINE_PRECISION)
        values: dict = {}
        for (a, *_), (b, *_) in pairs:
            values.setdefault(a, g.evaluate(prec, a)[a])
            values.setdefault(b, g.evaluate(prec, b)[b])
        still = []
        for (a, i, j), (b, k, m) in pairs:
            difference = values[a][i][j] - values[b][k][m]
            if difference > 0 or difference < 0:
                return False
            if not difference == 0:
                still.append(((a, i, j), (b, k, m)))
        pairs = still
    if len(pairs) > MAX_PROOFS:
        return False
    for a, b in pairs:
        p, q = g.exact_rational(*a), g.exact_rational(*b)
        if p is not None and q is not None:
            if p != q:
                return False
        elif not _proved(g, g.symbols(a[0])[a[1], a[2]] - g.symbols(b[0])[b[1], b[2]]):
            return False
    return True


def _proved(g: Derivation, expr) -> bool:
    """``expr`` proved exactly 0 within :data:`PROOF_OPS` and :data:`PROOF_UNFOLD` (no
    ReLU sign decided: nothing evaluated); False when no proof is found in that."""
    try:
        return g.prove_zero(expr, max_ops=PROOF_OPS, max_unfold=PROOF_UNFOLD,
                            decide_relu=False)
    except (UndecidedError, NotSupportedError):
        return False


def _reads_residual(g: Derivation, stage: Stage) -> bool:
    return bool(stage.inputs) and getattr(g[stage.inputs[0]].op, "residual", False)


def _normalises(stage: Stage) -> bool:
    """Is ``stage`` a normalisation's output (the step its operation's ``add_norm``
    names: post-norm, it reads the residual sum)?"""
    return bool(stage.op.norm_keys)


def _sublayer_identity(g: Derivation, residual: Stage, prec: int, names: set[str] | None
                       ) -> list[NearIdentity]:
    """The sub-layer x + F(x) (pre-norm) or LN(x + F(x)) (post-norm) that gives back x."""
    x, added = residual.inputs
    out = next((s for s in _consumers(g, residual.name) if _normalises(s)
                and s.inputs[0] == residual.name), residual)
    if names is not None and out.name not in names:
        return []
    record = _identity(g, out.name, x, prec, added)
    return [] if record is None else [record]


def _identity(g: Derivation, name: str, source: str, prec: int, added: str = ""
              ) -> NearIdentity | None:
    """``name`` against ``source`` entry by entry: exactly equal, within 10^-k, or None."""
    if g[name].shape != g[source].shape:
        return None
    values = g.evaluate(prec, name)
    out, inp = values[name], values[source]
    bound = Fraction(0)
    undecided = []
    for i, row in enumerate(out):
        for j, ball in enumerate(row):
            if ball is NEG_INF or inp[i][j] is NEG_INF:
                return None
            difference = ball - inp[i][j]
            bound = max(bound, _upper(difference))
            if bound >= Fraction(1, 10 ** MIN_DIGITS):
                return None
            if not difference == 0:
                undecided.append(((name, i, j), (source, i, j)))
    if _all_equal(g, undecided, prec):
        return NearIdentity(name, source, None, added)
    digits = MIN_DIGITS
    while digits < MAX_DIGITS and bound < Fraction(1, 10 ** (digits + 1)):
        digits += 1
    return NearIdentity(name, source, digits, added)


def _upper(x) -> Fraction:
    """An exact upper bound of |x|, at least 2^-60 (below 10^-MAX_DIGITS: all a bound
    states); 1 for a ball that is not finite or not below 1 (then no identity is said)."""
    if not x.is_finite():
        return Fraction(1)
    if not x.abs_upper() > _TINY:
        return _TINY_EXACT
    if not (x.abs_upper() < 1 and moderate(x)):
        return Fraction(1)
    low, high = ball_bounds(x)
    return max(-low, high)


def _proved_zero(g: Derivation, name: str, i: int, j: int) -> bool:
    """True when the entry is proved exactly 0 (its exact rational value, or its local
    formula cancelling), with a bounded effort; False when no proof is found (the notes
    then say nothing: a gradient that is 0 without a proof is not called 0)."""
    try:
        value = g.exact_rational(name, i, j)
        if value is not None:
            return value == 0
    except (UndecidedError, NotSupportedError):
        return False
    return _proved(g, g.local(name)[i, j])


def _zero_gradient(g: Derivation, stage: Stage, prec: int, dead: dict[str, DeadUnits]
                   ) -> ZeroGradient | None:
    balls = g.evaluate(prec, stage.name)[stage.name]
    if any(b is NEG_INF or b > 0 or b < 0 for row in balls for b in row):
        return None  # some entry is certainly not 0, by its ball alone
    if any(not b == 0 and not _proved_zero(g, stage.name, i, j)  # radius 0, or proved
           for i, row in enumerate(balls) for j, b in enumerate(row)):
        return None
    terms = getattr(stage.op, "terms", ())
    if len(terms) != 1 or not isinstance(terms[0].wrt, str) or len(stage.inputs) < 2:
        return None  # a tied table's total or its transposed use: said by its parts
    owner = g[stage.inputs[-2]]
    for record in dead.values():
        if not record.every:
            continue
        if record.source == owner.name:
            return ZeroGradient(stage.name, owner.name, terms[0].wrt, record.stage)
        if record.stage in owner.inputs:
            return ZeroGradient(stage.name, owner.name, terms[0].wrt, record.stage, True)
    return ZeroGradient(stage.name, owner.name, terms[0].wrt)


# -- the words ------------------------------------------------------------------------

def _math(note: Notation, *index: int) -> Notation:
    """The symbol (with an index) as a math piece, in both spellings."""
    return Notation(note.entry(*index), note.entry(*index, fmt="text"), "")


def _join(items: list[Notation]) -> list[Piece]:
    """``a``, ``a and b``, ``a, b and c`` with math pieces."""
    out: list[Piece] = []
    for k, item in enumerate(items):
        if k:
            out.append(" and " if k == len(items) - 1 else ", ")
        out.append(item)
    return out


def _units(note: Notation, units: tuple[int, ...], every: bool) -> list[Piece]:
    if every and len(units) > 3:
        return [Notation(rf"{note.entry(units[0])}, \dots, {note.entry(units[-1])}",
                         f"{note.entry(units[0], fmt='text')}, …, "
                         f"{note.entry(units[-1], fmt='text')}", "")]
    return _join([_math(note, j) for j in units])


def _equation(lhs: Notation, rhs: str, rhs_text: str) -> Notation:
    return Notation(f"{lhs.latex} = {rhs}", f"{lhs.text} = {rhs_text}", "")


def activation_name(stage: Stage) -> str:
    """The name a sentence gives a clipping step: its operation's ``function_name``
    (``ReLU``), else its title."""
    return stage.op.function_name or stage.op.symbol.title


def _gradients(records: Iterable[Inactive], through: str) -> list[ZeroGradient]:
    return [r for r in records if isinstance(r, ZeroGradient) and r.through == through]


def pieces(g: Derivation, record: Inactive, records: tuple[Inactive, ...] = (),
           notes: bool = False) -> tuple[Piece, ...]:
    """One record in words and math pieces (one registration per kind of record);
    ``records`` are the others found with it (a dead FFN's sentence names its constant
    output and the gradients it makes 0).  ``notes``: the notes' wording, which leaves
    the constant output to the output's own table."""
    return _words(record, g, records, notes)


@singledispatch
def _words(record: object, g: Derivation, records: Found, notes: bool
           ) -> tuple[Piece, ...]:
    raise TypeError(f"no words for {type(record).__name__}")


@_words.register
def _dead_pieces(record: DeadUnits, g: Derivation, records: Found,
                 notes: bool) -> tuple[Piece, ...]:
    h, a = notation(g[record.source]), notation(g[record.stage])
    relu = activation_name(g[record.stage])
    sign = "negative or 0" if record.touches_zero else "negative"
    what = g[record.source].op.symbol.title
    out: list[Piece]
    if record.every:
        out = [f"Every unit of the {what} (", *_units(h, record.units, True),
               f") is {sign} for every token, so the {relu} clips them all: ",
               _equation(a, "0", "0"), " for every token."]
        constant = next((r for r in records if isinstance(r, ConstantOutput)
                         and r.source == record.stage), None)
        if constant is not None and not notes:  # the notes say it at the output's table
            what = "its bias, " if constant.parameter is not None else ""
            out += [" The output is therefore exactly ", what,
                    *_constant_value(g, constant), ", whatever the token."]
    else:
        units = "unit" if len(record.units) == 1 else "units"
        verb = "is" if len(record.units) == 1 else "are"
        out = [f"{units[0].upper()}{units[1:]} ", *_units(h, record.units, False),
               f" of the {what} {verb} {sign} for every token, so the {relu} clips "
               f"{'it' if len(record.units) == 1 else 'them'} everywhere (",
               *_join([_math(a, j) for j in record.units]),
               " = 0 for every token): " + ("this unit plays" if len(record.units) == 1
                                            else "these units play")
               + f" no part in this example, and the {relu} passes back no gradient "
               "through " + ("it." if len(record.units) == 1 else "them.")]
    gradients = sorted(_gradients(records, record.stage), key=lambda r: r.reads)
    if gradients:
        behind = [r for r in gradients if not r.reads]
        reads = [r for r in gradients if r.reads]
        why: list[Piece] = []
        if behind:
            why.append(f"the {relu} passes back no gradient through a clipped unit (its "
                       "derivative is 0 there)")
        if reads:
            weights = _join([_math(parameter(g[r.owner], r.parameter)) for r in reads])
            why += [", and " if behind else "", *weights, " multiplies ",
                    _equation(a, "0", "0")]
        names = _join([_math(notation(g[r.stage])) for r in gradients])
        verb = "are" if len(gradients) > 1 else "is"
        out += [" In the backward pass, ", *names, f" {verb} exactly 0 at every entry: ",
                *why, "."]
    return tuple(out)


def _constant_value(g: Derivation, record: ConstantOutput) -> list[Piece]:
    f = notation(g[record.stage])
    if record.parameter is None:
        return [_equation(f, "0", "0")]
    b = parameter(g[record.stage], record.parameter)
    return [_equation(f, b.latex, b.text)]


@_words.register
def _constant_pieces(record: ConstantOutput, g: Derivation, records: Found,
                     notes: bool) -> tuple[Piece, ...]:
    a = notation(g[record.source])
    what = "its bias" if record.parameter is not None else "0"
    return ("With every unit clipped (", _equation(a, "0", "0"), "), this output is "
            f"exactly {what} for every token: ", *_constant_value(g, record), ".")


@_words.register
def _zero_gradient_pieces(record: ZeroGradient, g: Derivation, records: Found,
                          notes: bool) -> tuple[Piece, ...]:
    grad = _math(notation(g[record.stage]))
    w = _math(parameter(g[record.owner], record.parameter))
    if record.through is None:
        return ("This gradient is exactly 0 at every entry: a small change of ", w,
                " does not change the loss to first order.")
    a, relu = notation(g[record.through]), activation_name(g[record.through])
    if record.reads:
        return (grad, " is exactly 0 at every entry: ", w, " multiplies ",
                _equation(a, "0", "0"), f" (every unit is clipped by the {relu}), so it "
                "has no effect on the output here.")
    return (grad, " is exactly 0 at every entry: every unit is clipped by the "
            f"{relu}, which passes back no gradient (its derivative is 0 there), so nothing "
            "reaches ", w, ".")


@_words.register
def _pattern_pieces(record: AttentionPattern, g: Derivation, records: Found,
                    notes: bool) -> tuple[Piece, ...]:
    alpha = _math(notation(g[record.stage]))
    reader = next(iter(_consumers(g, record.stage)), None)
    if record.pattern == "one_hot":
        out: list[Piece] = ["In this head every query has a single key to attend to, so "
                            "its weights ", alpha, " are exactly one-hot"]
        if reader is not None and len(reader.inputs) == 2:
            out += [": the output ", _math(notation(reader)), " copies one value ",
                    _math(notation(g[reader.inputs[1]]))]
        return (*out, ".")
    out = ["In this head every score of a row is the same, so the weights ", alpha,
           " are exactly uniform: each query gives the same weight to every key it sees"]
    if reader is not None and len(reader.inputs) == 2:
        out += [", and the output ", _math(notation(reader)), " is the plain mean of the "
                "values ", _math(notation(g[reader.inputs[1]])), " it sees"]
    return (*out, ".")


@_words.register
def _identity_pieces(record: NearIdentity, g: Derivation, records: Found,
                     notes: bool) -> tuple[Piece, ...]:
    z, y = _math(notation(g[record.stage])), _math(notation(g[record.source]))
    added = g[record.added] if record.added else None
    which = added.op.sublayer_of if added is not None else None  # its declared sub-layer
    what = (f"{which} sub-layer" if which else "sub-layer") if added is not None \
        else g[record.stage].op.symbol.title.lower()
    out: list[Piece] = []
    constant = next((r for r in records if isinstance(r, ConstantOutput)
                     and r.stage == record.added), None)
    if constant is not None:
        out += ["With ", *_constant_value(g, constant), ", the "]
    else:
        out += ["The "]
    if record.digits is None:
        out += [f"{what} is exactly the identity: its output ", z, " equals its input ", y,
                " at every entry."]
        return tuple(out)
    power = f"10^{{-{record.digits}}}"
    out += [f"{what} is nearly the identity: its output ", z, " differs from its input ",
            y, " by less than ", Notation(power, f"10^-{record.digits}", ""),
            " at every entry"]
    if constant is not None and added is not None:
        out += [" (the residual adds ", _math(notation(added)), " to ", y,
                " and the normalisation takes it away again)"]
    return (*out, ".")


def summary(g: Derivation, records: tuple[Inactive, ...] | None = None) -> list[str]:
    """The records as plain sentences for a terminal, one per finding, each after where
    it happens (``Layer 1, Feed-forward: ...``); a dead FFN's sentence names its
    constant output and the gradients it makes 0."""
    records = inactive(g) if records is None else records
    explained = {r.stage for r in records if isinstance(r, ZeroGradient)
                 and r.through is not None}
    out = []
    for record in records:
        if isinstance(record, ConstantOutput) or record.stage in explained:
            continue
        text = pieces_text(pieces(g, record, records))
        if isinstance(record, ZeroGradient) and record.through is None:
            text = f"{notation(g[record.stage]).text}: {text}"
        out.append(f"{', '.join(part_of(g[record.stage]))}: {text}")
    return out


def summary_lines(g: Derivation, stages: Iterable[str] | None = None,
                  width: int = 88) -> list[str]:
    """The terminal note of ``derive`` and ``backward``: a heading and each sentence of
    :func:`summary` wrapped to ``width`` (none when nothing is inactive); ``stages``: only
    what is said about these stages."""
    import textwrap

    found = summary(g, None if stages is None else inactive(g, stages))
    if not found:
        return []
    lines = ["What this example leaves inactive:"]
    for text in found:
        lines += textwrap.wrap(text, width, initial_indent="  ", subsequent_indent="    ")
    return lines


def at_stage(g: Derivation, stage: Stage) -> list[tuple[Piece, ...]]:
    """The paragraphs the notes print at ``stage``: what is inactive there (nothing for
    most stages)."""
    records = inactive(g)
    return [pieces(g, r, records, notes=True) for r in records if r.stage == stage.name]
