"""Every number a worked example prints has an address: the side stages added on demand.

Each address is checked against an independent reference worked by hand (fractions,
mpmath) on a tiny example or the built-in one; Adam's parts against PyTorch's AdamW.
"""

from __future__ import annotations

import contextlib
import io
import json
import tomllib
from fractions import Fraction

import mpmath
import pytest
import sympy

from symformer import derive
from symformer.blocks.backward import stage_of
from symformer.cli import main
from symformer.example import load_example, parse_example
from symformer.example.loader import builtin_text

mpmath.mp.dps = 40

GIVEN_QKV = """
tokens = ["a", "b", "c"]
[attention]
Q = [[1, 0], [0, 1], [1, 1]]
K = [[1, 0], [0, 1], [1, -1]]
V = [[1, 2], [3, 4], [5, 6]]
"""

ROPE = """
tokens = ["a", "b", "c"]
positional_encoding = "rope"
vocab = ["a", "b", "c"]
embeddings = [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 1]]
[[layer]]
[[layer.head]]
W_Q = [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
W_K = [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
W_V = [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
"""


def run_cli(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = main(argv)
    return code, out.getvalue()


def mids(stage) -> list[list[mpmath.mpf]]:
    """The stage's entries at 40 digits, through its printed decimals (30 places)."""
    return [[mpmath.mpf(v) for v in row] for row in stage.values(decimals=30)]


def close(got, expected, tol=None) -> None:
    tol = mpmath.mpf(10) ** -28 if tol is None else tol
    assert len(got) == len(expected)
    for r, e in zip(got, expected):
        assert len(r) == len(e)
        assert all(abs(a - b) < tol for a, b in zip(r, e)), (got, expected)


@pytest.fixture(scope="module")
def qkv():
    return derive(parse_example(GIVEN_QKV, "qkv.toml"))


@pytest.fixture(scope="module")
def builtin():
    return derive(load_example())


def test_exponentials_and_their_sums_of_given_scores(qkv):
    """Scores QKᵀ/√2 by hand; each e^{s_j} and each row's Σ by mpmath."""
    Q = [[1, 0], [0, 1], [1, 1]]
    K = [[1, 0], [0, 1], [1, -1]]
    s = [[mpmath.mpf(sum(a * b for a, b in zip(q, k))) / mpmath.sqrt(2) for k in K]
         for q in Q]
    close(mids(stage_of(qkv, "weights.exp")), [[mpmath.exp(x) for x in r] for r in s])
    close(mids(stage_of(qkv, "weights.exp_sum")),
          [[mpmath.fsum(mpmath.exp(x) for x in r)] for r in s])


def test_products_and_jacobian_without_asking_in_stages(qkv):
    """q_2 = (1, 1): its products with the keys (1,0), (0,1), (1,-1), exactly."""
    got = stage_of(qkv, "raw_scores.products.row2").exact()
    assert got == sympy.Matrix([[1, 0], [0, 1], [1, -1]])
    assert stage_of(qkv, "weights.jacobian.row0").shape == (3, 3)


def test_squares_of_a_variance_and_the_weights_themselves(builtin):
    """(x_j - μ)² from the residual's own entries by mpmath; W_Q as the file gives it."""
    x = mids(builtin["layer1.add_norm1.sum"])
    mu = [mpmath.fsum(r) / len(r) for r in x]
    close(mids(stage_of(builtin, "layer1.add_norm1.variance.squares")),
          [[(v - m) ** 2 for v in r] for r, m in zip(x, mu)], tol=mpmath.mpf(10) ** -27)
    given = tomllib.loads(builtin_text())["layer"][0]["head"][0]["W_Q"]
    W = stage_of(builtin, "layer1.head1.W_Q").exact()
    assert [[Fraction(str(v)) for v in row] for row in W.tolist()] == \
        [[Fraction(str(v)) for v in row] for row in given]
    table = stage_of(builtin, "embedding_table")
    assert table.shape == (len(load_example().vocab), 4)


def test_rope_frequencies_and_angles():
    """θ_i = 10000^(-2i/4) = 1, 1/100; angles p·θ_i for p = 0, 1, 2."""
    g = derive(parse_example(ROPE, "rope.toml"))
    assert stage_of(g, "layer1.head1.Q_rot.theta").exact() == sympy.Matrix(
        [[1, sympy.Rational(1, 100)]])
    assert stage_of(g, "layer1.head1.K_rot.angles").exact() == sympy.Matrix(
        [[0, 0], [1, sympy.Rational(1, 100)], [2, sympy.Rational(2, 100)]])


def test_a_gradients_paths(builtin):
    """grad.input through head 1's Q is dL/dQ W_Qᵀ (mpmath on the exact W_Q); the paths
    add up to the gradient."""
    W = [[mpmath.mpf(Fraction(str(v)).numerator) / Fraction(str(v)).denominator
          for v in row] for row in tomllib.loads(builtin_text())["layer"][0]["head"][0]["W_Q"]]
    dQ = mids(stage_of(builtin, "grad.layer1.head1.Q"))
    expected = [[mpmath.fsum(d[c] * W[j][c] for c in range(len(d))) for j in range(len(W))]
                for d in dQ]
    close(mids(stage_of(builtin, "grad.input.via.layer1.head1.Q")), expected)
    paths = [f"grad.input.via.layer1.head{h}.{m}" for h in (1, 2) for m in "QKV"]
    parts = [mids(stage_of(builtin, p)) for p in
             [*paths, "grad.input.via.layer1.add_norm1.sum"]]
    total = [[mpmath.fsum(p[i][j] for p in parts) for j in range(4)] for i in range(4)]
    close(total, mids(builtin["grad.input"]), tol=mpmath.mpf(10) ** -26)


def test_claims_and_notes_take_the_addresses(tmp_path):
    """check judges a side stage's numbers (a mistyped weight is wrong), and a tagged
    note and fill take the same addresses; derive --list --all lists them."""
    claims = tmp_path / "claims.toml"
    claims.write_text('[[claim]]\nstage = "layer1.head1.W_Q"\nentry = [0, 0]\nvalues = 0.26\n\n'
                      '[[claim]]\nstage = "layer1.head1.weights.exp_sum"\nentry = [0, 0]\n'
                      'values = 19.4133\n')
    code, out = run_cli(["check", str(claims), "--json"])
    doc = json.loads(out)
    assert code == 1 and doc["numbers"] == 2 and not doc["ok"], out
    notes = tmp_path / "notes.md"
    notes.write_text("{{ layer1.head1.weights.exp[0, 1] }}\n")
    code, out = run_cli(["fill", str(notes), "--out", str(tmp_path / "o.md"), "--decimals", "4"])
    assert code == 0 and (tmp_path / "o.md").read_text().strip() == "5.1178"  # e^{s_01}
    code, out = run_cli(["derive", "--list", "--all"])
    assert code == 0
    for name in ("layer1.head1.weights.exp_sum", "layer1.W_1", "layer1.add_norm1.gamma",
                 "grad.input.via.layer1.head1.Q", "layer1.add_norm2.variance.squares"):
        assert f"\n{name} " in out, name


def test_a_wrong_kind_is_one_line(tmp_path):
    claims = tmp_path / "claims.toml"
    claims.write_text('[[claim]]\nstage = "layer1.head1.Q.exp"\nentry = [0, 0]\nvalues = 1\n')
    code, out = run_cli(["check", str(claims)])
    assert code == 2 and "is not a softmax stage" in out and "Traceback" not in out, out


def test_adam_parts_against_pytorch():
    """One AdamW step on W_1 given its gradient: m̂, v̂, √v̂ + ε, the update and the
    decayed weight from torch.optim.AdamW's own state and result."""
    torch = pytest.importorskip("torch")
    from symformer.blocks.train import train

    training = train(derive(load_example()), sympy.Rational(1, 20), 1, "adamw")
    g = training.graph
    G = torch.tensor([[float(v) for v in row] for row in
                      g["grad.step0.layer1.W_1"].values(decimals=30)], dtype=torch.float64)
    W0 = torch.tensor([[float(v) for v in row] for row in
                       g["step0.layer1.W_1"].values(decimals=30)], dtype=torch.float64)
    w = torch.nn.Parameter(W0.clone())
    w.grad = G
    opt = torch.optim.AdamW([w], lr=0.05, weight_decay=0.01)
    opt.step()
    state = opt.state[w]
    b1, b2 = 0.9, 0.999
    mhat, vhat = state["exp_avg"] / (1 - b1), state["exp_avg_sq"] / (1 - b2)
    expected = {"adam_mhat": mhat, "adam_vhat": vhat, "adam_denominator": vhat.sqrt() + 1e-8,
                "adamw_decayed": W0 * (1 - 0.05 * 0.01),
                "adam_update": W0 * (1 - 0.05 * 0.01) - w.detach()}
    for part, want in expected.items():
        add = f"step1.{part}.layer1.W_1"
        from symformer.blocks.side_stages import add_side_stage

        assert add_side_stage(g, add)
        got = torch.tensor([[float(v) for v in row] for row in g[add].values(decimals=20)],
                           dtype=torch.float64)
        assert torch.allclose(got, want, rtol=1e-9, atol=1e-12), part


def test_weight_addresses_are_named_as_their_gradients(builtin):
    """Every weight gradient grad.P of the example has the weight's own address P."""
    from symformer.blocks.side_stages import side_addresses

    stage_of(builtin, "grad.loss")
    addresses = set(side_addresses(builtin))
    weights = [s.name.removeprefix("grad.") for s in builtin if s.kind == "weight_gradient"]
    assert weights and all(w in addresses for w in weights), set(weights) - addresses


def test_squares_of_a_mean_square():
    """RMSNorm's x_j² (llama_style), from its input's entries by mpmath."""
    from symformer.example.loader import packaged_examples

    g = derive(load_example(packaged_examples()["llama_style"]))
    x = mids(g[g["layer1.norm1.mean_square"].inputs[0]])
    close(mids(stage_of(g, "layer1.norm1.mean_square.squares")),
          [[v ** 2 for v in r] for r in x], tol=mpmath.mpf(10) ** -27)


def test_tagged_notes_and_a_training_runs_stages(tmp_path):
    """check NOTES takes the addresses; a run's step takes a forward side stage (Σ of
    step 1's exponentials, by mpmath from step 1's own scores) and a gradient's path."""
    notes = tmp_path / "notes.tex"
    notes.write_text("The sum is 19.41. % symformer: layer1.head1.weights.exp_sum[0,0]\n"
                     "And $W_Q$ starts 0.26. % symformer: layer1.head1.W_Q[0,0]\n")
    code, out = run_cli(["check", str(notes)])
    assert code == 1 and "1 of 2 numbers correct" in out and "claimed 0.26, correct 0.25" \
        in out, out
    from symformer.blocks.train import train

    run = train(derive(load_example()), sympy.Rational(1, 20), 1, "adam")
    scores = mids(run.graph["step1.layer1.head1.scores"])
    want = mpmath.fsum(mpmath.exp(s) for s in scores[0])
    claims = tmp_path / "claims.toml"
    claims.write_text('[train]\nlr = 0.05\nsteps = 1\noptimizer = "adam"\n\n'
                      f'[[claim]]\nstage = "step1.layer1.head1.weights.exp_sum"\n'
                      f'entry = [0, 0]\nvalues = {mpmath.nstr(want, 8)}\ndecimals = 6\n\n'
                      '[[claim]]\nstage = "grad.step0.input.via.step0.layer1.head1.Q"\n'
                      'entry = [0, 0]\nvalues = 0.1\n')
    code, out = run_cli(["check", str(claims)])
    assert code == 1 and "1 of 2 numbers correct" in out and "δ^(q)_0" in out, out


def test_a_training_steps_layer_norm_has_its_output_moments():
    """A step's LayerNorm reads its trained gamma and beta from stages and is still a
    LayerNorm: its output's mean and variance (now moved by the trained gamma, beta),
    by mpmath from the step's own output rows."""
    from symformer.blocks.side_stages import add_side_stage
    from symformer.blocks.train import train

    g = train(derive(load_example()), sympy.Rational(1, 10), 1).graph
    norm = "step1.layer1.add_norm1"
    assert add_side_stage(g, f"{norm}.output_variance")  # the mean with it
    rows = mids(g[norm])
    means = [mpmath.fsum(r) / len(r) for r in rows]
    close(mids(g[f"{norm}.output_mean"]), [[m] for m in means])
    close(mids(g[f"{norm}.output_variance"]),
          [[mpmath.fsum((x - m) ** 2 for x in r) / len(r)] for r, m in zip(rows, means)])
    assert any(abs(m) > mpmath.mpf(1) / 100 for m in means)  # gamma and beta trained


def test_the_side_stages_equations_hold(qkv, builtin):
    """Each side stage's declared general equation is proved at every entry."""
    from test_equations_proved import prove_stage

    g = derive(parse_example(ROPE, "rope.toml"))
    for graph, name in ((qkv, "weights.exp"), (qkv, "weights.exp_sum"),
                        (builtin, "layer1.add_norm2.variance.squares"),
                        (g, "layer1.head1.Q_rot.theta"), (g, "layer1.head1.Q_rot.angles")):
        assert prove_stage(graph, stage_of(graph, name)) > 0, name


def test_a_mistyped_address_gets_the_close_side_stages(tmp_path):
    claims = tmp_path / "claims.toml"
    claims.write_text('[[claim]]\nstage = "layer1.head1.weights.exps"\nentry = [0, 0]\n'
                      'values = 1\n')
    code, out = run_cli(["check", str(claims)])
    assert code == 2 and "did you mean layer1.head1.weights.exp," in out \
        and "--list --all" in out, out
    notes = tmp_path / "notes.md"
    notes.write_text("{{ layer1.head1.weights.exp_summ[0, 0] }}\n")
    code, out = run_cli(["fill", str(notes), "--out", str(tmp_path / "o.md")])
    assert code == 2 and "did you mean layer1.head1.weights.exp_sum," in out, out
