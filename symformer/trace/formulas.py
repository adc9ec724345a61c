"""The general formula of each kind of step, as text and as a SymPy equation.

Each stage kind has one letter (the name of the token's vector at that step) and
one function giving its formula over named vectors; the table :data:`LETTERS` and
the registry :data:`FORMULAS` are the only places to extend for a new kind.
"""

from __future__ import annotations

from collections.abc import Callable

import sympy
from sympy import Symbol

from symformer.engine.graph import Derivation, Stage
from symformer.ops import GELU, Identity, Normalize, RowMean, RowVariance
from symformer.trace.steps import General

#: The name of the token's vector at each kind of stage.
LETTERS = {
    "embeddings": "e", "positional_encoding": "p", "input": "x", "Q": "q", "K": "k",
    "V": "v", "raw_scores": "u", "scores": "s", "weights": "alpha", "head_output": "o",
    "concat": "c", "attention_output": "z", "residual": "r", "mean": "mu",
    "variance": "sigma^2", "layer_norm": "y", "ffn_hidden": "h", "ffn_activation": "a",
    "ffn_output": "f", "output": "y",
}


def _eq(lhs: sympy.Expr, rhs: sympy.Expr) -> sympy.Eq:
    return sympy.Eq(lhs, rhs, evaluate=False)


def _add(*terms: sympy.Expr) -> sympy.Expr:
    """A sum kept in the order written (printed with ``order="none"``)."""
    return sympy.Add(*terms, evaluate=False)


def _minus(a: sympy.Expr, b: sympy.Expr) -> sympy.Expr:
    return _add(a, sympy.Mul(-1, b, evaluate=False))


def vec(name: str) -> Symbol:
    """A vector or matrix symbol (non-commutative, so ``x W`` keeps its order)."""
    return Symbol(name, commutative=False)


def letter(stage: Stage) -> str:
    """The letter naming the token's vector at ``stage``."""
    return kind_letter(stage.kind)


def kind_letter(kind: str) -> str:
    """The letter naming the token's vector at a stage of this kind."""
    return LETTERS.get(kind, "v")


def _input_letter(g: Derivation, stage: Stage, k: int) -> str:
    return letter(g[stage.inputs[k]])


def _embedding(g: Derivation, s: Stage) -> tuple[General, ...]:
    return (General("e = E[id(token)]  (the token's row of the embedding table)",
                    _eq(vec("e"), vec("E_id"))),)


def _positional(g: Derivation, s: Stage) -> tuple[General, ...]:
    pos, i, d = sympy.symbols("pos i d")
    with sympy.evaluate(False):
        angle = pos / sympy.Pow(10000, 2 * i / d)
    return (General("p[2i] = sin(pos / 10000^(2i/d))", _eq(Symbol("p_2i"), sympy.sin(angle))),
            General("p[2i+1] = cos(pos / 10000^(2i/d))",
                    _eq(Symbol("p_2i+1"), sympy.cos(angle))))


def _sum_of_inputs(g: Derivation, s: Stage) -> tuple[General, ...]:
    a, b = (_input_letter(g, s, k) for k in range(2))
    out = letter(s)
    return (General(f"{out} = {a} + {b}", _eq(vec(out), _add(vec(a), vec(b)))),)


def _projection(g: Derivation, s: Stage) -> tuple[General, ...]:
    out, src = letter(s), _input_letter(g, s, 0)
    weight = f"W_{s.kind}"
    return (General(f"{out} = {src} {weight}", _eq(vec(out), vec(src) * vec(weight))),)


def _raw_scores(g: Derivation, s: Stage) -> tuple[General, ...]:
    return (General("u_j = q . k_j  (the query against key j)",
                    _eq(Symbol("u_j"), vec("q") * vec("k_j^T"))),)


def _scores(g: Derivation, s: Stage) -> tuple[General, ...]:
    text = "s_j = u_j / sqrt(d_k)"
    if g.causal:
        text += "  (-inf for j after the token: causal mask)"
    return (General(text, _eq(Symbol("s_j"), Symbol("u_j") / sympy.sqrt(Symbol("d_k")))),)


def _weights(g: Derivation, s: Stage) -> tuple[General, ...]:
    j, n = Symbol("l"), Symbol("n")
    return (General("alpha_j = exp(s_j) / sum_l exp(s_l)",
                    _eq(Symbol("alpha_j"), sympy.exp(Symbol("s_j"))
                       / sympy.Sum(sympy.exp(Symbol("s_l")), (j, 0, n - 1)))),)


def _head_output(g: Derivation, s: Stage) -> tuple[General, ...]:
    j, n = Symbol("j"), Symbol("n")
    return (General("o = sum_j alpha_j v_j",
                    _eq(vec("o"), sympy.Sum(Symbol("alpha_j") * vec("v_j"), (j, 0, n - 1)))),)


def _concat(g: Derivation, s: Stage) -> tuple[General, ...]:
    parts = [f"o^({k + 1})" for k in range(len(s.inputs))]
    return (General(f"c = [{', '.join(parts)}]  (the heads side by side)",
                    _eq(vec("c"), sympy.Function("concat")(*map(vec, parts)))),)


def _attention_output(g: Derivation, s: Stage) -> tuple[General, ...]:
    if isinstance(s.op, Identity):
        return (General("z = c  (no W_O: the concatenation is the output)",
                        _eq(vec("z"), vec("c"))),)
    return (General("z = c W_O", _eq(vec("z"), vec("c") * vec("W_O"))),)


def _layer_norm(g: Derivation, s: Stage) -> tuple[General, ...]:
    op: Normalize = s.op
    var_op = g[s.inputs[2]].op
    if not isinstance(g[s.inputs[1]].op, RowMean):
        return _whole_matrix_norm(s)
    r, mu, var = vec("r"), Symbol("mu"), Symbol("sigma^2")
    d, j, eps = Symbol("d"), Symbol("j"), Symbol("epsilon")
    divisor = "(d - 1)" if isinstance(var_op, RowVariance) and var_op.unbiased else "d"
    mean = General("mu = (1/d) sum_j r_j",
                   _eq(mu, sympy.Sum(Symbol("r_j"), (j, 1, d)) / d))
    variance = General(f"sigma^2 = (1/{divisor}) sum_j (r_j - mu)^2",
                       _eq(var, sympy.Sum(_minus(Symbol("r_j"), mu) ** 2, (j, 1, d))
                          / (d - 1 if divisor != "d" else d)))
    gamma, beta = vec("gamma"), vec("beta")
    if op.unbiased:
        norm = General("y = gamma * (r - mu) / (sqrt(sigma^2) + eps) + beta",
                       _eq(vec("y"), _add(gamma * _minus(r, mu) / _add(sympy.sqrt(var), eps),
                                          beta)))
    else:
        norm = General("y = gamma * (r - mu) / sqrt(sigma^2 + eps) + beta",
                       _eq(vec("y"), _add(gamma * _minus(r, mu) / sympy.sqrt(_add(var, eps)),
                                          beta)))
    return (mean, variance, norm)


def _whole_matrix_norm(s: Stage) -> tuple[General, ...]:
    """Mean and variance over every entry of the matrix (all tokens at once)."""
    n, d, i, j = sympy.symbols("n d i j")
    mu, var, r = Symbol("mu"), Symbol("sigma^2"), Symbol("r_ij")
    whole = sympy.Sum(sympy.Sum(r, (j, 1, d)), (i, 1, n))
    return (General("mu = (1/(n d)) sum_i sum_j r_ij  (the WHOLE matrix, every token)",
                    _eq(mu, whole / (n * d))),
            General("sigma^2 = (1/(n d)) sum_i sum_j (r_ij - mu)^2  (the whole matrix)",
                    _eq(var, sympy.Sum(sympy.Sum(_minus(r, mu) ** 2, (j, 1, d)), (i, 1, n))
                        / (n * d))),
            General("y = (r - mu) / sqrt(sigma^2 + eps)",
                    _eq(vec("y"), _minus(vec("r"), mu) / sympy.sqrt(_add(var, Symbol("epsilon"))))))


def _affine(weight: str, bias: str) -> Callable[[Derivation, Stage], tuple[General, ...]]:
    def formula(g: Derivation, s: Stage) -> tuple[General, ...]:
        out, src = letter(s), _input_letter(g, s, 0)
        return (General(f"{out} = {src} {weight} + {bias}",
                        _eq(vec(out), _add(vec(src) * vec(weight), vec(bias)))),)
    return formula


def _activation(g: Derivation, s: Stage) -> tuple[General, ...]:
    h = Symbol("h_j")
    if isinstance(s.op, GELU):
        return (General("a_j = h_j (1 + erf(h_j / sqrt 2)) / 2  (GELU)",
                        _eq(Symbol("a_j"), h * (1 + sympy.erf(h / sympy.sqrt(2))) / 2)),)
    return (General("a_j = max(0, h_j)  (ReLU: negative entries are clipped to 0)",
                    _eq(Symbol("a_j"), sympy.Max(0, h))),)


def _output(g: Derivation, s: Stage) -> tuple[General, ...]:
    return (General("the block's output: the last LayerNorm (or residual sum)",
                    _eq(vec("y_out"), vec(_input_letter(g, s, 0)))),)


#: Formula of each stage kind; kinds missing here get no general formula.
FORMULAS: dict[str, Callable[[Derivation, Stage], tuple[General, ...]]] = {
    "embeddings": _embedding, "positional_encoding": _positional, "input": _sum_of_inputs,
    "Q": _projection, "K": _projection, "V": _projection, "raw_scores": _raw_scores,
    "scores": _scores, "weights": _weights, "head_output": _head_output, "concat": _concat,
    "attention_output": _attention_output, "residual": _sum_of_inputs,
    "layer_norm": _layer_norm, "ffn_hidden": _affine("W_1", "b_1"),
    "ffn_activation": _activation, "ffn_output": _affine("W_2", "b_2"), "output": _output,
}


def general(g: Derivation, stage: Stage) -> tuple[General, ...]:
    """The general formula(s) of ``stage``."""
    make = FORMULAS.get(stage.kind)
    return make(g, stage) if make else ()
