"""Classification and regression heads (``[head]``) and their losses: a sigmoid with
binary cross-entropy, a softmax over C classes with cross-entropy, an identity with mse.

References, all independent of the engine:

* the whole forward pass of the small examples (one attention head, no norm, a
  residual, a head) written again with mpmath at 110 digits, and the loss by PyTorch's
  definitions (``F.binary_cross_entropy``, ``F.cross_entropy``, ``F.mse_loss``);
* hand-derived gradients: at the logit ŷ − T (sigmoid + bce) and p − onehot (softmax +
  cross-entropy), divided by the number of entries or positions for the mean;
* central finite differences of that mpmath loss in a weight entry (h = 1e-30);
* PyTorch autograd in float64 (skipped without torch);
* bad tables: one-line messages naming the file and key, exit status 2.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import mpmath
import pytest

from symformer import derive
from symformer.blocks.backward import with_gradients
from symformer.cli import main
from symformer.errors import InputError
from symformer.example.loader import load_example, parse_example

EXAMPLES = Path(__file__).resolve().parents[1] / "symformer" / "examples"
SENTIMENT = EXAMPLES / "sentiment_classifier.toml"


@pytest.fixture(autouse=True)
def _precision():
    with mpmath.workdps(110):
        yield


def mp(ball) -> mpmath.mpf:
    return mpmath.mpf(ball.mid().str(110, radius=False))


def values(g, name: str) -> list[list[mpmath.mpf]]:
    return [[mp(b) for b in row] for row in g.evaluate(400)[name]]


def number(v) -> mpmath.mpf:
    """A TOML number or fraction text as an mpmath number."""
    if isinstance(v, str) and "/" in v:
        a, b = v.split("/")
        return mpmath.mpf(a) / mpmath.mpf(b)
    return mpmath.mpf(v)


def mat(rows) -> list[list[mpmath.mpf]]:
    return [[number(v) for v in row] for row in rows]


def matmul(a, b):
    return [[mpmath.fsum(a[i][k] * b[k][j] for k in range(len(b))) for j in range(len(b[0]))]
            for i in range(len(a))]


def forward(data: dict, delta: dict | None = None):
    """The example's forward pass and loss with mpmath: embeddings, one head's attention
    (scores / sqrt(d_k), softmax), the residual, the head, the loss.  ``delta`` adds a
    number to one weight entry: {("W_C", i, j): h}."""
    delta = delta or {}

    def weight(name, rows):
        w = mat(rows)
        for (key, i, j), h in delta.items():
            if key == name:
                w[i][j] += h
        return w

    table = dict(zip(data["vocab"], weight("E", data["embeddings"])))
    x = [list(table[t]) for t in data["tokens"]]
    head = data["layer"][0]["head"][0]
    Q, K, V = (matmul(x, weight(w, head[w])) for w in ("W_Q", "W_K", "W_V"))
    d_k = len(Q[0])
    z = []
    for i, q in enumerate(Q):
        s = [mpmath.fsum(a * b for a, b in zip(q, k)) / mpmath.sqrt(d_k) for k in K]
        if data.get("causal"):
            s = s[:i + 1]
        e = [mpmath.exp(v) for v in s]
        a = [v / mpmath.fsum(e) for v in e]
        z.append([x[i][c] + mpmath.fsum(a[m] * V[m][c] for m in range(len(a)))
                  for c in range(len(V[0]))])
    spec = data["head"]
    pooling = spec.get("pooling", "first")
    if pooling == "first":
        z = [z[0]]
    elif pooling == "last":
        z = [z[-1]]
    elif pooling == "mean":
        z = [[mpmath.fsum(r[c] for r in z) / len(z) for c in range(len(z[0]))]]
    W = weight("W_C", spec["W_C"])
    b = [number(v) for v in spec.get("b_C", [0] * len(W[0]))]
    for (key, _, j), h in delta.items():
        if key == "b_C":
            b[j] += h
    logits = [[v + b[j] for j, v in enumerate(row)] for row in matmul(z, W)]
    loss = data["loss"]
    reduction = loss.get("reduction", "mean")
    if spec["output"] == "sigmoid":
        y = [[1 / (1 + mpmath.exp(-v)) for v in row] for row in logits]
        T = mat(loss["target"])
        terms = [t * mpmath.log(p) + (1 - t) * mpmath.log(1 - p)
                 for rp, rt in zip(y, T) for p, t in zip(rp, rt)]
        L = -mpmath.fsum(terms) / (len(terms) if reduction == "mean" else 1)
        return logits, y, L
    if spec["output"] == "softmax":
        probs = []
        for row in logits:
            e = [mpmath.exp(v) for v in row]
            probs.append([v / mpmath.fsum(e) for v in e])
        classes = spec["classes"]
        ids = [classes.index(t) if t else None for t in loss["targets"]]
        terms = [-mpmath.log(p[t]) for p, t in zip(probs, ids) if t is not None]
        L = mpmath.fsum(terms) / (len(terms) if reduction == "mean" else 1)
        return logits, probs, L
    T = mat(loss["target"])
    terms = [(a - t) ** 2 for ra, rt in zip(logits, T) for a, t in zip(ra, rt)]
    return logits, logits, mpmath.fsum(terms) / (len(terms) if reduction == "mean" else 1)


def central(data: dict, key: tuple) -> mpmath.mpf:
    h = mpmath.mpf(10) ** -30
    return (forward(data, {key: h})[2] - forward(data, {key: -h})[2]) / (2 * h)


def close(a, b, tol: mpmath.mpf | None = None) -> bool:
    """|a - b| within ``tol`` (default 1e-40), relative to b when |b| > 1."""
    tol = mpmath.mpf(10) ** -40 if tol is None else tol
    return abs(a - b) <= tol * max(1, abs(b))


def derived(text: str, name: str = "test.toml"):
    return with_gradients(derive(parse_example(text, name)))


# -- (a) sigmoid + binary cross-entropy ----------------------------------------------

def test_sentiment_forward_and_loss_match_mpmath():
    data = tomllib.loads(SENTIMENT.read_text())
    g = with_gradients(derive(load_example(SENTIMENT)))
    logits, y, L = forward(data)
    assert close(values(g, "head.logits")[0][0], logits[0][0])
    assert close(values(g, "head.probabilities")[0][0], y[0][0])
    assert close(values(g, "loss")[0][0], L)
    assert 0 < y[0][0] < 1 and L > 0


def test_sentiment_gradient_at_the_logit_is_yhat_minus_t():
    """Hand-derived: d/dl of -[T log s(l) + (1-T) log(1-s(l))] = s(l) - T."""
    g = with_gradients(derive(load_example(SENTIMENT)))
    y = values(g, "head.probabilities")[0][0]
    assert close(values(g, "grad.head.logits")[0][0], y - 1)
    assert close(values(g, "grad.head.b_C")[0][0], y - 1)
    # dL/dy = -T/y at a hard label 1
    assert close(values(g, "grad.head.probabilities")[0][0], -1 / y)


@pytest.mark.parametrize("key", [("W_C", 0, 0), ("W_C", 1, 0), ("b_C", 0, 0),
                                 ("W_Q", 1, 0), ("W_V", 0, 1), ("E", 1, 0)])
def test_sentiment_weight_gradients_match_finite_differences(key):
    data = tomllib.loads(SENTIMENT.read_text())
    g = with_gradients(derive(load_example(SENTIMENT)))
    name, i, j = key
    stage = {"W_C": "grad.head.W_C", "b_C": "grad.head.b_C", "W_Q": "grad.layer1.head1.W_Q",
             "W_V": "grad.layer1.head1.W_V", "E": "grad.embedding_table"}[name]
    found = values(g, stage)
    if name == "E":  # the gradient has the rows of the tokens used, in the table's order
        i = list(g[stage].rows).index(data["vocab"][i])
    assert close(found[i][j], central(data, key), mpmath.mpf(10) ** -25)


BCE_EACH = """
title = "token-level sigmoid"
tokens = ["a", "b", "c"]
vocab = ["a", "b", "c"]
embeddings = [[1, 0], [0, 1], [1, 1]]
positional_encoding = "none"
norm = "none"
[[layer]]
[[layer.head]]
W_Q = [[1, 0], [0, 1]]
W_K = [[0, 1], [1, 0]]
W_V = [[1, 1], [0, 1]]
[head]
pooling = "none"
output = "sigmoid"
W_C = [[1, -1], [-2, 1]]
b_C = ["1/2", 0]
[loss]
kind = "bce"
reduction = "REDUCTION"
target = [[1, 0], [0, "1/4"], [1, 1]]
"""


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_bce_per_position_soft_labels_and_reductions(reduction):
    """Every position classified, a soft label 1/4: the loss is PyTorch's, the gradient
    at the logits (ŷ − T)/c with c = 6 entries (mean) or 1 (sum)."""
    text = BCE_EACH.replace("REDUCTION", reduction)
    data = tomllib.loads(text)
    g = derived(text)
    _, y, L = forward(data)
    assert close(values(g, "loss")[0][0], L)
    c = 6 if reduction == "mean" else 1
    T = mat(data["loss"]["target"])
    got = values(g, "grad.head.logits")
    for i in range(3):
        for j in range(2):
            assert close(got[i][j], (y[i][j] - T[i][j]) / c)
    assert close(values(g, "grad.head.W_C")[1][0], central(data, ("W_C", 1, 0)),
                 mpmath.mpf(10) ** -25)


def test_bce_against_torch_autograd():
    torch = pytest.importorskip("torch")
    text = BCE_EACH.replace("REDUCTION", "mean")
    data = tomllib.loads(text)
    g = derived(text)
    f = torch.float64

    def t(rows):
        return torch.tensor([[float(number(v)) for v in r] for r in rows], dtype=f,
                            requires_grad=True)

    E = t(data["embeddings"])
    head = data["layer"][0]["head"][0]
    WQ, WK, WV = t(head["W_Q"]), t(head["W_K"]), t(head["W_V"])
    WC = t(data["head"]["W_C"])
    bC = torch.tensor([0.5, 0.0], dtype=f, requires_grad=True)
    Q, K, V = E @ WQ, E @ WK, E @ WV
    z = E + torch.softmax(Q @ K.T / 2 ** 0.5, dim=-1) @ V
    y = torch.sigmoid(z @ WC + bC)
    T = torch.tensor([[1, 0], [0, 0.25], [1, 1]], dtype=f)
    L = torch.nn.functional.binary_cross_entropy(y, T)
    L.backward()
    assert abs(float(values(g, "loss")[0][0]) - L.item()) < 1e-12
    for stage, tensor in (("grad.head.W_C", WC), ("grad.layer1.head1.W_K", WK),
                          ("grad.layer1.head1.W_Q", WQ)):
        got = values(g, stage)
        for i, row in enumerate(tensor.grad.tolist()):
            for j, v in enumerate(row):
                assert abs(float(got[i][j]) - v) < 1e-12, (stage, i, j)
    assert [float(v) for v in values(g, "grad.head.b_C")[0]] == pytest.approx(
        bC.grad.tolist(), abs=1e-12)


def test_sigmoid_equations_and_rules_are_the_textbooks():
    from symformer.equations.stage import stage_equation

    g = with_gradients(derive(load_example(SENTIMENT)))
    (line,) = stage_equation(g["head.probabilities"]).lines()
    assert "= 1 / (1 + exp(-" in line.plain, line.plain
    (rule,) = stage_equation(g["grad.head.logits"]).lines()
    assert "* (1 - " in rule.plain, rule.plain
    (loss,) = stage_equation(g["loss"]).lines()
    assert "log(1 - " in loss.plain and "/ (n * d)" in loss.plain


def test_sigmoid_symbol_is_not_sigma():
    """σ is LayerNorm's standard deviation: the sigmoid's output is ŷ, its function
    \\operatorname{sigmoid}."""
    g = derive(load_example(SENTIMENT))
    op = g["head.probabilities"].op
    assert op.symbol.latex == r"\hat{y}" and op.symbol.text == "ŷ"
    assert "sigma" not in op.function_name


def test_check_judges_head_claims(tmp_path, capsys):
    g = with_gradients(derive(load_example(SENTIMENT)))
    y = float(values(g, "head.probabilities")[0][0])
    claims = tmp_path / "c.toml"
    claims.write_text(
        f'[[claim]]\nstage = "head.probabilities"\ndecimals = 3\nvalues = [[{y:.3f}]]\n\n'
        f'[[claim]]\nstage = "grad.head.logits"\ndecimals = 3\nvalues = [[{y - 1:.3f}]]\n\n'
        f'[[claim]]\nstage = "loss"\ndecimals = 3\nvalues = [[0.5]]\n')
    status = main(["check", str(claims), "--example", str(SENTIMENT)])
    out = capsys.readouterr().out
    assert status == 1
    assert out.count("wrong") >= 1 and "loss" in out
    lines = [ln for ln in out.splitlines() if "head.probabilities" in ln or
             "grad.head.logits" in ln]
    assert lines and not any("wrong" in ln for ln in lines), out


@pytest.mark.parametrize("table, message", [
    ('[head]\noutput = "softmax"\nW_C = [[1], [0]]\n[loss]\nkind = "bce"\ntarget = [[1]]',
     "output = \"sigmoid\""),
    ('[head]\noutput = "sigmoid"\nW_C = [[1], [0]]\n[loss]\nkind = "bce"\ntarget = [[2]]',
     "[0, 1]"),
    ('[head]\noutput = "sigmoid"\nW_C = [[1], [0]]\n[loss]\nkind = "bce"\n'
     'target = [[1], [0]]', "target"),
    ('[head]\noutput = "sigmoid"\nW_C = [[1], [0], [1]]\n', "W_C"),
    ('[head]\noutput = "sigmoid"\nW_C = [[1], [0]]\nclasses = 2\n', "classes = 2"),
    ('[head]\nW_C = [[1], [0]]\n', "missing key 'output'"),
    ('[head]\noutput = "sigmoid"\npooling = "cls"\nW_C = [[1], [0]]\n', "pooling"),
    ('[loss]\nkind = "bce"\ntarget = [[1]]', "[head]"),
])
def test_bad_head_tables_are_one_line_errors(table, message, tmp_path, capsys):
    base = SENTIMENT.read_text().split("\n[head]")[0]
    with pytest.raises(InputError) as err:
        parse_example(base + "\n" + table + "\n", "t.toml")
    assert message in str(err.value) and "\n" not in str(err.value)
    path = tmp_path / "t.toml"
    path.write_text(base + "\n" + table + "\n")
    assert main(["derive", str(path)]) == 2
    assert message in capsys.readouterr().err


# -- (b) a head d -> C: classes (softmax + cross-entropy) and regression (mse) ---------

TOPIC = EXAMPLES / "topic_classifier.toml"


def test_topic_forward_loss_and_gradient_at_the_logits():
    """Mean pooling, three classes: the loss is PyTorch's cross-entropy of the mpmath
    forward pass, the gradient at the logits the hand-derived p - onehot(t)."""
    data = tomllib.loads(TOPIC.read_text())
    g = with_gradients(derive(load_example(TOPIC)))
    logits, p, L = forward(data)
    assert g["head.pooled"].shape == (1, 2) and g["head.probabilities"].cols == (
        "sport", "politics", "science")
    for j in range(3):
        assert close(values(g, "head.logits")[0][j], logits[0][j])
        assert close(values(g, "head.probabilities")[0][j], p[0][j])
        assert close(values(g, "grad.head.logits")[0][j], p[0][j] - (j == 0))
    assert close(values(g, "loss")[0][0], L)


@pytest.mark.parametrize("key", [("W_C", 0, 1), ("W_C", 1, 2), ("b_C", 0, 2),
                                 ("W_K", 0, 1), ("E", 2, 1)])
def test_topic_weight_gradients_match_finite_differences(key):
    data = tomllib.loads(TOPIC.read_text())
    g = with_gradients(derive(load_example(TOPIC)))
    name, i, j = key
    stage = {"W_C": "grad.head.W_C", "b_C": "grad.head.b_C", "W_K": "grad.layer1.head1.W_K",
             "E": "grad.embedding_table"}[name]
    if name == "E":
        i_row = list(g[stage].rows).index(data["vocab"][i])
    else:
        i_row = i
    assert close(values(g, stage)[i_row][j], central(data, key), mpmath.mpf(10) ** -25)


def test_topic_against_torch_autograd():
    torch = pytest.importorskip("torch")
    data = tomllib.loads(TOPIC.read_text())
    g = with_gradients(derive(load_example(TOPIC)))
    f = torch.float64

    def t(rows):
        return torch.tensor([[float(number(v)) for v in r] for r in rows], dtype=f,
                            requires_grad=True)

    table = t(data["embeddings"])
    ids = torch.tensor([data["vocab"].index(w) for w in data["tokens"]])
    head = data["layer"][0]["head"][0]
    WQ, WK, WV, WC = (t(m) for m in (head["W_Q"], head["W_K"], head["W_V"],
                                     data["head"]["W_C"]))
    bC = torch.tensor([0.0, 0.0, 0.5], dtype=f, requires_grad=True)
    X = table[ids]
    z = X + torch.softmax((X @ WQ) @ (X @ WK).T / 2 ** 0.5, dim=-1) @ (X @ WV)
    logits = z.mean(dim=0, keepdim=True) @ WC + bC
    L = torch.nn.functional.cross_entropy(logits, torch.tensor([0]))
    L.backward()
    assert abs(float(values(g, "loss")[0][0]) - L.item()) < 1e-12
    for stage, grad in (("grad.head.W_C", WC.grad), ("grad.layer1.head1.W_V", WV.grad),
                        ("grad.head.b_C", bC.grad[None])):
        got = values(g, stage)
        for i, row in enumerate(grad.tolist()):
            for j, v in enumerate(row):
                assert abs(float(got[i][j]) - v) < 1e-12, (stage, i, j)
    rows = list(g["grad.embedding_table"].rows)
    got = values(g, "grad.embedding_table")
    for word, row in zip(data["vocab"], table.grad.tolist()):
        if word in rows:
            assert [float(v) for v in got[rows.index(word)]] == pytest.approx(row, abs=1e-12)


TOKENS = TOPIC.read_text().split("\n[head]")[0] + """
[head]
pooling = "none"
output = "softmax"
classes = ["sport", "politics", "science"]
W_C = [[1, -1, 0], [0, 1, -1]]

[loss]
kind = "cross_entropy"
reduction = "REDUCTION"
targets = ["sport", "", "science", "politics"]
"""


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_token_classifier_every_position(reduction):
    """pooling = "none": a class per position, "" = no target there; the mean divides by
    the 3 positions with a target, the gradient at the logits is (p - onehot)/c and 0 in
    the row without one."""
    text = TOKENS.replace("REDUCTION", reduction)
    data = tomllib.loads(text)
    g = derived(text)
    assert "head.pooled" not in g and g["head.logits"].shape == (4, 3)
    _, p, L = forward(data)
    assert close(values(g, "loss")[0][0], L)
    c = 3 if reduction == "mean" else 1
    got = values(g, "grad.head.logits")
    for i, target in enumerate([0, None, 2, 1]):
        for j in range(3):
            want = 0 if target is None else (p[i][j] - (j == target)) / c
            assert close(got[i][j], want)
    assert close(values(g, "grad.head.W_C")[1][1], central(data, ("W_C", 1, 1)),
                 mpmath.mpf(10) ** -25)


REGRESSION = TOPIC.read_text().split("\n[head]")[0].replace(
    'norm = "none"', 'norm = "none"\ncausal = true') + """
[head]
output = "identity"      # a regression: two outputs; causal, so the last row by default
W_C = [[1, 0], ["1/2", -1]]
b_C = [0, 1]

[loss]
kind = "mse"
target = [[1, "-1/2"]]
"""


def test_regression_head_reads_the_last_row_and_its_mse():
    data = tomllib.loads(REGRESSION)
    data["head"]["pooling"] = "last"  # the default under the causal mask, for forward()
    g = derived(REGRESSION)
    assert g["head.pooled"].rows == ("time",)  # the last token's row
    out, _, L = forward(data)
    y = values(g, "head.output")[0]
    assert close(y[0], out[0][0]) and close(y[1], out[0][1])
    assert close(values(g, "loss")[0][0], L)
    T = [1, mpmath.mpf(-1) / 2]
    for j in range(2):  # hand-derived: 2 (y - T) / (1 x 2)
        assert close(values(g, "grad.head.output")[0][j], (y[j] - T[j]))
    assert close(values(g, "grad.head.W_C")[1][0], central(data, ("W_C", 1, 0)),
                 mpmath.mpf(10) ** -25)
    # only the last row reaches the head: the others' gradient at the output is exactly 0
    grad = g.evaluate(400)["grad.output"]
    assert all(b.is_exact() and b == 0 for row in grad[:-1] for b in row)


def test_first_pooling_reads_the_first_row():
    text = TOPIC.read_text().replace('pooling = "mean"', 'pooling = "first"')
    data = tomllib.loads(text)
    g = derived(text)
    assert g["head.pooled"].rows == ("goal",)
    assert close(values(g, "loss")[0][0], forward(data)[2])


def test_check_judges_class_claims_and_names_the_class(tmp_path, capsys):
    g = with_gradients(derive(load_example(TOPIC)))
    p = [float(v) for v in values(g, "head.probabilities")[0]]
    claims = tmp_path / "c.toml"
    claims.write_text(f'[[claim]]\nstage = "head.probabilities"\ndecimals = 3\nvalues = '
                      f'[[{p[0]:.3f}, {p[1]:.3f}, 0.5]]\n')
    assert main(["check", str(claims), "--example", str(TOPIC)]) == 1
    out = capsys.readouterr().out
    assert "2 of 3" in out and "column 'science'" in out, out


def test_a_training_step_updates_the_head(tmp_path, capsys):
    """One SGD step: step1.head.W_C = W_C - lr dL/dW_C, the gradient by finite
    differences of the mpmath loss."""
    data = tomllib.loads(TOPIC.read_text())
    W = mat(data["head"]["W_C"])
    want = W[0][1] - central(data, ("W_C", 0, 1)) / 2
    claims = tmp_path / "c.toml"
    claims.write_text('[train]\nlr = "1/2"\nsteps = 1\n\n[[claim]]\n'
                      'stage = "step1.head.W_C"\nentry = [0, 1]\ndecimals = 6\n'
                      f'values = {mpmath.nstr(want, 12)}\n')
    status = main(["check", str(claims), "--example", str(TOPIC)])
    out = capsys.readouterr().out
    assert status == 0 and "all right" in out, out


@pytest.mark.parametrize("table, message", [
    ('[head]\noutput = "sigmoid"\nW_C = [[1], [0]]\n[loss]\nkind = "cross_entropy"\n'
     'targets = ["x"]', "output = \"softmax\""),
    ('[head]\noutput = "softmax"\nclasses = ["a", "b"]\nW_C = [[1, 0], [0, 1]]\n[loss]\n'
     'kind = "cross_entropy"\ntargets = ["c"]', "'c'"),
    ('[head]\noutput = "softmax"\nclasses = ["a", "a"]\nW_C = [[1, 0], [0, 1]]\n', "twice"),
    ('[head]\noutput = "identity"\nW_C = [[1, 0], [0, 1]]\n[loss]\nkind = "mse"\n'
     'target = [[1, 0, 0]]', "target"),
    ('[head]\noutput = "softmax"\nW_C = [[1, 0], [0, 1]]\n[lm_head]\n'
     'W_vocab = [[1, 0, 0, 0, 0], [0, 1, 0, 0, 0]]', "[lm_head]"),
])
def test_bad_class_heads_are_one_line_errors(table, message):
    base = TOPIC.read_text().split("\n[head]")[0]
    with pytest.raises(InputError) as err:
        parse_example(base + "\n" + table + "\n", "t.toml")
    assert message in str(err.value) and "\n" not in str(err.value)


def test_notes_word_the_bce_and_write_the_sigmoid_as_the_textbook(tmp_path):
    """The Backward part says what the loss is; the sigmoid's worked line is
    1/(1 + e^(−ℓ)) and its rule ∂L/∂ŷ · ŷ (1 − ŷ), with the numbers substituted."""
    assert main(["export", str(SENTIMENT), "--format", "markdown", "--out",
                 str(tmp_path)]) == 0
    text = (tmp_path / "main.md").read_text()
    assert "(binary cross-entropy), where $T$ is the target" in text
    assert r"\hat{y} &= \frac{1}{1 + e^{-\ell}}" in text
    assert r"\frac{1}{1 + e^{-3.006}} \approx 0.953" in text
    assert (r"\frac{\partial L}{\partial \hat{y}} \hat{y} \left(1 - \hat{y}\right)"
            in text)
    assert main(["export", str(TOPIC), "--format", "markdown", "--out",
                 str(tmp_path / "topic")]) == 0
    assert "of the target class." in (tmp_path / "topic" / "main.md").read_text()


def test_the_summary_names_the_head_and_counts_its_weights():
    from symformer.example.summary import summary_rows, weight_counts

    example = load_example(TOPIC)
    assert dict(summary_rows(example))["head"] == "softmax over 3 outputs (pooling: mean)"
    assert weight_counts(example)["classifier head"] == 2 * 3 + 3  # W_C and b_C


def test_per_position_bce_is_each_rows_sum():
    """[stages] per_position_loss = true: L_i = -sum_j [T log y + (1 - T) log(1 - y)] per
    row (PyTorch's reduction="none" summed over the row), and L = (1/6) sum_i L_i."""
    text = BCE_EACH.replace("REDUCTION", "mean") + "\n[stages]\nper_position_loss = true\n"
    data = tomllib.loads(text)
    g = derived(text)
    _, y, L = forward(data)
    T = mat(data["loss"]["target"])
    got = values(g, "loss.per_position")
    for i in range(3):
        want = -mpmath.fsum(t * mpmath.log(p) + (1 - t) * mpmath.log(1 - p)
                            for p, t in zip(y[i], T[i]))
        assert close(got[i][0], want)
    assert close(mpmath.fsum(r[0] for r in got) / 6, L)


def test_train_write_keeps_the_head_and_its_trained_weights(tmp_path):
    """``train --write``: W_C and b_C are written back into [head] (rounded: the
    softmax makes them irrational), the head's other keys kept."""
    out = tmp_path / "trained.toml"
    assert main(["train", str(TOPIC), "--lr", "1/2", "--steps", "1", "--write", str(out),
                 "--quiet"]) == 0
    written = load_example(out)
    g = with_gradients(derive(load_example(TOPIC)))
    grad = values(g, "grad.head.b_C")[0]
    assert written.head.classes == ("sport", "politics", "science")
    assert written.head.pooling == "mean" and written.head.output == "softmax"
    for j, start in enumerate((0, 0, mpmath.mpf(1) / 2)):  # b_C - lr * grad, 3 decimals
        assert abs(mpmath.mpf(float(written.head.b_C[0, j])) - (start - grad[j] / 2)) <= 5e-4


@pytest.mark.parametrize("pooling, label", [
    ("last", "of the pooled row ('time': position 3)"),
    ("mean", "of the pooled row ('mean': the mean over positions)"),
    ("first", "of the pooled row ('goal': position 0)"),
])
def test_check_labels_the_pooled_row_by_what_it_pooled(pooling, label, tmp_path, capsys):
    """A pooled head's one row is not position 0: the last token's row is position n - 1,
    the mean is no position (the labels of issue 31's item 3)."""
    example = tmp_path / "t.toml"
    example.write_text(TOPIC.read_text().replace('pooling = "mean"', f'pooling = "{pooling}"'))
    claims = tmp_path / "c.toml"
    claims.write_text('[[claim]]\nstage = "grad.head.logits"\ndecimals = 2\n'
                      'values = [[9, 9, 9]]\n')
    assert main(["check", str(claims), "--example", str(example)]) == 1
    out = capsys.readouterr().out
    assert label in out, out
    assert "(position 0), column" not in out or pooling == "first"


@pytest.mark.parametrize("name, stages", [
    ("sentiment_classifier", ("head.pooled", "head.logits", "head.probabilities")),
    ("topic_classifier", ("head.pooled", "head.logits", "head.probabilities")),
])
def test_the_pytorch_module_computes_the_head(tmp_path, name, stages):
    """export --format torch keeps the head (it used to stop at the encoder's output):
    PyTorch's float64 forward of the module agrees with the exact stages to 1e-12."""
    torch = pytest.importorskip("torch")  # noqa: F841 (the module needs it)
    import importlib.util

    assert main(["export", load_example(name).source, "--format", "torch", "--out",
                str(tmp_path)]) == 0
    spec = importlib.util.spec_from_file_location("exported_model", tmp_path / "model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    run = module.Model()()
    g = derive(load_example(name))
    for stage in stages:
        exact = values(g, stage)
        got = run[stage].tolist()
        assert len(got) == len(exact) and len(got[0]) == len(exact[0]), stage
        for row, want in zip(got, exact):
            for x, y in zip(row, want):
                assert abs(x - float(y)) < 1e-12, (stage, x, y)


def test_the_pytorch_module_computes_a_regression_head(tmp_path):
    torch = pytest.importorskip("torch")  # noqa: F841
    from symformer.frameworks.torch_out import model_class

    g = derived(REGRESSION)
    run = model_class(g.example)()()
    for x, y in zip(run["head.output"].tolist()[0], values(g, "head.output")[0]):
        assert abs(x - float(y)) < 1e-12


def test_the_trace_follows_the_token_into_the_head(capsys):
    """trace ends with the head's pooled row, logits and probability (it stopped at the
    encoder's output); the last line's probability is the sigmoid of the logit it
    prints, by hand."""
    import re

    assert main(["trace", load_example("sentiment_classifier").source, "--token", "0"]) == 0
    out = capsys.readouterr().out
    titles = re.findall(r"^\[\d+/\d+\] (.*)$", out, re.M)
    assert [t.split(" > ")[-1].split(" (")[0] for t in titles[-3:]] == [
        "Pooled output", "Logits", "Predicted probability"]
    logit = float(re.search(r"exp\(-([0-9.]+)\)\) ≈", out)[1])
    shown = float(re.search(r"≈ ([0-9.]+)\s*$", out.strip())[1])
    assert abs(shown - 1 / (1 + mpmath.exp(-logit))) < 5e-4
