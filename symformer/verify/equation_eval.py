"""An author's equation evaluated over an example's certified values, entry by entry.

The right-hand side's tree (:mod:`symformer.verify.latex_math`) is walked (never
``eval``) in ball arithmetic at a given precision: a stage's entries are the engine's
certified balls, a weight's its exact rationals, numbers exact.  Index expressions
(subscripts, a sum's limits, ``[j \\le i]``) are exact integers.  A value is a ball or
a matrix of balls (matrix form: ``XW_Q``, ``QK^\\top``, row-wise softmax, ``\\odot``,
transposes; a row ``q`` is 1 x d, a column vector d x 1 when the claim says so).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction

from flint import arb, fmpq

from symformer.blocks.train import is_training_stage, step_of
from symformer.engine import Derivation
from symformer.equations import functions as fns
from symformer.errors import InputError
from symformer.ops.calculus import BALLS
from symformer.verify import equation_steps as steps
from symformer.verify import latex_math as lm
from symformer.verify.equation_bind import SymbolTable, Target, key_of, split_where
from symformer.verify.latex_math import juxtaposed


class Inapplicable(Exception):
    """The equation cannot hold as written here (shapes that do not fit, an index
    outside its stage): a wrong equation, with the reason."""


class Outside(Inapplicable):
    """An index of the right-hand side falls outside its stage at this entry: on an
    equation of several lines (a rotation's first and second halves), the line does
    not apply there -- the entry must be covered by another."""


class NotAtStep(Exception):
    """A training equation reads a symbol at a step the run does not have (``θ_{t+1}``
    at its last step): the equation is not judged at that step."""


class Undecided(Exception):
    """A comparison inside the equation (an indicator) is not decided at this
    precision."""


@dataclass
class Mat:
    """A matrix of balls."""

    rows: list[list[arb]]

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.rows), len(self.rows[0]) if self.rows else 0

    def map(self, f: Callable[[arb], arb]) -> Mat:
        return Mat([[f(x) for x in row] for row in self.rows])

    def t(self) -> Mat:
        return Mat([list(col) for col in zip(*self.rows)])


Value = "arb | Mat"


def _ball(value: object) -> arb:
    """An exact rational (SymPy, Fraction or int) as a ball."""
    if isinstance(value, arb):
        return value
    if isinstance(value, int):
        return arb(value)
    if isinstance(value, Fraction):
        return arb(fmpq(value.numerator, value.denominator))
    if getattr(value, "is_Rational", False):
        return arb(fmpq(int(value.p), int(value.q)))
    raise InputError(f"the weight {value} is not rational")


def _shape(v: object) -> str:
    if isinstance(v, Mat):
        return "x".join(map(str, v.shape))
    return "1x1"


def _elementwise(a: object, b: object, f: Callable[[arb, arb], arb], what: str) -> object:
    """``f`` entry by entry, broadcasting a number, a row (1 x d) or a column (n x 1)."""
    if not isinstance(a, Mat) and not isinstance(b, Mat):
        return f(a, b)
    if not isinstance(a, Mat):
        return b.map(lambda x: f(a, x))
    if not isinstance(b, Mat):
        return a.map(lambda x: f(x, b))
    (ra, ca), (rb, cb) = a.shape, b.shape
    r, c = max(ra, rb), max(ca, cb)
    if ra not in (1, r) or rb not in (1, r) or ca not in (1, c) or cb not in (1, c):
        raise Inapplicable(f"cannot {what} a {ra}x{ca} matrix and a {rb}x{cb} one")
    return Mat([[f(a.rows[i if ra > 1 else 0][j if ca > 1 else 0],
                   b.rows[i if rb > 1 else 0][j if cb > 1 else 0]) for j in range(c)]
                for i in range(r)])


def _product(a: object, b: object) -> object:
    if not isinstance(a, Mat) or not isinstance(b, Mat) or a.shape == (1, 1) \
            or b.shape == (1, 1):
        if isinstance(a, Mat) and a.shape == (1, 1) and isinstance(b, Mat):
            a = a.rows[0][0]
        if isinstance(b, Mat) and b.shape == (1, 1) and isinstance(a, Mat):
            b = b.rows[0][0]
        return _elementwise(a, b, lambda x, y: x * y, "multiply")
    (ra, ca), (rb, cb) = a.shape, b.shape
    if ra == rb == 1 and ca == cb:  # two rows of one width: x σ(x), entry by entry
        return _elementwise(a, b, lambda x, y: x * y, "multiply")
    if ca != rb:
        raise Inapplicable(f"cannot multiply a {ra}x{ca} matrix by a {rb}x{cb} one")
    cols = b.t().rows
    return Mat([[sum((x * y for x, y in zip(row, col)), arb(0)) for col in cols]
                for row in a.rows])


def _vectors(a: object, b: object) -> bool:
    r"""Two rows (or two columns) of one length: ``\cdot`` is their dot product."""
    return isinstance(a, Mat) and isinstance(b, Mat) and a.shape == b.shape \
        and 1 in a.shape and a.shape != (1, 1)


def _power(x: arb, e: object) -> arb:
    """``x ** e``; a whole exponent by products (python-flint's ``arb ** int`` goes
    through exp and log: NaN for a ball around 0, and wide for a negative one)."""
    if isinstance(e, int) and abs(e) <= _MAX_PRODUCT_POWER:
        out, base, n = arb(1), x, abs(e)
        while n:
            if n & 1:
                out = out * base
            base = base * base
            n >>= 1
        return 1 / out if e < 0 else out
    return x ** e


#: The largest whole exponent taken by repeated products (larger: arb's own power).
_MAX_PRODUCT_POWER = 1 << 20


def _untransposed(node: lm.Node) -> lm.Node | None:
    """``X^\\top`` (a transpose node, or a symbol whose superscript is one) without the
    transpose; None for anything else."""
    if isinstance(node, lm.Transpose):
        return node.operand
    if isinstance(node, lm.Sym) and node.sup and lm._text(node.sup) in lm._TRANSPOSE:
        return replace(node, sup=None)
    return None


def _row_max(row: list[arb]) -> arb:
    out = row[0]
    for x in row[1:]:
        out = out.max(x)
    return out


def _statistic(name: str, row: list[arb]) -> arb:
    """A row's mean, (biased) variance or root mean square."""
    mean = sum(row, arb(0)) / len(row)
    if name == "mean":
        return mean
    if name == "var":
        return sum(((x - mean) * (x - mean) for x in row), arb(0)) / len(row)
    return (sum((x * x for x in row), arb(0)) / len(row)).sqrt()


def _named_vectors(node: lm.Binary) -> bool:
    r"""``\mathbf{q}_i \cdot \mathbf{k}_j``, ``q_i \cdot k_j``: a dot product is written
    between two symbols; ``x \cdot \mathrm{erf}(x)`` multiplies entry by entry."""
    return isinstance(node.left, lm.Sym) and isinstance(node.right, lm.Sym)


def _block(rows: list[list[arb]], target: Target) -> list[list[arb]]:
    """The block of a matrix a ``where`` names (``V[0:2]``: FlashAttention's tile of
    keys); one reaching past the matrix is an error naming it."""
    r, c = len(rows), len(rows[0])
    (r0, r1), (c0, c1) = (span or (0, n) for span, n in zip(target.block, (r, c)))
    if r1 > r or c1 > c:
        raise InputError(f"the block [{r0}:{r1}, {c0}:{c1}] of {target.describe()} reaches "
                         f"past its {r}x{c} entries")
    return [row[c0:c1] for row in rows[r0:r1]]


def _is_ellipsis(node: lm.Node) -> bool:
    return isinstance(node, lm.Sym) and node.base == lm.ELLIPSIS


def _written_run(node: lm.Node) -> bool:
    """A row written out with an ellipsis, or a number times one (``m \\cdot [..]``)."""
    if isinstance(node, lm.Binary) and node.op in ("*", "jux"):
        return _written_run(node.left) or _written_run(node.right)
    return isinstance(node, lm.Matrix) and len(node.rows) == 1 \
        and any(_is_ellipsis(item) for item in node.rows[0])


def _unsized_ones(node: lm.Node) -> lm.Node | None:
    """``\\mathbf{1}`` or ``\\mathbf{1}^\\top`` written without its length (else None)."""
    inner = node.operand if isinstance(node, lm.Transpose) else node
    return node if isinstance(inner, lm.Ones) and inner.size is None else None


def _outer(a: object, b: object) -> object:
    """``a ⊗ b``: of two vectors (rows or columns) the outer product a b^T (entry (i, j)
    a_i b_j, as authors write p ⊗ p); of matrices the Kronecker product; with a
    number, the product."""
    if not isinstance(a, Mat) or not isinstance(b, Mat):
        return _product(a, b)
    if 1 in a.shape and 1 in b.shape:
        u = [x for row in a.rows for x in row]
        v = [x for row in b.rows for x in row]
        return Mat([[x * y for y in v] for x in u])
    return Mat([[x * y for x in row_a for y in row_b]
                for row_a in a.rows for row_b in b.rows])


def _max(x: arb, y: arb) -> arb:
    return x.max(y)


def _softmax(v: object) -> Mat:
    if not isinstance(v, Mat):
        raise Inapplicable("softmax of a single number")
    out = []
    for row in v.rows:
        exps = [x.exp() for x in row]
        total = sum(exps, arb(0))
        out.append([e / total for e in exps])
    return Mat(out)


def _relu_slope(x: arb) -> arb:
    """ReLU's derivative: 1 above 0, 0 below (undecided at a ball around 0)."""
    return arb(1 if _sign(x) > 0 else 0)


def _derivative(name: str) -> str | None:
    """The key of the derivative of the function written ``name`` (None: none known)."""
    table = fns.functions()
    fn = table.by_symbol.get(name) or table.by_key.get(name) or table.by_word.get(name) \
        or table.by_macro.get(name)
    return fn.derivative if fn is not None else None


def _value(key: str) -> Callable[[arb], arb]:
    """The certified value of the element-wise function ``key``: the function table's
    formula, else a registered activation's own balls (its operation applied to a 1 x 1
    matrix; its derivative, the operation's declared slope)."""
    if key == "d_relu":
        return _relu_slope
    if key in fns.VALUES:
        return fns.VALUES[key]
    cls, derivative = fns.activation_of(key)
    if cls is None:
        raise InputError(f"no value is known for the function {key!r}")
    op = cls()
    if derivative:
        return lambda x: op.slope(x, BALLS)
    return lambda x: op.arb([[[x]]])[0][0]


def _sign(d: arb) -> int:
    if d.is_exact() and d.is_zero():
        return 0
    if d.contains(0):
        raise Undecided("a comparison")
    return 1 if d > 0 else -1


_TESTS = {"<": lambda s: s < 0, "<=": lambda s: s <= 0, ">": lambda s: s > 0,
          ">=": lambda s: s >= 0, "==": lambda s: s == 0, "!=": lambda s: s != 0}


@dataclass
class Env:
    """Index values in scope, and the implicit token row (``q_c`` in row i)."""

    indices: dict[str, int] = field(default_factory=dict)
    row: int | None = None

    def bind(self, names: Mapping[str, int]) -> Env:
        return Env({**self.indices, **names}, self.row)


class Evaluator:
    """Values of an equation's nodes over one derivation at ``bits`` bits."""

    def __init__(self, g: Derivation, table: SymbolTable, where: Mapping, near: str,
                 balls: Mapping[str, list], base: int = 0, column: bool = False,
                 words: frozenset[str] = frozenset(), own: Mapping = {},
                 step: int | None = None, columns: bool = False) -> None:
        self.g, self.table, self.where, self.near = g, table, where, near
        self.balls = balls
        self.base = base
        self.column = column
        #: several-letter symbol names juxtaposed letters may spell (``PE``)
        self.words = words
        #: the symbols of the claimed stage's own equation, as ``export`` prints it (key
        #: -> target, ``#4`` a size, ``=1/2`` a constant): RoPE's d is the head's width
        #: there, the encoder's output z on a cross-attention key
        self.own = own
        #: a training equation's t (the claimed step, or one less for θ_{t+1} = ...)
        self.step = step
        #: a token per column (``layout = "columns"``): every matrix transposed, softmax
        #: and rowsum per column
        self.columns = columns
        #: the softmax row a Jacobian stage (``S.jacobian.row1``) is of: J_{jk} is
        #: ∂p_j/∂s_k in that token's row, so p_k there is that row's entry
        op = g[near].op if near in g.stages else None
        self.token_row = getattr(op, "row", None) if ".jacobian.row" in near else None

    # -- symbols ------------------------------------------------------------------
    def matrix(self, target: Target) -> list[list[arb]]:
        """The entries of a stage (balls) or a weight (exact) as balls; transposed in a
        column layout."""
        rows = self._matrix(target)
        if target.block is not None:
            rows = _block(rows, target)
        return [list(col) for col in zip(*rows)] if self.columns else rows

    def _matrix(self, target: Target) -> list[list[arb]]:
        if target.parameter == "mask":
            return self.mask(target.stage)
        if target.constant is not None:
            return [[_ball(v) for v in row] for row in target.constant]
        if target.stage is None or (target.parameter is None
                                    and target.stage not in self.balls):
            raise Inapplicable(f"{target.describe()}: no such stage in the run")
        if target.parameter is not None:
            op = self.g[target.stage].op
            if target.parameter == "target" and hasattr(op, "targets"):
                return self.one_hot(target.stage, op.targets)
            m = op.target if target.parameter == "target" else \
                op.parameters()[target.parameter]
            return [[_ball(m[i, j]) for j in range(m.cols)] for i in range(m.rows)]
        values = self.balls[target.stage]
        if any(x is None for row in values for x in row):
            return [[arb.neg_inf() if x is None else x for x in row] for row in values]
        return values

    def mask(self, scores: str) -> list[list[arb]]:
        """The additive mask of a score stage: 0, and -inf (or the finite mask value the
        example adds) at its masked entries."""
        op = self.g[scores].op
        blocked = arb.neg_inf() if op.mask_value is None else _ball(op.mask_value)
        r, c = self.g[scores].shape
        return [[blocked if (i, j) in op.masked else arb(0) for j in range(c)]
                for i in range(r)]

    def one_hot(self, loss: str, targets) -> list[list[arb]]:
        """A cross-entropy's targets as one-hot rows over the vocabulary (a position
        without a target: a row of zeros)."""
        width = self.g[self.g[loss].inputs[0]].shape[1]
        return [[arb(1 if t is not None and j == t else 0) for j in range(width)]
                for t in targets]

    def resolve(self, sym: lm.Sym) -> tuple[Target | str, bool, bool]:
        """(target or scalar name, subscript taken as a name, superscript taken as a name)."""
        if self.step is not None and (k := steps.step_subscript(sym)) is not None:
            return self.at_step(sym, self.step + k - step_of(self.near))
        # a subscript that is part of a name first (W_2 is W_2, not row 2 of a bound W)
        for named in ((True,) if sym.sub else ()) + (False,):
            for use_sup in (True, False):
                if use_sup and not split_where(sym)[0]:
                    continue
                k = key_of(sym, named, use_sup)
                if k in self.where:
                    return self.where[k], named, use_sup
            for use_sup in (True, False):  # the stage's own equation's symbols next
                if use_sup and not split_where(sym)[0]:
                    continue
                own = self.own.get(key_of(sym, named, use_sup))
                if own is not None:
                    return own, named, use_sup
            scalar = self.table.scalar(sym, named)
            if scalar is not None and not sym.grad:
                return scalar, named, False
            found = self.table.lookup(sym, self.near, named)
            if found is not None:
                return found
        training = self.training_symbol(sym)
        if training is not None:
            return training
        if sym.grad:  # dP (dP_{ij}) with P bound by where: the gradient of that stage
            for named in (True, False):
                target = self.where.get(key_of(replace(sym, grad=False), named))
                if isinstance(target, Target) and target.stage and target.parameter is None \
                        and "grad." + target.stage in self.g.stages:
                    return replace(target, stage="grad." + target.stage), named, False
        if sym.base == "delta" and sym.sub:
            return "delta", False, False
        if sym.base in ("pi", "infty", "|V|") and not sym.sub:
            return sym.base, False, False
        if len(sym.base) == 1 and sym.base.islower() and not (sym.sub or sym.sup or sym.grad):
            raise InputError(f"cannot read {sym.show()} at column {sym.col}: it is not an "
                             f"index of the left-hand side, not bound by a sum, and not a "
                             f"symbol of the example's notation (bind it with where)")
        raise InputError(f"cannot read {sym.show()} at column {sym.col}: not a symbol of "
                         f"the example's notation (bind it with where)")

    def training_symbol(self, sym: lm.Sym) -> tuple[Target | str, bool, bool] | None:
        """On a training run's stage, the optimiser papers' letters the notation does not
        bind: α the step size (Adam's), λ the weight decay (AdamW's), g the gradient
        the claimed weight's step reads (``g_t``: of the loss at step t-1)."""
        if self.step is None or sym.sub or sym.grad or sym.primes:
            return None
        if sym.base == "alpha":
            return "lr", False, False
        if sym.base == "lambda":
            return "decay", False, False
        if sym.base == "g":
            weight = re.sub(r"^step\d+\.(?:adamw?_[a-z]+\.)?", "", self.near)
            stage = f"grad.step{step_of(self.near) - 1}.{weight}"
            if stage in self.g.stages:
                return Target(stage=stage), False, False
        return None

    def at_step(self, sym: lm.Sym, delta: int) -> tuple[Target | str, bool, bool]:
        """``θ_{t-1}``, ``m_t``: the symbol as read at the claimed step, moved ``delta``
        steps; Adam's moments before the first step are 0 (m_0 = v_0 = 0); a
        gradient ``\\nabla_{W_{t-1}} L`` the gradient of the symbol at its step."""
        if sym.grad:
            target, _, sup_used = self.at_step(replace(sym, grad=False), delta)
            if isinstance(target, Target) and target.stage and target.parameter is None:
                name = target.stage if target.stage.startswith("grad.") \
                    else "grad." + target.stage
                if name in self.g.stages:
                    return replace(target, stage=name), True, sup_used
            raise NotAtStep(f"{sym.show()}: the run has no such gradient at that step")
        target, _, sup_used = self.resolve(replace(sym, sub=None))
        if not isinstance(target, Target) or not delta:
            return target, True, sup_used
        moved = steps.shift(target.stage, delta)
        if moved is not None and moved in self.g.stages:
            return replace(target, stage=moved), True, sup_used
        if moved is not None and step_of(moved) == 0 \
                and self.g[target.stage].op.optimizer_state:
            return "#0", True, sup_used
        raise NotAtStep(f"{sym.show()}: the run has no such stage at step "
                        f"{step_of(target.stage) + delta}")

    def scalar(self, name: str) -> arb:
        """A size or constant of the glossary, nearest the claimed stage."""
        if name.startswith("#"):  # a size of the stage's own equation
            return arb(int(name[1:]))
        if name.startswith("="):  # a constant of the stage's own equation
            return _ball(Fraction(name[1:]))
        if name == "pi":
            return arb.pi()
        if name == "infty":
            return arb.pos_inf()
        if name == "|V|":
            return arb(len(self.g.example.vocab))
        if name == "n":
            return arb(self.g["input"].shape[0] if "input" in self.g.stages
                       else next(iter(self.g)).shape[0])
        if name == "d":
            return arb(self.g["input"].shape[1] if "input" in self.g.stages
                       else next(iter(self.g)).shape[1])
        if name == "t":
            return arb(self.step if self.step is not None else step_of(self.near))
        if name in ("lr", "beta1", "beta2", "decay"):
            stages = [s for s in self.g if getattr(s.op, name, None) is not None]
            if not stages:
                raise InputError(f"{name}: the run has no such setting")
            best = max(stages, key=lambda s: _common(s.name, self.near))
            return _ball(getattr(best.op, name))
        if name == "d_{ff}":
            stages = [s for s in self.g
                      if s.op.matrix_form == "affine" and s.op.role == "ffn_hidden"]
            if not stages:
                raise InputError("d_ff: the example has no feed-forward network")
            return arb(max(stages, key=lambda s: _common(s.name, self.near)).shape[1])
        if name in ("d_{in}", "d_{out}"):
            rows, cols = self.projection()
            return arb(rows if name == "d_{in}" else cols)
        if name in ("d_{k}", "d_{v}"):
            # the keys the scores read (their second input), the values the heads sum
            reader = (lambda s: s.op.score_key is not None) if name == "d_{k}" \
                else (lambda s: s.op.matrix_form == "product")
            stages = [self.g[s.inputs[1]] for s in self.g
                      if reader(s) and not s.name.startswith("grad.")]
        else:  # ε
            stages = [s for s in self.g if getattr(s.op, "eps", None)
                      and not s.name.startswith("grad.")]
        if not stages:
            raise InputError(f"{name}: the example has no such quantity")
        best = max(stages, key=lambda s: _common(s.name, self.near))
        if name in ("d_{k}", "d_{v}"):
            return arb(best.shape[1])
        return _ball(best.op.eps)

    def projection(self) -> tuple[int, int]:
        """The shape of the weight the claimed stage's equation multiplies by: its own
        operation's (``q = x W_Q``), a weight gradient's, or for a gradient the
        consumer's (``∂L/∂a = ∂L/∂f W_2^T``)."""
        near = self.g[self.near]
        source = self.near.removeprefix("grad.")
        if near.op.of_weight and len(near.inputs) >= 2:
            candidates = [self.g[near.inputs[-2]]]
        else:
            own = [self.g[source]] if source in self.g.stages else []
            candidates = own + [s for s in self.g if source in s.inputs
                                and s.op.parameters() and not s.name.startswith("grad.")]
        for stage in candidates:
            for m in stage.op.parameters().values():
                if m.rows > 1 and m.cols > 1:
                    return m.rows, m.cols
        raise InputError(f"d_in/d_out: {self.near} multiplies by no weight matrix")

    def row(self, env: Env) -> int:
        """The token row a symbol with one index (``p_k``) or none (``q``) is read in:
        the equation's own, or on a Jacobian of one softmax row, that row."""
        return self.token_row if self.token_row is not None else env.row

    def is_step(self, letter: str) -> bool:
        """Is ``letter`` the step t of a training run (the claimed stage is a step's)?"""
        return self.table.scalar(lm.Sym(letter)) == "t" and is_training_stage(self.near)

    def size(self, name: str) -> int:
        return int(self.scalar(name).unique_fmpz())

    # -- values -------------------------------------------------------------------
    def value(self, node: lm.Node, env: Env) -> object:  # noqa: C901 (one dispatch)
        if isinstance(node, lm.Num):
            return _ball(node.value)
        if isinstance(node, lm.Sym):
            return self.symbol(node, env)
        if isinstance(node, lm.Unary):
            v = self.value(node.operand, env)
            return v.map(lambda x: -x) if isinstance(v, Mat) else -v
        if isinstance(node, lm.Binary):
            if node.op in ("*", "jux"):
                merged = self.merge_words(node, env)
                if merged is not node:
                    return self.value(merged, env)
                if node.op == "jux":
                    applied = self.sigmoids(node)
                    if applied is not node:
                        return self.value(applied, env)
            rows = self.token_rows(node, env)
            if rows is not None:  # q_i^\top k_j: the dot product of two tokens' rows
                return sum((x * y for x, y in zip(*rows)), arb(0))
            a, b = self.operands(node, env)
            if node.op == "otimes":
                return _outer(a, b)
            if node.op == "*" and _vectors(a, b) and _named_vectors(node):
                # q_i \cdot k_j: a dot product (of two symbols; x \cdot erf(..) is not)
                return sum((x * y for x, y in zip(*(
                    [e for row in v.rows for e in row] for v in (a, b)))), arb(0))
            if node.op in ("*", "jux"):
                return _product(a, b)
            if node.op in ("+", "-"):
                a, b = self.masked_tail(node, a, b, env)
            if node.op == "+":
                return _elementwise(a, b, lambda x, y: x + y, "add")
            if node.op == "-":
                return _elementwise(a, b, lambda x, y: x - y, "subtract")
            if node.op == "/":
                return _elementwise(a, b, lambda x, y: x / y, "divide")
            if node.op == "odot":
                return _elementwise(a, b, lambda x, y: x * y, "multiply entrywise")
            if isinstance(b, Mat):
                raise Inapplicable("a power with a matrix exponent")
            exponent = self.exact_power(node.right, env)
            if isinstance(node.left, lm.Call) and node.left.name == "diag":
                # diag(ℓ)^{-1}: the inverse of a diagonal matrix, its entries powered
                n = len(a.rows)
                return Mat([[_power(a.rows[i][i], exponent if exponent is not None else b)
                             if i == j else arb(0) for j in range(n)] for i in range(n)])
            return _elementwise(a, b, lambda x, y: _power(x, exponent if exponent is not None
                                                          else y), "raise")
        if isinstance(node, lm.Transpose):
            v = self.value(node.operand, env)
            if node.written == "t" and self.is_step("t"):  # β^t: a power of the step
                step = self.size("t")
                return v.map(lambda x: _power(x, step)) if isinstance(v, Mat) \
                    else _power(v, step)
            return v.t() if isinstance(v, Mat) else v
        if isinstance(node, lm.Call):
            return self.call(node, env)
        if isinstance(node, lm.Ones):
            return self.ones(node, None, env)
        if isinstance(node, lm.Reduce):
            return self.reduce(node, env)
        if isinstance(node, lm.Indicator):
            return self.indicator(node.condition, env)
        if isinstance(node, lm.Cases):
            for value, condition in node.rows:
                if condition is None or self.condition(condition, env):
                    return self.value(value, env)
            raise Inapplicable("no case of the distinction holds")
        if isinstance(node, lm.Matrix):  # [a, b], bmatrix: each entry one number
            out = []
            for row in node.rows:
                if any(_is_ellipsis(item) for item in row):  # [-i, \ldots, -1, 0]
                    out.append([_ball(v) for v in self.progression(row, env)])
                    continue
                entries = [self.value(item, env) for item in row]
                if any(isinstance(e, Mat) and e.shape != (1, 1) for e in entries):
                    raise Inapplicable("a matrix written out with a matrix as an entry")
                out.append([e.rows[0][0] if isinstance(e, Mat) else e for e in entries])
            return Mat(out)
        if isinstance(node, lm.Compare):
            raise InputError(f"cannot read a comparison at column {node.col} outside "
                             f"an indicator [..]")
        if isinstance(node, lm.Arguments):
            raise InputError(f"cannot read the list at column {node.col}: (a, b) is only "
                             f"a left-hand side's arguments (\\mathrm{{Attention}}(Q, K, V))")
        if isinstance(node, lm.Subscripted):  # (..)_{ij}: the indices address the whole
            v = self.value(node.operand, Env(env.indices, None))
            rows = v.rows if isinstance(v, Mat) else [[v]]  # (b_C)_j of one class
            return self.entry(rows, "(..)", node.sub, env)
        raise InputError(f"cannot read the node at column {node.col}")

    def progression(self, row: tuple[lm.Node, ...], env: Env) -> list[Fraction]:
        """A row written with an ellipsis, ``[-i, \\ldots, -2, -1, 0]`` (ALiBi's
        distances): the whole numbers from the first term to the last in the steps the
        written terms take (at a small i the run is shorter than the terms written
        after the ellipsis: ``[-1, 0]`` at i = 1)."""
        k = next(n for n, item in enumerate(row) if _is_ellipsis(item))
        before, after = row[:k], row[k + 1:]
        if not before or not after or any(_is_ellipsis(item) for item in after):
            raise InputError(f"cannot read \\ldots at column {row[k].col}: write it once, "
                             f"between terms ([-i, \\ldots, -1, 0])")
        values = [self.index(item, env) for item in (*before, *after)]
        steps = {b - a for a, b in zip(values, values[1:len(before)])} | \
            {b - a for a, b in zip(values[len(before):], values[len(before) + 1:])}
        if len(steps) != 1 or 0 in steps:
            raise InputError(f"cannot read \\ldots at column {row[k].col}: the terms "
                             f"around it must step evenly ([0, 1, \\ldots, n-1])")
        (step,) = steps
        first, last = values[0], values[-1]
        count = (last - first) / step
        if count.denominator != 1 or count < 0 or count > _MAX_RUN:
            raise Inapplicable(f"the run {first}, ..., {last} in steps of {step}")
        return [first + step * n for n in range(int(count) + 1)]

    def masked_tail(self, node: lm.Binary, a: object, b: object, env: Env
                    ) -> tuple[object, object]:
        """ALiBi's ``q_i K^\\top + m \\cdot [-i, \\ldots, -1, 0]`` in a causal model: a
        row written out with an ellipsis that is shorter than the row it is added to
        lists the keys the query sees; the keys after it, masked in the claimed
        stage's row, get -∞ (the causal mask's).  Anything else is left as it is."""
        short = next((side for side, child in ((0, node.left), (1, node.right))
                      if _written_run(child)), None)
        pair = [a, b]
        mine, other = pair[short] if short is not None else None, pair[1 - (short or 0)]
        if short is None or not (isinstance(mine, Mat) and isinstance(other, Mat)) \
                or mine.shape[0] != 1 or other.shape[0] != 1 \
                or mine.shape[1] >= other.shape[1] or env.row is None:
            return a, b
        masked = self.masked_columns(env.row)
        width = other.shape[1]
        if masked != set(range(mine.shape[1], width)):
            return a, b
        pair[short] = Mat([mine.rows[0] + [arb.neg_inf()] * (width - mine.shape[1])])
        return pair[0], pair[1]

    def masked_columns(self, row: int) -> set[int] | None:
        """The columns the mask blocks in ``row`` of the claimed stage's scores (its own
        or the nearest input's with a mask; None: none)."""
        seen, todo = set(), [self.near]
        while todo:
            name = todo.pop(0)
            if name in seen or name not in self.g.stages:
                continue
            seen.add(name)
            masked = getattr(self.g[name].op, "masked", None)
            if isinstance(masked, frozenset) and masked:
                return {j for i, j in masked if i == row}
            todo.extend(self.g[name].inputs)
        return None

    def operands(self, node: lm.Binary, env: Env) -> tuple[object, object]:
        """The values of a binary node's operands; a vector of ones without its length
        (``X \\mathbf{1}``, ``\\mathbf{1}^\\top X``, ``\\mu \\mathbf{1}^\\top``) as long as
        the product needs (:meth:`ones`)."""
        left, right = _unsized_ones(node.left), _unsized_ones(node.right)
        if node.op not in ("*", "jux", "otimes") or (left is None and right is None):
            return self.value(node.left, env), self.value(node.right, env)
        if left is not None and right is not None:
            raise InputError(f"cannot read \\mathbf{{1}} at column {node.col}: give a "
                             f"length (\\mathbf{{1}}_n) to one of two vectors of ones")
        if right is not None:
            a = self.value(node.left, env)
            return a, self.ones(right, (a, "right", node.op), env)
        b = self.value(node.right, env)
        return self.ones(left, (b, "left", node.op), env), b

    def ones(self, node: lm.Node, partner: tuple[object, str, str] | None,
             env: Env) -> Mat:
        """A vector of ones (``node``: an :class:`lm.Ones` or its transpose), a column
        unless transposed.  Without its length, the product it is in decides it: the
        matrix beside it (X 1: X's columns; 1^T X: X's rows), or beside a vector the
        claimed stage's shape (μ 1^T: the stage's columns; 1 v: its rows)."""
        transposed = isinstance(node, lm.Transpose)
        ones = node.operand if transposed else node
        if ones.size is not None:
            size = self.index(ones.size, env)
            if size.denominator != 1 or size < 1:
                raise Inapplicable("a vector of ones whose length is not a whole number")
            n = int(size)
        elif partner is None:
            raise InputError(f"cannot read \\mathbf{{1}} at column {ones.col}: write its "
                             f"length (\\mathbf{{1}}_n) where no product decides it")
        else:
            other, side, op = partner
            r, c = other.shape if isinstance(other, Mat) else (1, 1)
            stage = self.g[self.near].shape
            if op == "otimes":
                n = stage[1] if side == "right" else stage[0]
            elif side == "right":  # X 1 (X's columns), or v 1^T (the stage's columns)
                n = stage[1] if transposed else c
            else:  # 1^T X (X's rows), or 1 v (the stage's rows)
                n = r if transposed else stage[0]
        column = Mat([[arb(1)] for _ in range(n)])
        return column.t() if transposed else column

    def token_rows(self, node: lm.Binary, env: Env) -> tuple[list, list] | None:
        """``q_i^\\top k_j`` (or ``q_i k_j^\\top``): two symbols with one index each, one
        transposed -- the rows of tokens i and j (None: not that form)."""
        if node.op not in ("*", "jux"):
            return None
        left, right = _untransposed(node.left), _untransposed(node.right)
        if (left is None) == (right is None):
            return None
        left, right = left or node.left, right or node.right
        out = []
        for sym in (left, right):
            if not (isinstance(sym, lm.Sym) and sym.sub and not sym.sup) \
                    or len(lm.split_indices(sym.sub, 1)) != 1:
                return None
            try:
                target, sub_used, _ = self.resolve(sym)
            except InputError:
                return None
            if not isinstance(target, Target) or sub_used:
                return None
            rows = self.matrix(target)
            if len(rows) < 2 or len(rows[0]) < 2:
                return None
            out.append(self.vector(rows, sym, sym.sub, env).rows)
        a, b = ([x for row in m for x in row] for m in out)
        if len(a) != len(b):
            raise Inapplicable(f"cannot multiply rows of {len(a)} and {len(b)} entries")
        return a, b

    def sigmoids(self, node: lm.Binary) -> lm.Node:
        """A juxtaposed product with each unbound ``\\sigma`` applied to the factor
        after it (``g \\, \\sigma(g)``: SiLU), or ``node`` itself."""
        factors = juxtaposed(node)
        if not any(self.sigmoid(f) for f in factors[:-1]):
            return node
        out: list[lm.Node] = []
        k = 0
        while k < len(factors):
            if k + 1 < len(factors) and self.sigmoid(factors[k]):
                out.append(lm.Call(self.sigmoid(factors[k]), (factors[k + 1],),
                                   col=factors[k].col))
                k += 2
            else:
                out.append(factors[k])
                k += 1
        result = out[0]
        for f in out[1:]:
            result = lm.Binary("jux", result, f, col=node.col)
        return result

    def sigmoid(self, node: lm.Node) -> str:
        """The function a bare symbol the notation does not bind stands for, applied to
        what follows ("": none): ``\\sigma`` the logistic function (the notation's σ is
        ``\\sigma^2`` or ``\\tilde\\sigma``), ``\\Phi`` and ``\\phi`` the standard
        normal's distribution and density, a named activation with a prime
        (``\\mathrm{GELU}'``, or ``\\frac{d}{dx}\\mathrm{GELU}``) its derivative."""
        if not (isinstance(node, lm.Sym) and not node.sub and not node.sup
                and not node.grad):
            return ""
        if node.primes == 1 and _derivative(node.base) is not None:
            name = _derivative(node.base)
        elif not node.primes and node.base in fns.functions().by_symbol:
            name = fns.functions().by_symbol[node.base].key
        else:
            return ""
        try:
            self.resolve(node)
        except InputError:
            return name
        return ""

    def exact_power(self, node: lm.Node, env: Env) -> int | None:
        """An integer exponent as an int (x^2 stays exact), else None."""
        try:
            v = self.index(node, env)
        except (InputError, Inapplicable):
            return None
        return int(v) if v.denominator == 1 else None

    def symbol(self, sym: lm.Sym, env: Env) -> object:
        if not sym.sub and not sym.sup and not sym.grad \
                and sym.base + "'" * sym.primes in env.indices:
            return arb(env.indices[sym.base + "'" * sym.primes])
        target, sub_used, sup_used = self.resolve(sym)
        if target == "delta":
            a, b = _exactly(lm.split_indices(sym.sub, 2), 2, sym)
            return arb(1 if self.index(a, env) == self.index(b, env) else 0)
        if isinstance(target, str):
            value: object = self.scalar(target)
        else:
            rows = self.matrix(target)
            if not sym.sub and not sup_used and self.index_superscript(sym, rows, env):
                return self.entry(rows, sym.show(), sym.sup, env)  # A^{ij}: A_{ij}
            if sym.bold and not target.matrix:
                value = self.vector(rows, sym, None if sub_used else sym.sub, env)
            elif sym.sub and not sub_used:
                value = self.entry(rows, sym.show(), sym.sub, env)
            else:
                value = self.whole(rows, target, env)
        sup, _ = split_where(sym)
        if sup and not sup_used:
            if sup in lm._TRANSPOSE and not (sup == "t" and self.is_step("t")):
                return value.t() if isinstance(value, Mat) else value
            exponent = lm.Parser(list(sym.sup)).sub_expression(sym.sup, sym.col)
            power = self.exact_power(exponent, env)
            e = self.value(exponent, env) if power is None else power
            return value.map(lambda x: _power(x, e)) if isinstance(value, Mat) \
                else _power(value, e)
        return value

    def index_superscript(self, sym: lm.Sym, rows: list[list[arb]], env: Env) -> bool:
        """Is ``A^{ij}`` an entry of the matrix A (not a power): A a matrix (more than one
        row and column) and the superscript's letters, as many as its axes, each an
        index in scope (the left-hand side's or a sum's), none the step t."""
        letters = [u.text for u in sym.sup or () if not (u.kind == "char" and u.text == ",")]
        return len(rows) > 1 and len(rows[0]) > 1 and len(letters) == 2 \
            and all(u.kind == "letter" for u in sym.sup if u.text != ",") \
            and all(x in env.indices and not self.is_step(x) for x in letters)

    def vector(self, rows: list[list[arb]], sym: lm.Sym, sub: tuple | None, env: Env
               ) -> Mat:
        r"""``\mathbf{q}_i``: token i's row (the implicit row without a subscript), 1 x d
        (d x 1 for column vectors)."""
        if sub:
            (part,) = _exactly(lm.split_indices(sub, 1), 1, sym)
            at = self.index(part, env)
            if at.denominator != 1:
                raise Inapplicable(f"{sym.show()}: an index is not a whole number")
            i = int(at) - self.base
        elif self.row(env) is not None:  # the implicit row, or a Jacobian's softmax row
            i = self.row(env)
        else:
            return Mat(rows)
        if not 0 <= i < len(rows):
            raise Outside(f"{sym.show()}: row {int(at)} is outside its "
                               f"{len(rows)} rows")
        row = Mat([list(rows[i])])
        return row.t() if self.column else row

    def whole(self, rows: list[list[arb]], target: Target, env: Env) -> object:
        """A symbol written without indices: the matrix (``Q``, ``W_Q``), its row
        ``q`` in the implicit row, a per-row number ``μ``, or the number ``L``."""
        r, c = len(rows), len(rows[0])
        if (r, c) == (1, 1):
            return rows[0][0]
        if target.matrix or env.row is None:
            return Mat(rows)
        if c == 1:
            return rows[self.row(env)][0]
        row = Mat([list(rows[self.row(env)])])
        return row.t() if self.column else row

    def entry(self, rows: list[list[arb]], shown: str, sub: tuple, env: Env) -> object:
        """One entry (``q_{ic}``; one index: the column in the implicit row), or outside
        any row (matrix form: ``\\sum_i \\partial L/\\partial h_i``) token i's row."""
        r, c = len(rows), len(rows[0])
        parts = lm.split_indices(sub, 2 if r > 1 and c > 1 else 1)
        at = [self.index(p, env) for p in parts]
        if any(v.denominator != 1 for v in at):
            raise Inapplicable(f"{shown}: an index is not a whole number")
        k = [int(v) - self.base for v in at]
        if len(k) == 2:
            i, j = k
        elif len(k) == 1 and c == 1:
            i, j = k[0], 0
        elif len(k) == 1 and r == 1:
            i, j = 0, k[0]
        elif len(k) == 1:
            if env.row is None:  # matrix form: token i's row
                if not 0 <= k[0] < r:
                    raise Outside(f"{shown}: row {int(at[0])} is outside its {r} rows")
                row = Mat([list(rows[k[0]])])
                return row.t() if self.column else row
            i, j = self.row(env), k[0]
        else:
            raise InputError(f"{shown}: a stage has at most two indices")
        if not (0 <= i < r and 0 <= j < c):
            shown_at = ", ".join(str(v) for v in at)
            raise Outside(f"{shown} at [{shown_at}] is outside its {r}x{c} stage")
        return rows[i][j]

    def index(self, node: lm.Node, env: Env) -> Fraction:
        """An index expression's exact value."""
        if isinstance(node, lm.Num):
            return node.value
        if isinstance(node, lm.Sym) and not node.sub and not node.sup and not node.grad:
            name = node.base + "'" * node.primes  # j' is an index of its own
            if name in env.indices:
                return Fraction(env.indices[name])
        if isinstance(node, lm.Sym):
            target, sub_used, _ = self.resolve(node)
            if isinstance(target, str) and (target in _SIZES or target.startswith("#")):
                return Fraction(self.size(target))
            if isinstance(target, str) and target.startswith("="):  # a constant: P
                return Fraction(target[1:])
            targets = getattr(self.g[target.stage].op, "targets", None) \
                if isinstance(target, Target) and target.parameter == "target" else None
            if targets is not None and node.sub and not sub_used:  # t_i: a target's id
                (part,) = _exactly(lm.split_indices(node.sub, 1), 1, node)
                k = self.index(part, env)
                if k.denominator != 1 or not 0 <= int(k) - self.base < len(targets) \
                        or targets[int(k) - self.base] is None:
                    raise Inapplicable(f"{node.show()}: no target there")
                return Fraction(targets[int(k) - self.base] + self.base)
            if isinstance(target, Target) and target.constant is not None:  # t_i: an id
                rows = [list(row) for row in target.constant]
                found = self.entry(rows, node.show(), node.sub, env) if node.sub and \
                    not sub_used else rows[0][0] if len(rows) == len(rows[0]) == 1 else None
                if isinstance(found, Fraction):
                    return found + self.base
            raise InputError(f"cannot use {node.show()} in an index at column {node.col}")
        if isinstance(node, lm.Unary):
            return -self.index(node.operand, env)
        if isinstance(node, lm.Binary) and node.op in ("+", "-", "*", "jux", "/"):
            a, b = self.index(node.left, env), self.index(node.right, env)
            if node.op == "+":
                return a + b
            if node.op == "-":
                return a - b
            if node.op == "/":
                if b == 0:
                    raise Inapplicable("an index divided by 0")
                return a / b
            return a * b
        raise InputError(f"cannot read an index expression at column {node.col}")

    def merge_words(self, node: lm.Binary, env: Env) -> lm.Node:
        """Juxtaposed letters that spell an index in scope (``pos``) or a symbol of the
        notation (``PE``) as that one name."""
        factors = juxtaposed(node)
        words = set(env.indices) | self.words

        def plain(n: lm.Node) -> bool:
            return isinstance(n, lm.Sym) and len(n.base) == 1 and not n.grad \
                and not n.primes and not n.sub and not n.sup

        out: list[lm.Node] = []
        k, changed = 0, False
        while k < len(factors):
            best = None
            for end in range(len(factors), k + 1, -1):
                run = factors[k:end]
                if all(plain(f) for f in run[:-1]) and isinstance(run[-1], lm.Sym) \
                        and len(run[-1].base) == 1 and not run[-1].grad:
                    word = "".join(f.base for f in run)
                    if word in words and (plain(run[-1]) or word in self.words):
                        last = run[-1]
                        best = (end, lm.Sym(word, last.sub, last.sup, last.primes,
                                            col=run[0].col))
                        break
            if best is None:
                out.append(factors[k])
                k += 1
            else:
                k, merged = best
                out.append(merged)
                changed = True
        if not changed:
            return node
        result = out[0]
        for f in out[1:]:
            result = lm.Binary("jux", result, f, col=node.col)
        return result

    def call(self, node: lm.Call, env: Env) -> object:
        if node.name == "concat":
            parts = [self.value(a, env) for a in self.run(node.args)]
            mats = [p if isinstance(p, Mat) else Mat([[p]]) for p in parts]
            if len({m.shape[0] for m in mats}) != 1:
                raise Inapplicable("Concat of matrices with different numbers of rows")
            return Mat([[x for m in mats for x in m.rows[i]]
                        for i in range(mats[0].shape[0])])
        if node.name in ("rowsum", "rowmax"):  # FlashAttention's rowsum(dO ∘ O), rowmax(S)
            (arg,) = node.args
            v = self.value(arg, env)
            rows = v.rows if isinstance(v, Mat) else [[v]]
            if node.name == "rowmax":
                return Mat([[_row_max(row)] for row in rows])
            return Mat([[sum(row, arb(0))] for row in rows])
        if node.name == "softmax":
            (arg,) = node.args
            v = self.value(arg, env)
            if self.columns and isinstance(v, Mat):  # each column (a token) normalised
                return _softmax(v.t()).t()
            return _softmax(v)
        if node.name in ("mean", "var", "rms"):  # E[x]: each row's statistic, a column
            (arg,) = node.args
            v = self.value(arg, env)
            rows = v.rows if isinstance(v, Mat) else [[v]]
            out = [[_statistic(node.name, row)] for row in rows]
            return out[0][0] if len(out) == 1 else Mat(out)
        if node.name == "diag":  # diag(v): the vector on a diagonal
            (arg,) = node.args
            v = self.value(arg, env)
            flat = [x for row in v.rows for x in row] if isinstance(v, Mat) else [v]
            return Mat([[x if i == j else arb(0) for j in range(len(flat))]
                        for i, x in enumerate(flat)])
        if node.name == "max":
            values = [self.value(a, env) for a in node.args]
            out = values[0]
            for v in values[1:]:
                out = _elementwise(out, v, _max, "compare")
            return out
        (arg,) = node.args
        v = self.value(arg, env)
        f = _value(node.name)
        return v.map(f) if isinstance(v, Mat) else f(v)

    def run(self, items: tuple[lm.Node, ...]) -> list[lm.Node]:
        """Concat's items with ``a_1, \\ldots, a_h`` written out: a_2, ... up to the last
        number written, or (a letter: ``h``, the heads) as far as the example has them."""
        out: list[lm.Node] = []
        k = 0
        while k < len(items):
            item = items[k]
            if not (isinstance(item, lm.Sym) and item.base == lm.ELLIPSIS):
                out.append(item)
                k += 1
                continue
            first = out[-1] if out else None
            last = items[k + 1] if k + 1 < len(items) else None
            if not (isinstance(first, lm.Sym) and isinstance(last, lm.Sym)
                    and first.base == last.base and first.sub and last.sub
                    and first.sub_text.isdigit()):
                raise InputError(f"cannot read \\ldots at column {item.col}: write it "
                                 f"between two items of one name, the first numbered "
                                 f"(\\mathrm{{head}}_1, \\ldots, \\mathrm{{head}}_h)")
            numbered = last.sub_text.isdigit()
            n = int(first.sub_text) + 1
            while n < (int(last.sub_text) if numbered else _MAX_RUN):
                sym = replace(first, sub=(lm.Token("num", str(n), first.col),))
                if not numbered and self.table.lookup(sym, self.near) is None:
                    break  # head_h: as many as the example has
                out.append(sym)
                n += 1
            k += 2 if not numbered else 1
        return out

    def reduce(self, node: lm.Reduce, env: Env) -> object:
        ranges = []
        for k, name in enumerate(node.indices):
            if (node.low is not None or node.high is not None) and k == len(node.indices) - 1:
                low = self.index(node.low, env) if node.low is not None else \
                    Fraction(self.base)
                high = self.index(node.high, env) if node.high is not None else \
                    Fraction(self.base + self.axis(name, node.body, env, node.op) - 1)
            elif node.low is not None or node.high is not None:
                raise InputError(f"cannot read the limits of the sum at column "
                                 f"{node.col} over several indices")
            else:
                low = Fraction(self.base)
                high = Fraction(self.base + self.axis(name, node.body, env, node.op) - 1)
            if low.denominator != 1 or high.denominator != 1:
                raise Inapplicable("a sum's limit is not a whole number")
            ranges.append(range(int(low), int(high) + 1))
        total: object = None
        for values in itertools.product(*ranges):
            term = self.value(node.body, env.bind(dict(zip(node.indices, values))))
            if total is None:
                total = term
            elif node.op == "sum":
                total = _elementwise(total, term, lambda x, y: x + y, "add")
            else:
                total = _elementwise(total, term, _max, "compare")
        return arb(0) if total is None else total

    def axis(self, name: str, body: lm.Node, env: Env, op: str = "sum") -> int:
        """The length of the axis index ``name`` runs over in ``body``."""
        for sym, shape in self._indexed(body, env):
            r, c = shape
            parts = lm.split_indices(sym.sub, 2 if r > 1 and c > 1 else 1)
            for position, part in enumerate(parts):
                if isinstance(part, lm.Sym) and part.base + "'" * part.primes == name \
                        and not part.sub:
                    if len(parts) == 2:
                        return (r, c)[position]
                    if r > 1 and c > 1:  # a column in a row; a row in matrix form
                        return c if env.row is not None else r
                    return r if c == 1 else c
        raise InputError(f"cannot tell how far the {'sum' if op == 'sum' else 'maximum'} "
                         f"over {name} runs: give its limits "
                         f"(\\{op}_{{{name}=0}}^{{n-1}})")

    def _indexed(self, body: lm.Node, env: Env):
        """(node with a subscript, the shape its subscript indexes) for every symbol of
        ``body`` bound to a stage or weight, and every entry of an expression
        (``(x + m)_k``)."""
        stack = [body]
        while stack:
            n = stack.pop()
            if isinstance(n, lm.Sym) and n.sub:
                try:
                    target, sub_used, _ = self.resolve(n)
                except InputError:
                    target, sub_used = None, True
                if isinstance(target, Target) and not sub_used:
                    rows = self.matrix(target)
                    yield n, (len(rows), len(rows[0]))
            elif isinstance(n, lm.Subscripted):
                try:
                    v = self.value(n.operand, Env(env.indices, None))
                except (InputError, Inapplicable, Undecided):
                    v = None
                if isinstance(v, Mat):
                    yield n, v.shape
            for value in vars(n).values():
                if isinstance(value, lm.Node):
                    stack.append(value)
                elif isinstance(value, tuple):
                    stack.extend(v for v in value if isinstance(v, lm.Node))

    def indicator(self, node: lm.Node, env: Env) -> Value:
        """``\\mathbb{1}[...]``: 1 or 0; entry by entry over a matrix (``\\mathbb{1}[H > 0]``,
        a number compared with every entry)."""
        values = self._compared(node, env)
        shapes = {v.shape for v in values if isinstance(v, Mat)}
        if not shapes:
            return arb(1 if self._holds(node, values) else 0)
        if len(shapes) > 1:
            raise Inapplicable("an indicator comparing matrices of different shapes")
        r, c = shapes.pop()
        return Mat([[arb(1 if self._holds(node, [v.rows[i][j] if isinstance(v, Mat) else v
                                                 for v in values]) else 0)
                     for j in range(c)] for i in range(r)])

    def condition(self, node: lm.Node, env: Env) -> bool:
        return self._holds(node, self._compared(node, env))

    def _compared(self, node: lm.Node, env: Env) -> list:
        """The values a comparison compares (an index stays an exact rational)."""
        if not isinstance(node, lm.Compare):
            raise InputError(f"cannot read an indicator at column {node.col}")
        values = []
        for operand in node.operands:
            try:
                values.append(self.index(operand, env))
            except (InputError, Inapplicable):
                values.append(self.value(operand, env))
        return values

    def _holds(self, node: lm.Compare, values: list) -> bool:
        for op, a, b in zip(node.ops, values, values[1:]):
            if isinstance(a, Fraction) and isinstance(b, Fraction):
                s = (a > b) - (a < b)
            else:
                if isinstance(a, Mat) or isinstance(b, Mat):
                    raise Inapplicable("a comparison of matrices")
                s = _sign(_ball(a) - _ball(b))
            if not _TESTS[op](s):
                return False
        return True


def _exactly(parts: list, count: int, sym: lm.Sym) -> list:
    """``parts`` when there are ``count`` of them, else the one-line error."""
    if len(parts) != count:
        raise InputError(f"cannot read {sym.show()} at column {sym.col}: it takes "
                         f"{count} {'index' if count == 1 else 'indices'}, not {len(parts)}")
    return parts


def symbols_of(node: lm.Node):
    """Every symbol of a tree."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, lm.Sym):
            yield n
        for value in vars(n).values():
            if isinstance(value, lm.Node):
                stack.append(value)
            elif isinstance(value, tuple):
                stack.extend(v for v in value if isinstance(v, lm.Node))


#: The longest run ``a_1, \\ldots, a_h`` is written out to.
_MAX_RUN = 1000
#: The sizes of the glossary (whole numbers: they may stand in an index or a limit).
_SIZES = ("n", "d", "d_{k}", "d_{v}", "d_{in}", "d_{out}", "d_{ff}", "|V|", "t")


def _common(a: str, b: str) -> int:
    x, y = a.removeprefix("grad.").split("."), b.removeprefix("grad.").split(".")
    k = 0
    while k < min(len(x), len(y)) and x[k] == y[k]:
        k += 1
    return k
