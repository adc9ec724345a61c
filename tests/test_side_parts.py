"""The terms, shifts and factors worked examples print (symformer.blocks.side_parts),
each against an independent reference: closed forms worked by hand, mpmath on the
stages the term is computed from (read to 30 decimals), float64 NumPy for Adam."""

from __future__ import annotations

import tomllib
from fractions import Fraction

import mpmath
import numpy as np
import pytest
import sympy
from test_side_stages import ROPE, close, mids, run_cli

from symformer import derive
from symformer.blocks.backward import stage_of
from symformer.example import load_example, parse_example
from symformer.example.loader import builtin_text

mpmath.mp.dps = 40
TOL = mpmath.mpf(10) ** -27


@pytest.fixture(scope="module")
def builtin():
    return derive(load_example())


def exact_rows(rows) -> list[list[mpmath.mpf]]:
    """A TOML matrix of the example file, read exactly from its text."""
    return [[mpmath.mpf(Fraction(str(v)).numerator) / Fraction(str(v)).denominator
             for v in row] for row in rows]


def test_terms_of_a_projection_and_of_a_weighted_sum(builtin):
    """Q's row 1: x_c · W_Q[c, j] with W_Q from the file; its columns add up to q_1.
    The head output's row 2: α_{2,j} · v_j, its columns adding up to o_2."""
    W = exact_rows(tomllib.loads(builtin_text())["layer"][0]["head"][0]["W_Q"])
    x = mids(builtin["input"])[1]
    terms = mids(stage_of(builtin, "layer1.head1.Q.terms.row1"))
    close(terms, [[x[c] * W[c][j] for j in range(2)] for c in range(4)], TOL)
    q = mids(builtin["layer1.head1.Q"])[1]
    close([[mpmath.fsum(r[j] for r in terms) for j in range(2)]], [q], TOL)
    alpha, v = mids(builtin["layer1.head1.weights"])[2], mids(builtin["layer1.head1.V"])
    terms = mids(stage_of(builtin, "layer1.head1.output.terms.row2"))
    close(terms, [[alpha[j] * v[j][c] for c in range(2)] for j in range(4)], TOL)
    close([[mpmath.fsum(r[c] for r in terms) for c in range(2)]],
          [mids(builtin["layer1.head1.output"])[2]], TOL)
    # a training step's projection reads its weight from a stage: the same terms
    from symformer.blocks.train import train

    run = train(derive(load_example()), sympy.Rational(1, 10), 1).graph
    W1 = mids(run["step1.layer1.head1.W_Q"])
    x = mids(run["step1.input"])[0]
    close(mids(stage_of(run, "step1.layer1.head1.Q.terms.row0")),
          [[x[c] * W1[c][j] for j in range(2)] for c in range(4)], TOL)


def test_the_max_subtracted_softmax(builtin):
    """s − max s, e^{s − max s} and their sums by mpmath from the scores; each row's
    e^{s − max s} / Σ is the softmax again, and its largest entry is exactly 1."""
    s = mids(builtin["layer1.head2.scores"])
    shifted = [[v - max(r) for v in r] for r in s]
    close(mids(stage_of(builtin, "layer1.head2.weights.shifted")), shifted, TOL)
    e = [[mpmath.exp(v) for v in r] for r in shifted]
    close(mids(stage_of(builtin, "layer1.head2.weights.shifted_exp")), e, TOL)
    close(mids(stage_of(builtin, "layer1.head2.weights.shifted_exp_sum")),
          [[mpmath.fsum(r)] for r in e], TOL)
    close(mids(builtin["layer1.head2.weights"]),
          [[v / mpmath.fsum(r) for v in r] for r in e], TOL)
    assert all("1.000" in r for r in builtin["layer1.head2.weights.shifted_exp"].values(
        decimals=3))


def test_log_probabilities_and_one_minus_p(builtin):
    alpha = mids(builtin["layer1.head1.weights"])
    close(mids(stage_of(builtin, "layer1.head1.weights.log")),
          [[mpmath.log(a) for a in r] for r in alpha], TOL)
    close(mids(stage_of(builtin, "layer1.head1.weights.complement")),
          [[1 - a for a in r] for r in alpha], TOL)


def test_layer_norms_centred_values_and_variance_plus_eps(builtin):
    """x − μ and the biased σ² + ε (ε = 1e-6 from the file) by mpmath from the sum."""
    x = mids(builtin["layer1.add_norm1.sum"])
    mu = [mpmath.fsum(r) / len(r) for r in x]
    close(mids(stage_of(builtin, "layer1.add_norm1.centred")),
          [[v - m for v in r] for r, m in zip(x, mu)], TOL)
    eps = mpmath.mpf(1) / 10 ** 6
    close(mids(stage_of(builtin, "layer1.add_norm1.variance_eps")),
          [[mpmath.fsum((v - m) ** 2 for v in r) / len(r) + eps] for r, m in zip(x, mu)], TOL)


def test_the_sums_a_mean_and_a_variance_divide(builtin):
    """Σ_j x_j and Σ_j (x_j − μ)² by mpmath from the residual sum's rows."""
    x = mids(builtin["layer1.add_norm2.sum"])
    mu = [mpmath.fsum(r) / len(r) for r in x]
    close(mids(stage_of(builtin, "layer1.add_norm2.mean.total")), [[mpmath.fsum(r)] for r in x],
          TOL)
    close(mids(stage_of(builtin, "layer1.add_norm2.variance.total")),
          [[mpmath.fsum((v - m) ** 2 for v in r)] for r, m in zip(x, mu)], TOL)


def test_an_rms_norms_mean_square_plus_eps():
    from symformer.example.loader import packaged_examples

    text = packaged_examples()["llama_style"].read_text()
    eps = Fraction(str(tomllib.loads(text).get("eps", "1e-6")))
    g = derive(load_example(packaged_examples()["llama_style"]))
    x = mids(g[g["layer1.norm1"].inputs[0]])
    close(mids(stage_of(g, "layer1.norm1.mean_square_eps")),
          [[mpmath.fsum(v ** 2 for v in r) / len(r) + mpmath.mpf(eps.numerator) / eps.denominator]
           for r in x], TOL)


def test_the_sinusoids_divisors_and_angles(builtin):
    """d = 4: the divisors 10000^0 = 1 and 10000^(2/4) = 100, exactly; the angles
    pos / divisor; and sin, cos of them are the table's columns (mpmath)."""
    assert stage_of(builtin, "positional_encoding.divisors").exact() == sympy.Matrix([[1, 100]])
    angles = stage_of(builtin, "positional_encoding.angles").exact()
    assert angles == sympy.Matrix([[p, sympy.Rational(p, 100)] for p in range(4)])
    pe = mids(builtin["positional_encoding"])
    close(pe, [[f(mpmath.mpf(p) / d) for d in (1, 100) for f in (mpmath.sin, mpmath.cos)]
               for p in range(4)], TOL)


def test_ropes_cos_and_sin():
    """θ = (1, 1/100) for d = 4: cos and sin of p·θ_i by mpmath."""
    g = derive(parse_example(ROPE, "rope.toml"))
    for name, f in (("cos", mpmath.cos), ("sin", mpmath.sin)):
        close(mids(stage_of(g, f"layer1.head1.Q_rot.{name}")),
              [[f(mpmath.mpf(p) * t) for t in (1, mpmath.mpf(1) / 100)] for p in range(3)], TOL)


def test_one_over_root_dk(builtin):
    assert stage_of(builtin, "layer1.head1.scores.inv_scale").exact() == sympy.Matrix(
        [[1 / sympy.sqrt(2)]])
    g = derive(parse_example("tokens = [\"a\", \"b\"]\nscale = 4\n[attention]\n"
                             "Q = [[1, 0], [0, 1]]\nK = [[1, 0], [0, 1]]\nV = [[1, 2], [3, 4]]\n",
                             "scaled.toml"))
    assert stage_of(g, "scores.inv_scale").exact() == sympy.Matrix([[sympy.Rational(1, 4)]])


def test_the_softmax_backwards_sum(builtin):
    """Σ_j α_j g_j by mpmath from α and g = ∂L/∂α; with it, the scores' gradient is
    α_j (g_j − Σ) (the softmax backward rule, worked by hand)."""
    alpha = mids(builtin["layer1.head1.weights"])
    grad = mids(stage_of(builtin, "grad.layer1.head1.weights"))
    dot = [mpmath.fsum(a * b for a, b in zip(ra, rg)) for ra, rg in zip(alpha, grad)]
    close(mids(stage_of(builtin, "grad.layer1.head1.weights.dot")), [[v] for v in dot], TOL)
    close(mids(builtin["grad.layer1.head1.scores"]),
          [[a * (b - d) for a, b in zip(ra, rg)] for ra, rg, d in zip(alpha, grad, dot)], TOL)


def test_sgd_takes_lr_times_the_gradient():
    from symformer.blocks.train import train

    g = train(derive(load_example()), sympy.Rational(1, 10), 1).graph
    grad = mids(g["grad.step0.layer1.W_1"])
    update = mids(stage_of(g, "step1.sgd_update.layer1.W_1"))
    close(update, [[v / 10 for v in r] for r in grad], TOL)
    before, after = mids(g["step0.layer1.W_1"]), mids(g["step1.layer1.W_1"])
    close(update, [[b - a for b, a in zip(rb, ra)] for rb, ra in zip(before, after)], TOL)


def test_adams_partial_products_and_bias_corrections():
    """Two Adam steps on W_1: β₁ m_1, (1 − β₁) g_2, β₂ v_1, (1 − β₂) g_2² in float64
    NumPy from the two gradients; 1 − β^t exactly at t = 2 (β₁ = 0.9, β₂ = 0.999)."""
    from symformer.blocks.train import train

    g = train(derive(load_example()), sympy.Rational(1, 20), 2, "adam").graph

    def floats(name):
        return np.array([[float(v) for v in row] for row in stage_of(g, name).values(decimals=20)])

    g1, g2 = floats("grad.step0.layer1.W_1"), floats("grad.step1.layer1.W_1")
    m1, v1 = 0.1 * g1, 0.001 * g1 ** 2
    expected = {"adam_m_kept": 0.9 * m1, "adam_m_added": 0.1 * g2,
                "adam_v_kept": 0.999 * v1, "adam_v_added": 0.001 * g2 ** 2}
    for part, want in expected.items():
        assert np.allclose(floats(f"step2.{part}.layer1.W_1"), want, rtol=1e-12, atol=1e-15), part
    assert np.array_equal(floats("step1.adam_m_kept.layer1.W_1"), np.zeros_like(g1))
    assert stage_of(g, "step2.adam_correction1").exact() == sympy.Matrix(
        [[sympy.Rational(19, 100)]])
    assert stage_of(g, "step2.adam_correction2").exact() == sympy.Matrix(
        [[sympy.Rational(1999, 1000000)]])
    m2 = floats("step2.adam_m.layer1.W_1")
    assert np.allclose(m2, 0.9 * m1 + 0.1 * g2, rtol=1e-12, atol=1e-15)


def test_a_wrong_kind_and_listing(tmp_path):
    """A term of a stage of the wrong kind is one line; derive --list --all lists them."""
    claims = tmp_path / "claims.toml"
    claims.write_text('[[claim]]\nstage = "layer1.head1.scores.terms.row0"\nentry = [0, 0]\n'
                      'values = 1\n')
    code, out = run_cli(["check", str(claims)])
    assert code == 2 and "is not a projection" in out and "Traceback" not in out, out
    code, out = run_cli(["derive", "--list", "--all"])
    assert code == 0
    for name in ("layer1.head1.Q.terms.row3", "layer1.head1.output.terms.row0",
                 "layer1.head1.weights.shifted_exp", "layer1.add_norm2.centred",
                 "positional_encoding.divisors", "layer1.head2.scores.inv_scale",
                 "grad.layer1.head2.weights.dot", "layer1.head1.weights.log"):
        assert f"\n{name} " in out, name


def test_the_side_parts_equations_hold(builtin):
    """Each new side stage's declared general equation is proved at every entry."""
    from test_equations_proved import prove_stage

    rope = derive(parse_example(ROPE, "rope.toml"))
    for graph, name in ((builtin, "layer1.head1.Q.terms.row1"),
                        (builtin, "layer1.head1.output.terms.row0"),
                        (builtin, "layer1.head1.weights.shifted"),
                        (builtin, "layer1.head1.weights.log"),
                        (builtin, "layer1.head1.weights.complement"),
                        (builtin, "layer1.add_norm1.centred"),
                        (builtin, "layer1.add_norm1.variance_eps"),
                        (builtin, "grad.layer1.head1.weights.dot"),
                        (rope, "layer1.head1.Q_rot.cos")):
        assert prove_stage(graph, stage_of(graph, name)) > 0, name


def test_a_glob_matches_side_stages_when_it_matches_no_stage():
    """derive --stage 'layer1.head1.Q_rot.*' prints RoPE's θ, angles, cos and sin; a
    glob matching stages prints only those (as before); one matching nothing is the
    unknown-stage message."""
    from symformer.example.loader import packaged_examples

    llama = str(packaged_examples()["llama_style"])
    code, out = run_cli(["derive", llama, "--stage", "layer1.head1.Q_rot.*"])
    shown = [line.split()[0] for line in out.splitlines() if line.startswith("layer1.")]
    assert code == 0 and shown == [f"layer1.head1.Q_rot.{k}" for k in
                                   ("theta", "angles", "cos", "sin")], out
    code, out = run_cli(["derive", "--stage", "layer1.head1.*"])
    assert code == 0 and ".terms." not in out and ".shifted" not in out
    code, out = run_cli(["derive", "--stage", "layer9.*"])
    assert code == 2 and "unknown stage" in out, out
