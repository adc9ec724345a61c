"""Every displayed equation is proved: at every entry of every stage it equals the
operation's exact local formula (the forward ``sympy``, a gradient's per-consumer rule).

The equation (symformer.equations: each operation's index form, declared once) is
instantiated at each entry over the same stage symbols the local formula is written
over, and the difference is shown to be exactly 0: by SymPy's simplification or the
engine's polynomial zero proof (which unfolds stage symbols: a variance rule written
with mu equals the rule written with the row's sum).  No floats.  A wrong equation
such as ``a_j = g_j h_j`` (the SiLU missing) fails here.
"""

from __future__ import annotations

import glob
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_engine_random import examples

from symformer import derive, load_example
from symformer.blocks.backward import with_gradients
from symformer.conventions import Convention, derive_variant
from symformer.equations.stage import stage_equation
from symformer.example.loader import example_from_dict, parse_example
from symformer.lazy import sympy
from symformer.ops.base import OPERATIONS
from symformer.ops.gradient import Gradient

EXAMPLES = sorted(p for p in glob.glob(str(Path(__file__).parent.parent / "symformer" /
                                           "examples" / "*.toml")) if "claims" not in p)
#: Operations whose stages are never displayed with a general equation (training's
#: update steps print tables, not equations; so do its steps' operations reading their
#: weights from stages, ``Operation.staged``, whose ``equation()`` is None).
NOT_DISPLAYED = {"adam_moment", "adam_step", "adam_part", "sgd_step", "gradient"}
#: The argmax indicator compares values (1 where l_j is the row's maximum): its
#: equation's comparisons are decided with certified balls (prove_argmax).
DECIDED = {"argmax"}


def _unfold_means(g, expr):
    """Each row mean's symbol replaced by its local formula (the rules write x - mu
    with mu's definition: sum_j (x_j - mu) is then 0 on sight)."""
    def local(symbol):
        name, i, j = g.owner(symbol)
        return g.local(name)[i, j]
    means = {s for s in expr.free_symbols if g[g.owner(s)[0]].op.name in ("mean", "whole_mean")}
    return expr.xreplace({s: local(s) for s in means})


def _zero(g, diff) -> bool:
    for candidate in (diff, _unfold_means(g, diff)):
        if candidate == 0 or sympy.expand(candidate) == 0 \
                or sympy.together(candidate) == 0 or sympy.cancel(candidate) == 0:
            return True
    return sympy.simplify(diff) == 0


def _resolve_steps(g, expr):
    """An indicator 1[h > 0] over a stage symbol h, decided by h's certified sign
    (as the ReLU's exact rule decides its step)."""
    def decide(p):
        (body, cond), (other, _) = p.args
        if isinstance(cond, sympy.StrictGreaterThan) and cond.rhs == 0 \
                and cond.lhs.is_Symbol:
            return body if g.sign(*g.owner(cond.lhs)) > 0 else other
        return p
    return expr.replace(lambda e: isinstance(e, sympy.Piecewise) and len(e.args) == 2, decide)


def _known_constants(g, expr):
    """A stage that is a known constant (dL/dL = 1) written as its value, as the
    printed rule writes it."""
    return expr.xreplace({s: g[g.owner(s)[0]].op.constant for s in expr.free_symbols
                          if g[g.owner(s)[0]].op.constant is not None})


def _steps(expr):
    return expr.replace(lambda e: isinstance(e, sympy.Heaviside), lambda e: sympy.Piecewise(
        (1, e.args[0] > 0), (0, True)))


def prove_stage(g, stage) -> int:
    """Prove every entry of the stage's displayed equation; returns the entries proved."""
    found = stage_equation(stage)
    assert found is not None, f"{stage.name}: {stage.op.name} has no equation"
    if isinstance(stage.op, Gradient):
        locals_ = [p.formula for p in stage.op.parts(stage)]
    else:
        locals_ = [g.local(stage.name)]
    assert len(locals_) == len(found.parts), stage.name
    count = 0
    for bound, local in zip(found.parts, locals_):
        values = bound.values()
        assert set(values) == {(i, j) for i in range(local.rows) for j in range(local.cols)}, \
            f"{stage.name}: the equation does not cover every entry"
        for (i, j), value in values.items():
            expected = _known_constants(g, _resolve_steps(g, _steps(local[i, j])))
            value = _resolve_steps(g, value)
            assert value == expected or _zero(g, value - expected), \
                f"{stage.name}[{i},{j}]: {bound.lines()[0].plain} gives {value}, not {expected}"
            count += 1
    return count


def prove_argmax(g, stage) -> None:
    """t_j = 1 if l_{n-1,j} = max_{j′} l_{n-1,j′} else 0: each comparison of the equation
    decided by certified balls (a strict inequality: a ball excluding 0; equality only
    between the same symbol), against the exact local formula."""
    (bound,) = stage_equation(stage).parts
    balls = g.evaluate(128)
    local = g.local(stage.name)

    def ball(symbol):
        name, i, j = g.owner(symbol)
        return balls[name][i][j]

    for (i, j), value in bound.values().items():
        (one, condition), (zero, _) = value.args
        mine, top = condition.lhs, condition.rhs.args  # Eq(l_j, Max(l_0, ...))
        others = [m for m in top if m != mine]
        beaten = any((ball(m) - ball(mine)) > 0 for m in others)
        wins = all((ball(mine) - ball(m)) > 0 for m in others)
        assert beaten or wins, f"{stage.name}[{i},{j}]: a tie the balls cannot decide"
        assert (zero if beaten else one) == local[i, j], (stage.name, i, j)


def _prove_all(g) -> None:
    for stage in g:
        if stage.op.name in DECIDED:
            prove_argmax(g, stage)
            continue
        assert prove_stage(g, stage) > 0


def test_every_displayed_operation_declares_an_equation():
    for name, cls in OPERATIONS.items():
        if name in NOT_DISPLAYED:
            continue
        assert "equation" in {k for c in cls.__mro__ if c.__name__ != "Operation"
                               for k in vars(c)}, f"{name} ({cls.__module__}) has no equation"


def test_every_differentiable_operation_declares_its_backward_rules():
    for name, cls in OPERATIONS.items():
        if name in NOT_DISPLAYED or "backward" not in {k for c in cls.__mro__
                                                       if c.__name__ != "Operation"
                                                       for k in vars(c)}:
            continue
        assert "backward_equation" in {k for c in cls.__mro__ if c.__name__ != "Operation"
                                       for k in vars(c)}, f"{name} has no backward equation"


@pytest.mark.parametrize("convention", [Convention(layer_norm="unbiased"),
                                        Convention(layer_norm="whole_matrix")],
                         ids=["unbiased", "whole_matrix"])
def test_builtin_conventions_backward_proved(convention):
    g = with_gradients(derive_variant(load_example(), convention))
    for stage in g:
        if isinstance(stage.op, Gradient):
            assert prove_stage(g, stage) > 0


def test_builtin_forward_and_backward_proved():
    g = with_gradients(derive(load_example()))
    _prove_all(g)


def test_builtin_causal_proved():
    _prove_all(derive(load_example(), causal=True))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: Path(p).stem)
def test_shipped_examples_forward_proved(path):
    _prove_all(derive(load_example(path)))


def test_llama_style_backward_proved():
    text = Path(EXAMPLES[[Path(p).stem for p in EXAMPLES].index("llama_style")]).read_text()
    text += '\n[loss]\nkind = "cross_entropy"\ntargets = ["cat", "sat", "the"]\n'
    g = with_gradients(derive(parse_example(text, source="llama_style+loss")))
    for stage in g:
        if isinstance(stage.op, Gradient):
            assert prove_stage(g, stage) > 0


def test_gated_ffn_has_its_silu():
    g = derive(load_example(EXAMPLES[[Path(p).stem for p in EXAMPLES].index("llama_style")]))
    (line,) = stage_equation(g["layer1.ffn.activation"]).lines()
    assert line.plain == "a[i, j] = g[i, j] / (1 + exp(-g[i, j])) * h[i, j]"


def test_wrong_equation_is_caught(monkeypatch):
    """The proof fails for the old `a_j = g_j h_j` (the activation dropped)."""
    from symformer.equations.ir import IndexEquation
    from symformer.ops.gated import GatedProduct
    g = derive(load_example(EXAMPLES[[Path(p).stem for p in EXAMPLES].index("llama_style")]))
    monkeypatch.setattr(GatedProduct, "equation", lambda self, shapes=(): IndexEquation(
        ("a[i, j] = g[i, j] * h[i, j]",), {"a": "out", "g": "in0", "h": "in1"}))
    with pytest.raises(AssertionError):
        prove_stage(g, g["layer1.ffn.activation"])


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(examples(), st.booleans())
def test_random_examples_proved(data, causal):
    _prove_all(derive(example_from_dict(data, "random"), causal=causal))


def test_a_notation_table_feeds_the_symbols():
    """Every format's symbols come from one place (equations.stage.Symbols, by default
    symformer.notation: heads carry a superscript); another table changes the printed
    equation, not its proof."""
    from symformer.equations.stage import Symbols

    class Bare(Symbols):
        def stage(self, stage):
            return stage.op.symbol

    g = derive(load_example())
    (line,) = stage_equation(g["layer1.head2.raw_scores"], Bare()).lines()
    assert line.text.startswith("u_(i,j) = ")
    (line,) = stage_equation(g["layer1.head2.raw_scores"]).lines()
    assert line.text.startswith("u^(2)_(i,j) = ")


def _with_loss(name: str | None, loss: str):
    """A shipped example (None: the built-in) with its [loss] replaced by ``loss``."""
    if name is None:
        text = resources.files("symformer").joinpath("example/builtin.toml").read_text()
        text = text[:text.index("\n[loss]")]
    else:
        text = Path(EXAMPLES[[Path(p).stem for p in EXAMPLES].index(name)]).read_text()
    return with_gradients(derive(parse_example(text + "\n[loss]\n" + loss,
                                               source=f"{name}+loss")))


#: The [stages] table's side stages, proved with the losses (lesson stages).
STAGES = ('\n[stages]\nper_position_loss = true\njacobian = ["layer1.head1.weights[1]"]\n'
          'products = ["layer1.head2.raw_scores[3]"]\n')
LESSON_OPS = {"position_squared_errors", "position_cross_entropy", "softmax_jacobian",
              "dot_products"}


@pytest.mark.parametrize("name, loss", [
    (None, 'kind = "mse"\nreduction = "sum"\ntarget = [[1, 0, 0, 1]]\npositions = [2]\n'),
    (None, 'kind = "mse"\nreduction = "mean"\ntarget = [[1, 0, 0, 1], [0, 1, 1, 0]]\n'
           'positions = [3, 0]\n' + STAGES),
    (None, 'kind = "upstream"\nstage = "layer1.add_norm1"\n'
           'gradient = [[1, 0, 0, 0], [0, 2, 0, 0], [0, 0, -1, 0], [1, 1, 1, 1]]\n'),
    ("gpt2_style", 'kind = "cross_entropy"\ntargets = ["cat", "", "on"]\n'
                   '[stages]\nper_position_loss = true\n'),
    ("gpt2_style", 'kind = "cross_entropy"\nreduction = "sum"\n'
                   'targets = ["cat", "sat", "on"]\n'),
], ids=["mse-sum-position", "mse-mean-positions", "upstream", "ce-no-target", "ce-sum"])
def test_loss_conventions_and_tied_table_proved(name, loss):
    """Every [loss] convention's equation and backward rule (and gpt2_style's tied table:
    the lookup's and the head's uses summed; the [stages] table's per-position losses, a
    softmax row's Jacobian, a query's dot-product terms) proved at every entry."""
    g = _with_loss(name, loss)
    proved = {stage.op.name for stage in g if (isinstance(stage.op, Gradient) or stage.op.name
              in {"mse", "cross_entropy", "upstream", "table_sum"} | LESSON_OPS)
              and prove_stage(g, stage)}
    assert proved & {"mse", "cross_entropy", "upstream"}
    if "[stages]" in loss:
        assert proved & LESSON_OPS == ({"position_cross_entropy"} if name else
                                       LESSON_OPS - {"position_cross_entropy"})
    if name == "gpt2_style":
        assert "table_sum" in proved
