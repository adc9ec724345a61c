"""Every operation provides all its pieces, and its three forms agree.

For every class in ``symformer.ops.OPERATIONS``: the exact SymPy formula
(evaluated by mpmath through ``sympy.N``, not by the engine's balls), the ball
evaluation and the float64 NumPy reference agree on hypothesis-random rational
inputs.  A new operation without a factory here, or without one of its pieces,
fails loudly.  And every stage the float cross-check runs has a declared index
equation to print (proved equal to the local formula in test_equations_proved.py).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import mpmath
import numpy as np
import pytest
import sympy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import rationals

from symformer import load_example
from symformer.conventions import Convention, derive_variant
from symformer.engine import Derivation
from symformer.engine.arbmath import NEG_INF, precision, rational_ball
from symformer.equations.stage import equation_lines as lines
from symformer.equations.stage import stage_equation
from symformer.notation_types import Notation
from symformer.ops import (
    GELU,
    OPERATIONS,
    AdamMoment,
    AdamStep,
    Add,
    ALiBi,
    AppendRow,
    ArgmaxIndicator,
    BanTokens,
    Concat,
    Cumulative,
    DotScores,
    Draw,
    Dropout,
    Embedding,
    ExpertMask,
    GatedProduct,
    Gates,
    GELUTanh,
    GreedyChoice,
    Identity,
    Kept,
    LearnedPositional,
    MassAbove,
    MixtureSum,
    Normalize,
    NucleusMass,
    Operation,
    Parameter,
    PositionalEncoding,
    Projection,
    RankAbove,
    RatioToTop,
    ReLU,
    Renormalize,
    RepetitionPenalty,
    RMSNormalize,
    RoPE,
    RoutingMargin,
    RowMean,
    RowMeanSquare,
    RowVariance,
    ScaleMask,
    SgdStep,
    SiLU,
    Softmax,
    StdDev,
    TableSum,
    Temperature,
    Transpose,
    WeightedSum,
    WholeMean,
    WholeVariance,
    calculus,
)
from symformer.ops.binary_cross_entropy import BinaryCrossEntropy, PositionBinaryCrossEntropy
from symformer.ops.dot_products import DotProducts
from symformer.ops.gradient import Gradient, Seed, Term
from symformer.ops.loss import (
    CrossEntropy,
    MeanSquaredError,
    PositionSquaredError,
    UpstreamGradient,
)
from symformer.ops.objective import Objective
from symformer.ops.pooling import Pool
from symformer.ops.position_losses import PositionCrossEntropy, PositionSquaredErrors
from symformer.ops.side_parts import (
    Affine,
    Centred,
    LogSoftmax,
    MaxShift,
    RowDot,
    RowSum,
    RowTerms,
)
from symformer.ops.side_terms import ADAM_PARTS, AdamPart, Exponentials, ExpSums, Squares
from symformer.ops.side_terms import ConstantTable as GivenConstant
from symformer.ops.sigmoid import Sigmoid
from symformer.ops.softmax_jacobian import SoftmaxJacobian
from symformer.reference import numpy_ref
from symformer.verify import crosscheck as crosscheck_module

mpmath.mp.dps = 50
EXAMPLES = [None, "encoder_decoder", "course_module"]


# -- pieces ---------------------------------------------------------------------------

@settings(max_examples=3, deadline=None)
@pytest.mark.parametrize("name", sorted(OPERATIONS))
@given(data=st.data())
def test_every_operation_provides_every_piece(name, data) -> None:
    cls = OPERATIONS[name]
    assert name in FACTORIES, f"{name}: no factory in tests/test_operations.py"
    assert not inspect.isabstract(cls), f"{name}: abstract methods left"
    for piece in ("sympy", "arb", "arguments", "reference", "function", "equation", "facts",
                  "resolve"):
        assert callable(getattr(cls, piece, None)), f"{name} lacks {piece}"
    assert callable(cls.reference_function), f"{name} lacks its NumPy function"
    notation = cls.default_notation
    assert isinstance(notation, Notation), name
    assert notation.latex and notation.text and notation.title, name
    case = FACTORIES[name](data.draw)
    # its general equation, where it has one, parses (test_equations_proved.py proves
    # it and requires one of every displayed operation)
    equation = case.op.equation([m.shape for m in case.inputs])
    assert equation is None or equation.statements, name


class Constant(Operation):
    """A test-only source stage (no ``name``: not registered as an operation)."""

    default_notation = Notation("x", "x", "test input")

    def __init__(self, notation: Notation) -> None:
        self.notation = notation

    def sympy(self, args):  # pragma: no cover - never evaluated
        raise NotImplementedError

    def arb(self, args):  # pragma: no cover
        raise NotImplementedError

    def arguments(self, args, dtype):  # pragma: no cover
        raise NotImplementedError


def _render(op: Operation, count: int) -> list:
    """The op's equation lines on ``count`` input stages named x0, x1, ..."""
    g = Derivation(None, False)
    names = [g.add(f"x{k}", "test", Constant(Notation(f"x_{{{k}}}", f"x{k}", "in")), (),
                   ("r",), ("c",)) for k in range(count)]
    return list(lines(g[g.add("out", "test", op, names, ("r",), ("c",))]))


# -- three forms agree ----------------------------------------------------------------

@dataclass
class Case:
    op: Operation
    inputs: list[sympy.Matrix]


#: The values of ``st.fractions(-4, 4, max_denominator=8)`` (and of 1/8 to 4), faster.
small = rationals(Fraction(-4), Fraction(4))
POSITIVE = rationals(Fraction(1, 8), Fraction(4))


def _matrix(draw, rows: int, cols: int, values=small) -> sympy.Matrix:
    return sympy.Matrix(rows, cols, [sympy.Rational(v.numerator, v.denominator)
                                     for v in draw(st.lists(values, min_size=rows * cols,
                                                            max_size=rows * cols))])


def _shape(draw) -> tuple[int, int]:
    return draw(st.integers(1, 3)), draw(st.integers(2, 4))


class ExactArgmax:
    """Decides the argmax from the exact rational logits (the test's own prover)."""

    def __init__(self, logits: sympy.Matrix) -> None:
        self.logits = logits

    def winners(self, row: int) -> frozenset[int]:
        values = list(self.logits.row(row))
        return frozenset(j for j, v in enumerate(values) if v == max(values))

    def argmax(self, balls, row: int) -> frozenset[int]:
        return self.winners(row)


def _positive(draw, rows: int) -> sympy.Matrix:
    return _matrix(draw, rows, 1, POSITIVE)


def _mean_of(x: sympy.Matrix) -> sympy.Matrix:
    return sympy.Matrix(x.rows, 1, lambda i, _: sum(x.row(i)) / x.cols)


FACTORIES: dict[str, Callable] = {}


def factory(name: str):
    def register(fn):
        FACTORIES[name] = fn
        return fn
    return register


@factory("alibi")
def _(draw):
    n, m = _shape(draw)
    masked = frozenset(draw(st.sets(st.tuples(st.integers(0, n - 1), st.integers(0, m - 1)))))
    slope = draw(st.sampled_from([sympy.Rational(1, 2), sympy.Rational(1, 256),
                                  sympy.Integer(3), sympy.sqrt(2) / 2]))
    return Case(ALiBi(slope, masked, draw(st.booleans())), [_matrix(draw, n, m)])


@factory("add")
def _(draw):
    n, d = _shape(draw)
    return Case(Add(), [_matrix(draw, n, d), _matrix(draw, n, d)])


@factory("identity")
def _(draw):
    return Case(Identity(), [_matrix(draw, *_shape(draw))])


@factory("concat")
def _(draw):
    n = draw(st.integers(1, 3))
    return Case(Concat(), [_matrix(draw, n, 2), _matrix(draw, n, draw(st.integers(1, 3)))])


@factory("dot_scores")
def _(draw):
    n, m, d = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    return Case(DotScores(), [_matrix(draw, n, d), _matrix(draw, m, d)])


@factory("weighted_sum")
def _(draw):
    n, m, d = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    return Case(WeightedSum(), [_matrix(draw, n, m), _matrix(draw, m, d)])


@factory("embedding")
def _(draw):
    vocab, d = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    ids = tuple(draw(st.lists(st.integers(0, vocab - 1), min_size=1, max_size=4)))
    return Case(Embedding(_matrix(draw, vocab, d), ids), [])


@factory("positional_encoding")
def _(draw):
    kind = draw(st.sampled_from(["sinusoidal", "none"]))
    base = draw(st.sampled_from([10000, sympy.Integer(100), sympy.Rational(7, 2)]))
    return Case(PositionalEncoding(draw(st.integers(1, 4)), draw(st.integers(1, 6)), kind,
                                   base=base), [])


@factory("projection")
def _(draw):
    n, d_in, d_out = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    b = _matrix(draw, 1, d_out) if draw(st.booleans()) else None
    return Case(Projection(_matrix(draw, d_in, d_out), b, weight="W_1", bias="b_1"),
                [_matrix(draw, n, d_in)])


@factory("relu")
def _(draw):
    return Case(ReLU(), [_matrix(draw, *_shape(draw))])


@factory("gelu")
def _(draw):
    return Case(GELU(), [_matrix(draw, *_shape(draw))])


@factory("softmax")
def _(draw):
    return Case(Softmax(), [_matrix(draw, *_shape(draw))])


@factory("softmax_jacobian")
def _(draw):
    n, k = _shape(draw)
    return Case(SoftmaxJacobian(draw(st.integers(0, n - 1))), [_matrix(draw, n, k)])


@factory("position_squared_errors")
def _(draw):
    n, d = _shape(draw)
    positions = draw(st.none() | st.lists(st.integers(0, n - 1), min_size=1, max_size=n,
                                          unique=True).map(tuple))
    rows = n if positions is None else len(positions)
    return Case(PositionSquaredErrors(_matrix(draw, rows, d), positions=positions),
                [_matrix(draw, n, d)])


def _probabilities(draw) -> tuple[sympy.Matrix, tuple[int | None, ...]]:
    """Rational probability rows and a target column (or None) for each."""
    n, v = _shape(draw)
    rows = [[Fraction(1 + draw(st.integers(0, 3)), 1) for _ in range(v)] for _ in range(n)]
    probabilities = sympy.Matrix([[sympy.Rational(x, sum(row)) for x in row] for row in rows])
    return probabilities, tuple(draw(st.none() | st.integers(0, v - 1)) for _ in range(n))


@factory("position_cross_entropy")
def _(draw):
    probabilities, targets = _probabilities(draw)
    return Case(PositionCrossEntropy(targets), [probabilities])


@factory("dot_products")
def _(draw):
    n, m, d = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    return Case(DotProducts(draw(st.integers(0, n - 1))), [_matrix(draw, n, d),
                                                           _matrix(draw, m, d)])


@factory("scale_mask")
def _(draw):
    n, m = _shape(draw)
    masked = frozenset(draw(st.sets(st.tuples(st.integers(0, n - 1), st.integers(0, m - 1)))))
    value = draw(st.sampled_from([None, sympy.Integer(-10) ** 9, sympy.Rational(-5, 2)]))
    scale = draw(st.sampled_from([None, sympy.Integer(1), sympy.Rational(3, 2)]))
    return Case(ScaleMask(draw(st.integers(1, 4)), masked, value, scale=scale),
                [_matrix(draw, n, m)])


@factory("mean")
def _(draw):
    return Case(RowMean(), [_matrix(draw, *_shape(draw))])


@factory("variance")
def _(draw):
    x = _matrix(draw, *_shape(draw))
    return Case(RowVariance(draw(st.booleans())), [x, _mean_of(x)])


@factory("normalize")
def _(draw):
    n, d = _shape(draw)
    x = _matrix(draw, n, d)
    return Case(Normalize(sympy.Rational(1, 1000), _matrix(draw, 1, d), _matrix(draw, 1, d),
                          draw(st.booleans())), [x, _mean_of(x), _positive(draw, n)])


@factory("whole_mean")
def _(draw):
    return Case(WholeMean(), [_matrix(draw, *_shape(draw))])


@factory("whole_variance")
def _(draw):
    x = _matrix(draw, *_shape(draw))
    mu = sympy.Matrix(x.rows, 1, [sum(x) / len(x)] * x.rows)
    return Case(WholeVariance(), [x, mu])


@factory("argmax")
def _(draw):
    logits = _matrix(draw, *_shape(draw), values=st.integers(-3, 3).map(Fraction))
    return Case(ArgmaxIndicator(ExactArgmax(logits)), [logits])


# -- decoding (each decision computed here from the exact inputs, with Fractions) --------

def _row(draw, lo: int = -3, hi: int = 3) -> sympy.Matrix:
    return _matrix(draw, 1, draw(st.integers(2, 5)), values=st.integers(lo, hi).map(Fraction))


def _distribution(draw) -> sympy.Matrix:
    weights = draw(st.lists(st.integers(1, 6), min_size=2, max_size=5))
    return sympy.Matrix([[sympy.Rational(w, sum(weights)) for w in weights]])


def _routed(draw) -> tuple[sympy.Matrix, sympy.Matrix]:
    """Router probabilities (rows of positive rationals summing to 1) and a mask keeping
    at least one expert a row."""
    n = draw(st.integers(1, 3))
    rows = [_distribution(draw) for _ in range(n)]
    E = min(r.cols for r in rows)
    p = sympy.Matrix([[r[0, e] for e in range(E)] for r in rows])
    m = [draw(st.lists(st.integers(0, 1), min_size=E, max_size=E)) for _ in range(n)]
    for row in m:
        row[draw(st.integers(0, E - 1))] = 1
    return p, sympy.Matrix(m)


@factory("dropout")
def _(draw):
    n, d = _shape(draw)
    mask = tuple(tuple(draw(st.lists(st.integers(0, 1), min_size=d, max_size=d)))
                 for _ in range(n))
    rate = draw(st.sampled_from([sympy.Integer(0), sympy.Rational(1, 10),
                                 sympy.Rational(1, 2)]))
    return Case(Dropout(mask, rate), [_matrix(draw, n, d)])


@factory("expert_mask")
def _(draw):
    p, m = _routed(draw)
    return Case(ExpertMask(tuple(tuple(int(v) for v in m.row(i)) for i in range(m.rows))),
                [p])


@factory("gates")
def _(draw):
    p, m = _routed(draw)
    return Case(Gates(draw(st.booleans())), [p, m])


@factory("mixture_sum")
def _(draw):
    p, _ = _routed(draw)
    d = draw(st.integers(1, 3))
    return Case(MixtureSum(), [p, *(_matrix(draw, p.rows, d) for _ in range(p.cols))])


@factory("routing_margin")
def _(draw):
    n, E = _shape(draw)
    r, k = _matrix(draw, n, E), draw(st.integers(1, E - 1))
    ranked = [sorted(range(E), key=lambda e: (-r[i, e], e)) for i in range(n)]
    return Case(RoutingMargin(tuple((o[k - 1], o[k]) for o in ranked), k), [r])


@factory("repetition_penalty")
def _(draw):
    z = _row(draw)
    seen = tuple(sorted(draw(st.sets(st.integers(0, z.cols - 1)))))
    theta = draw(st.sampled_from([sympy.Rational(6, 5), sympy.Rational(1, 2), sympy.Integer(2)]))
    return Case(RepetitionPenalty(theta, seen, tuple(j for j in seen if z[0, j] < 0)), [z])


@factory("ban_tokens")
def _(draw):
    z = _row(draw)
    return Case(BanTokens(tuple(sorted(draw(st.sets(st.integers(0, z.cols - 1)))))), [z])


@factory("temperature")
def _(draw):
    return Case(Temperature(draw(st.sampled_from([sympy.Rational(1, 2), sympy.Integer(3)]))),
                [_row(draw)])


@factory("rank_above")
def _(draw):
    z = _row(draw)
    return Case(RankAbove(tuple(sum(1 for x in z if x > y) for y in z)), [z])


@factory("kept")
def _(draw):
    m = _distribution(draw)
    t = draw(st.sampled_from([sympy.Rational(1, 3), sympy.Rational(1, 2)]))
    below = draw(st.booleans())
    before = sympy.Matrix([draw(st.lists(st.integers(0, 1), min_size=m.cols,
                                         max_size=m.cols))])
    kept = tuple(int(bool(before[0, j] == 1 and (m[0, j] < t if below else m[0, j] >= t)))
                 for j in range(m.cols))
    return Case(Kept(kept, t, "<" if below else ">="), [m, before])


@factory("mass_above")
def _(draw):
    p = _distribution(draw)
    return Case(MassAbove(tuple(tuple(i for i in range(p.cols) if p[0, i] > p[0, j]
                                      or p[0, i] == p[0, j] and i < j)
                                for j in range(p.cols))), [p])


@factory("nucleus_mass")
def _(draw):
    p = _distribution(draw)
    return Case(NucleusMass(), [p, sympy.Matrix([draw(st.lists(
        st.integers(0, 1), min_size=p.cols, max_size=p.cols))])])


@factory("ratio_to_top")
def _(draw):
    p = _distribution(draw)
    return Case(RatioToTop(max(range(p.cols), key=lambda j: p[0, j])), [p])


@factory("renormalize")
def _(draw):
    p = _distribution(draw)
    kept = draw(st.lists(st.integers(0, 1), min_size=p.cols, max_size=p.cols))
    kept[draw(st.integers(0, p.cols - 1))] = 1
    return Case(Renormalize(), [p, sympy.Matrix([kept])])


@factory("cumulative")
def _(draw):
    return Case(Cumulative(), [_distribution(draw)])


@factory("append_row")
def _(draw):
    n, d = _shape(draw)
    return Case(AppendRow(), [_matrix(draw, n, d), _matrix(draw, draw(st.integers(1, 3)), d)])


@factory("greedy_choice")
def _(draw):
    z = _row(draw)
    return Case(GreedyChoice(tuple(j for j in range(z.cols) if z[0, j] == max(z)), z.cols), [z])


@factory("draw")
def _(draw):
    q = _distribution(draw)
    u = sympy.Rational(draw(st.integers(0, 2 ** 10 - 1)), 2 ** 10)
    total, chosen = 0, None
    for j in range(q.cols):
        total += q[0, j]
        if chosen is None and total > u:
            chosen = j
    C = sympy.Matrix([[sum(q[0, i] for i in range(j + 1)) for j in range(q.cols)]])
    return Case(Draw(chosen, q.cols), [C, sympy.Matrix([[u]])])


@factory("gelu_tanh")
def _(draw):
    return Case(GELUTanh(), [_matrix(draw, *_shape(draw))])


@factory("silu")
def _(draw):
    return Case(SiLU(), [_matrix(draw, *_shape(draw))])


@factory("sigmoid")
def _(draw):
    return Case(Sigmoid(), [_matrix(draw, *_shape(draw))])


@factory("pool")
def _(draw):
    n, d = _shape(draw)
    how = draw(st.sampled_from(["mean", "row"]))
    return Case(Pool(how, draw(st.integers(0, n - 1))), [_matrix(draw, n, d)])


@factory("binary_cross_entropy")
def _(draw):
    n, d = _shape(draw)
    inside = st.integers(1, 4).map(lambda k: sympy.Rational(k, 5))  # strictly in (0, 1)
    labels = st.sampled_from([sympy.Integer(0), sympy.Integer(1), sympy.Rational(1, 4)])
    y = sympy.Matrix(n, d, lambda i, j: draw(inside))
    T = sympy.Matrix(n, d, lambda i, j: draw(labels))
    return Case(BinaryCrossEntropy(T, reduction=draw(st.sampled_from(["mean", "sum"]))),
                [y])


def _objective_tree():
    from symformer.example.objective import parse_objective

    return parse_objective("(theta - 3)^2 + exp(phi/2) * sqrt(theta^2 + 1) - log(2 + phi^2)",
                           {"theta", "phi"}, "test")


@factory("objective")
def _(draw):
    theta = sympy.Matrix([[sympy.Rational(draw(rationals(Fraction(-2), Fraction(2))))
                           for _ in range(2)]])
    return Case(Objective(_objective_tree(), ("theta", "phi"), theta), [])


@factory("objective.from_stages")
def _(draw):
    return Case(Objective(_objective_tree(), ("theta", "phi"), from_stages=True),
                [_matrix(draw, 1, 2)])


@factory("position_binary_cross_entropy")
def _(draw):
    case = FACTORIES["binary_cross_entropy"](draw)
    return Case(PositionBinaryCrossEntropy(case.op.target), case.inputs)


@factory("gated_product")
def _(draw):
    n, d = _shape(draw)
    act = draw(st.sampled_from([SiLU(), GELU(), GELUTanh(), ReLU()]))
    return Case(GatedProduct(act), [_matrix(draw, n, d), _matrix(draw, n, d)])


@factory("learned_positional")
def _(draw):
    rows, d = draw(st.integers(1, 5)), draw(st.integers(1, 3))
    n = draw(st.integers(1, rows))
    return Case(LearnedPositional(_matrix(draw, rows, d), n, draw(st.integers(0, rows - n))),
                [])


@factory("std_dev")
def _(draw):
    eps = draw(st.sampled_from([sympy.S.Zero, sympy.Rational(1, 1000)]))
    return Case(StdDev(eps), [_positive(draw, draw(st.integers(1, 3)))])


@factory("mean_square")
def _(draw):
    return Case(RowMeanSquare(), [_matrix(draw, *_shape(draw))])


@factory("rms_normalize")
def _(draw):
    n, d = _shape(draw)
    return Case(RMSNormalize(sympy.Rational(1, 1000), _matrix(draw, 1, d)),
                [_matrix(draw, n, d), _positive(draw, n)])


@factory("rope")
def _(draw):
    n, d = draw(st.integers(1, 3)), 2 * draw(st.integers(1, 2))
    base = draw(st.sampled_from([sympy.Integer(10000), sympy.Integer(100),
                                 sympy.Rational(7, 2)]))
    return Case(RoPE(n, d, base, draw(st.sampled_from(["interleaved", "half"])),
                     draw(st.integers(0, 3))), [_matrix(draw, n, d)])


def _exact(value: sympy.Expr) -> mpmath.mpf | None:
    """The exact value by mpmath (None for -inf), independent of the balls."""
    if value == -sympy.oo:
        return None
    return mpmath.mpf(str(sympy.N(value, 60)))


def _ball(value) -> mpmath.mpf | None:
    if value is NEG_INF:
        return None
    assert value.rad() < 1e-40, value
    return mpmath.mpf(value.mid().str(60, radius=False))


# -- every stage the cross-check ran has an equation to print ------------------------

@pytest.mark.parametrize("example", EXAMPLES)
@pytest.mark.parametrize("convention", [Convention(), Convention(mask="-1e9"),
                                        Convention(layer_norm="unbiased"),
                                        Convention(layer_norm="whole_matrix"),
                                        Convention(norm="pre")])
def test_every_stage_crosscheck_ran_declares_its_equation(
        example, convention, monkeypatch) -> None:
    runs = []
    real = numpy_ref.run

    def recording(g, dtype=np.float64, into=None):
        runs.append((g, real(g, dtype, into)))
        return runs[-1][1]

    monkeypatch.setattr(numpy_ref, "run", recording)
    rows = crosscheck_module.crosscheck(load_example(example), convention, causal=True)
    assert all(r.ok for r in rows)
    ((g, ran),) = runs
    forward = numpy_ref.forward_stages(g)  # gradients: numpy_backward's VJPs
    assert set(ran.functions) == {s.name for s in forward}
    # every stage the float reference ran has its operation's declared index equation
    # (proved in test_equations_proved.py) to print
    for stage in (s for s in forward if s.kind != "loss"):
        assert stage.name in ran.functions
        assert stage_equation(stage) is not None, stage.name
    assert derive_variant(load_example(example), convention, causal=True).causal == g.causal


# -- the backward pass's operations ---------------------------------------------------

@factory("mse")
def _(draw):
    n, d = _shape(draw)
    reduction = draw(st.sampled_from(["mean", "sum"]))
    positions = draw(st.none() | st.lists(st.integers(0, n - 1), min_size=1, max_size=n,
                                          unique=True).map(tuple))
    rows = n if positions is None else len(positions)
    return Case(MeanSquaredError(_matrix(draw, rows, d), positions=positions,
                                 reduction=reduction), [_matrix(draw, n, d)])


@factory("upstream")
def _(draw):
    n, d = _shape(draw)
    return Case(UpstreamGradient(_matrix(draw, n, d)), [_matrix(draw, n, d)])


@factory("position_mse")
def _(draw):
    n, d = _shape(draw)
    return Case(PositionSquaredError(_matrix(draw, n, d), draw(st.integers(0, n - 1))),
                [_matrix(draw, n, d)])


@factory("cross_entropy")
def _(draw):
    probabilities, targets = _probabilities(draw)
    if all(t is None for t in targets):  # at least one position has a target
        targets = (draw(st.integers(0, probabilities.cols - 1)), *targets[1:])
    reduction = draw(st.sampled_from(["mean", "sum"]))
    return Case(CrossEntropy(targets, reduction=reduction), [probabilities])


@factory("gradient_seed")
def _(draw):
    return Case(Seed(), [])


@factory("gradient")
def _(draw):
    # one consumer, an addition x + y differentiated by x: the gradient passes through
    n, d = _shape(draw)
    x, y = _matrix(draw, n, d), _matrix(draw, n, d)
    return Case(Gradient((Term(Add(), 0, 2),)), [x, y, x + y, _matrix(draw, n, d)])


# -- training's operations (symformer train) ------------------------------------------

@factory("parameter")
def _(draw):
    return Case(Parameter(_matrix(draw, *_shape(draw))), [])


# An operation reading its weights from stages (``Operation.staged``, what ``train``'s
# steps run) has a factory of its own, "<name>.from_stages": its weights are drawn as
# input stages, apart from the constants it was made from (which it must not read).

@factory("projection.from_stages")
def _(draw):
    n, d_in, d_out = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    bias = draw(st.booleans())
    start = Projection(_matrix(draw, d_in, d_out), _matrix(draw, 1, d_out) if bias else None,
                       weight="W_1", bias="b_1")
    inputs = [_matrix(draw, n, d_in), _matrix(draw, d_in, d_out)]
    return Case(start.staged(), inputs + ([_matrix(draw, 1, d_out)] if bias else []))


@factory("sgd_step")
def _(draw):
    shape = _shape(draw)
    return Case(SgdStep(sympy.Rational(draw(st.integers(1, 9)), 8)),
                [_matrix(draw, *shape), _matrix(draw, *shape)])


@factory("adam_moment")
def _(draw):
    shape = _shape(draw)
    first = draw(st.booleans())
    return Case(AdamMoment(sympy.Rational(9, 10), draw(st.sampled_from([1, 2]))),
                ([] if first else [_matrix(draw, *shape)]) + [_matrix(draw, *shape)])


@factory("exponentials")
def _(draw):
    return Case(Exponentials(), [_matrix(draw, *_shape(draw))])


@factory("exp_sums")
def _(draw):
    return Case(ExpSums(), [_matrix(draw, *_shape(draw))])


@factory("squares")
def _(draw):
    n, d = _shape(draw)
    return Case(Squares(), [_matrix(draw, n, d)] + ([_matrix(draw, n, 1)]
                                                   if draw(st.booleans()) else []))


def test_a_square_at_its_mean_or_at_zero_is_a_ball_at_zero_not_nan(capsys):
    # 1/3 - 1/3 in balls is a tiny ball around 0 (1/3 is no binary number); its ** 2
    # was NaN, and `derive llama_style --stage layer1.norm2.mean_square.squares`
    # (an entry of 0.000) overflowed at the precision ceiling
    with precision(200):
        third = rational_ball(sympy.Rational(1, 3))
        ((at_mean, other),) = Squares().arb([[[third, third * 2]], [[third]]])
        ((zero, nine),) = Squares().arb([[[third - third, rational_ball(3)]]])
    for ball in (at_mean, zero):
        assert ball.is_finite() and ball.contains(0) and ball.rad() < 1e-55, ball
    assert abs(_ball(other) - mpmath.mpf(1) / 9) < 1e-55 and _ball(nine) == 9
    from symformer.cli import main
    assert main(["derive", "llama_style", "--stage", "layer1.norm2.mean_square.squares"]) == 0
    assert "0 the  1.000  0.000" in capsys.readouterr().out


@factory("row_terms")
def _(draw):
    n, d, m = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    row = draw(st.integers(0, n - 1))
    if draw(st.booleans()):  # a projection's constant weights
        return Case(RowTerms(row, _matrix(draw, d, m)), [_matrix(draw, n, d)])
    return Case(RowTerms(row), [_matrix(draw, n, d), _matrix(draw, d, m)])


@factory("max_shift")
def _(draw):
    return Case(MaxShift(), [_matrix(draw, *_shape(draw))])


@factory("centred")
def _(draw):
    n, d = _shape(draw)
    return Case(Centred(), [_matrix(draw, n, d), _matrix(draw, n, 1)])


@factory("affine")
def _(draw):
    return Case(Affine(sympy.Rational(draw(st.integers(-9, 9)), 10),
                       sympy.Rational(draw(st.integers(-9, 9)), 8), draw(st.sampled_from([1, 2]))),
                [_matrix(draw, *_shape(draw))])


@factory("row_dot")
def _(draw):
    n, d = _shape(draw)
    return Case(RowDot(), [_matrix(draw, n, d), _matrix(draw, n, d)])


@factory("row_sum")
def _(draw):
    return Case(RowSum(), [_matrix(draw, *_shape(draw))])


@factory("log_softmax")
def _(draw):
    return Case(LogSoftmax(), [_matrix(draw, *_shape(draw))])


@factory("constant")
def _(draw):
    n, d = _shape(draw)
    value = sympy.Matrix(n, d, lambda i, j: sympy.Integer(10000) ** sympy.Rational(-2 * j, d)
                         * (i + draw(st.integers(0, 3))))  # RoPE's angles p theta_j
    return Case(GivenConstant(value), [])


@factory("adam_part")
def _(draw):
    n, d = _shape(draw)
    v = sympy.Matrix(n, d, lambda i, j: _positive(draw, 1)[0, 0])
    return Case(AdamPart(draw(st.sampled_from(ADAM_PARTS)), sympy.Rational(1, 100),
                         draw(st.integers(1, 5)), sympy.Rational(9, 10),
                         sympy.Rational(999, 1000), sympy.Rational(1, 10 ** 8),
                         decay=sympy.Rational(1, 100)),
                [_matrix(draw, n, d), _matrix(draw, n, d), v])


@factory("adam_step")
def _(draw):
    n, d = _shape(draw)
    v = sympy.Matrix(n, d, lambda i, j: _positive(draw, 1)[0, 0])
    decay = draw(st.sampled_from([0, sympy.Rational(1, 100), sympy.Rational(1, 2)]))
    return Case(AdamStep(sympy.Rational(1, 100), draw(st.integers(1, 5)), sympy.Rational(9, 10),
                         sympy.Rational(999, 1000), sympy.Rational(1, 10 ** 8), decay=decay),
                [_matrix(draw, n, d), _matrix(draw, n, d), v])


@factory("normalize.from_stages")
def _(draw):
    n, d = _shape(draw)
    x = _matrix(draw, n, d)
    start = Normalize(sympy.Rational(1, 1000), _matrix(draw, 1, d), _matrix(draw, 1, d),
                      draw(st.booleans()))
    return Case(start.staged(), [x, _mean_of(x), _positive(draw, n), _matrix(draw, 1, d),
                                 _matrix(draw, 1, d)])


@factory("rms_normalize.from_stages")
def _(draw):
    n, d = _shape(draw)
    start = RMSNormalize(sympy.Rational(1, 1000), _matrix(draw, 1, d))
    return Case(start.staged(), [_matrix(draw, n, d), _positive(draw, n), _matrix(draw, 1, d)])


@factory("embedding.from_stages")
def _(draw):
    vocab, d = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    ids = tuple(draw(st.lists(st.integers(0, vocab - 1), min_size=1, max_size=4)))
    return Case(Embedding(_matrix(draw, vocab, d), ids).staged(), [_matrix(draw, vocab, d)])


@factory("learned_positional.from_stages")
def _(draw):
    rows, d = draw(st.integers(1, 5)), draw(st.integers(1, 3))
    n = draw(st.integers(1, rows))
    start = LearnedPositional(_matrix(draw, rows, d), n, draw(st.integers(0, rows - n)))
    return Case(start.staged(), [_matrix(draw, rows, d)])


@factory("transpose")
def _(draw):
    return Case(Transpose(), [_matrix(draw, *_shape(draw))])


@factory("table_sum")
def _(draw):
    vocab, d = _shape(draw)
    rows = tuple(draw(st.lists(st.integers(0, vocab - 1), min_size=1, max_size=vocab,
                               unique=True)))
    return Case(TableSum(rows), [_matrix(draw, len(rows), d), _matrix(draw, vocab, d)])


# -- backward: the NumPy VJP against the rule and against finite differences ----------

def _differentiable() -> list[str]:
    """The factories of operations with a backward rule (Gradient and Seed are the
    backward pass), those reading their weights from stages included."""
    return sorted(name for name in FACTORIES
                  if OPERATIONS[name.partition(".")[0]].backward is not Operation.backward)


def _field(op: Operation, value: sympy.Matrix) -> str:
    """The dataclass field holding a parameter (``W_1`` is the field ``W``)."""
    return next(f.name for f in dataclasses.fields(op) if getattr(op, f.name) is value)


def _directional(op: Operation, inputs: list[np.ndarray], grad: np.ndarray, wrt, h: float
                 ) -> np.ndarray:
    """sum(grad * f(x + h e)) for every entry e of input (or parameter) ``wrt``: the
    loss <grad, f> at shifted entries, for finite differences (f's -inf entries are
    constants and are left out)."""
    base = inputs[wrt] if isinstance(wrt, int) else np.array(
        op.parameters()[wrt].tolist(), dtype=float)
    result = np.zeros(base.shape)
    for index in np.ndindex(*base.shape):
        shifted = base.copy()
        if isinstance(op, WholeVariance) and wrt == 1:  # mu: one number in n copies,
            if index[0]:  # shifted together (its derivative is given to the first)
                continue
            shifted += h
        else:
            shifted[index] += h
        if isinstance(wrt, int):
            args = list(inputs)
            args[wrt] = shifted
            f = op.reference(args)
        else:
            # each float exactly (nsimplify's search for a simple fraction is slow
            # and moves the point by up to its tolerance)
            value = sympy.Matrix([[sympy.Rational(x) for x in row] for row in shifted.tolist()])
            f = dataclasses.replace(op, **{_field(op, op.parameters()[wrt]): value}).reference(
                inputs)
        result[index] = np.sum(np.where(np.isfinite(f), grad * f, 0))
    return result


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@pytest.mark.parametrize("name", _differentiable())
@given(data=st.data())
def test_backward_reference_agrees_with_the_rule_and_finite_differences(name, data) -> None:
    """For every input and parameter: the NumPy VJP (written from the matrix formula)
    equals the op's ``backward`` rule run in floats, and the central finite differences
    of its float forward reference (skipped at a kink such as ReLU's h = 0, where the
    one-sided differences disagree)."""
    case = FACTORIES[name](data.draw)
    op = case.op
    inputs = [np.array(m.tolist(), dtype=float) for m in case.inputs]
    out = op.reference(inputs)
    grad = np.array(_matrix(data.draw, *out.shape).tolist(), dtype=float)
    for wrt in [*range(len(inputs)), *op.parameters()]:
        if isinstance(op, Projection) and wrt == op.bias and op.b is None:
            continue
        got = op.backward_reference(wrt, inputs, out, grad)
        assert got is not None, f"{name}: no NumPy backward for {wrt!r}"
        rule = np.array(op.backward(calculus.rows(inputs), calculus.rows(out),
                                    calculus.rows(grad), wrt, calculus.FLOATS), dtype=float)
        assert got.shape == rule.shape, (name, wrt)
        np.testing.assert_allclose(got, rule, rtol=1e-12, atol=1e-12, err_msg=f"{wrt!r}")
        if isinstance(wrt, str) and hasattr(op, "used_rows"):  # a table: the rows used
            used = op.used_rows()
        h = 1e-5
        plus, minus = _directional(op, inputs, grad, wrt, h), _directional(op, inputs, grad,
                                                                           wrt, -h)
        centre = _directional(op, inputs, grad, wrt, 0)
        # the float forward's own rounding, magnified by 1/h (a -1e9 mask: ulp 1e-7)
        noise = 4e-16 * float(np.abs(out[np.isfinite(out)]).max(initial=1)) \
            * float(np.abs(grad).sum()) / h
        central = (plus - minus) / (2 * h)
        smooth = np.abs((plus - centre) - (centre - minus)) / h <= 1e-4 + 2 * noise
        if isinstance(wrt, str) and hasattr(op, "used_rows"):
            central, smooth = central[used], smooth[used]
        scale = max(1.0, float(np.abs(central).max(initial=0)))
        assert np.all(np.abs(got - central)[smooth] <= 1e-6 * scale + noise), (
            name, wrt, got, central)


# -- three forms agree, for every factory (defined last: the parametrisation reads
# FACTORIES when the module is imported, so every factory above is in it) -----------

@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@pytest.mark.parametrize("name", sorted(FACTORIES))
@given(data=st.data())
def test_balls_sympy_and_float64_agree(name, data) -> None:
    case = FACTORIES[name](data.draw)
    exact = case.op.sympy(case.inputs)
    with precision(200):
        balls = case.op.arb([[[None if v == -sympy.oo else rational_ball(v) for v in m.row(i)]
                              for i in range(m.rows)] for m in case.inputs])
    floats = case.op.reference([np.array(m.tolist(), dtype=float) for m in case.inputs])
    assert floats.dtype == np.float64
    assert floats.shape == exact.shape == (len(balls), len(balls[0]))
    for i in range(exact.rows):
        for j in range(exact.cols):
            want, ball = _exact(exact[i, j]), _ball(balls[i][j])
            if want is None:
                assert ball is None and floats[i, j] == -np.inf, (i, j)
                continue
            tol = mpmath.mpf(10) ** -40 * max(1, abs(want))
            assert abs(ball - want) <= tol, (i, j, ball, want)
            assert floats[i, j] == pytest.approx(float(want), rel=1e-12, abs=1e-12), (i, j)
    # its declared equation, where it has one, renders to a non-empty equation on input
    # stages (a displayed operation has one: tests/test_equations_proved.py)
    if case.op.equation([m.shape for m in case.inputs]) is not None:
        rendered = _render(case.op, len(case.inputs))
        assert rendered and all(line.rhs and line.text for line in rendered)
    # a single entry, where the operation builds one alone, is the matrix's entry
    symbols = [sympy.Matrix(m.rows, m.cols, lambda i, j, k=k: sympy.Symbol(f"x{k}_{i}_{j}"))
               for k, m in enumerate(case.inputs)]
    local = case.op.sympy(symbols)
    for i in range(local.rows):
        for j in range(local.cols):
            entry = case.op.sympy_entry(symbols, i, j)
            assert entry is None or entry == local[i, j], (i, j, entry, local[i, j])
