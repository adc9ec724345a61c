"""A new operation is one module: ReLU², DyT and a score function, registered at run time.

ReLU² (an activation) is the whole of it (``docs/architecture.md``, "Adding an
operation"): its exact formula, balls, NumPy reference, equation, backward rule (the
step spelled ``(2 * h if h > 0 else 0)`` so the proof decides it by the certified sign
of h), and the declarations the rest of the package reads (the example file's
``activation = "test_relu2"``, the exercise sheet's definition, the PyTorch form).  No
other source file changes, and every command works on an example that uses it: derive,
backward, export (LaTeX, JSON; the equations proved entry by entry), trace, slides,
exercise, export --format torch and crosscheck (NumPy, and PyTorch where installed).

DyT (Dynamic Tanh, Zhu et al. 2025: y = gamma tanh(alpha x) + beta, alpha a learned
scalar) is a normalisation in one class the same way: it declares its example-file key
(``layer_norm = "test_dyt"``), its stages (``add_norm``), its label (the block diagram's
"Add & DyT", the matrix form's DyT), its PyTorch form and its backward rule, and derive,
backward, train (alpha trains), export (LaTeX, JSON; its equations proved), trace,
slides, the diagram, check (its exported equation read back), export --format torch
(equal to a hand-written torch DyT) and crosscheck (NumPy and PyTorch) work on it.

A new attention score function (negative squared distances, u_ij = -|q_i - k_j|^2) is
one class too: its example-file key (``attention_scores = "test_distance"``), equation,
backward rules and NumPy forms; derive, backward, trace, export (LaTeX, JSON), check
(its exported equation read back) and crosscheck work on it, and the PyTorch module,
which computes q k^T only, refuses it in one line.

The classes are defined inside fixtures and removed from the registry afterwards, so
the other test files see the shipped operations only; their names start with ``test_``
so that they never clash with a shipped one.  Every value is checked against an
independent reference: max(0, h)^2, tanh(x / 2) and their gradients in float64 from the
engine's own inputs, and the notes' text scanned for the declared pieces.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np
import pytest
from test_equations_proved import prove_stage

from symformer import derive, parse_example
from symformer.blocks.backward import with_gradients
from symformer.cli import main
from symformer.registry import OPERATIONS, activations

#: The shipped course example with its activation replaced, and a loss to differentiate.
TEXT = (resources.files("symformer.examples") / "course_module.toml").read_text()
TEXT = TEXT.replace('eps = "1e-5"\n', 'eps = "1e-5"\nactivation = "test_relu2"\n', 1) + (
    '\n[loss]\nkind = "mse"\ntarget = [[0.5, 0, 0, 0], [0, 0.5, 0, 0], [0, 0, 0.5, 0], '
    '[0, 0, 0, 0.5]]\n')


def _define() -> type:
    """ReLU², h -> max(0, h)^2: everything about it, in one place (as ops/<name>.py)."""
    from symformer.engine.arbmath import ArbMatrix, relu_ball
    from symformer.equations.ir import IndexEquation
    from symformer.lazy import sympy
    from symformer.notation_types import Notation
    from symformer.ops.calculus import Arithmetic
    from symformer.ops.elementwise import Smooth

    def relu2(h):
        """max(0, h)^2, element-wise."""
        return np.maximum(0, h) ** 2

    def relu2_backward(h, g):
        """dL/dh = dL/da 2 max(0, h)."""
        return g * 2 * np.maximum(0, h)

    @dataclass(frozen=True)
    class ReLU2(Smooth):
        """``max(0, h)^2`` element-wise (Primer's squared ReLU): 0 wherever h <= 0."""

        notation: Notation | None = None

        name = "test_relu2"
        reference_function = relu2
        default_notation = Notation("a", "a", "FFN activation (squared ReLU)")
        clips = True  # 0 where h <= 0, and no gradient back there
        activation_key = "test_relu2"
        function_name = "ReLU^2"
        definition = ("Squared ReLU squares positive numbers and replaces negative ones "
                      "by 0: ", r"\operatorname{ReLU^2}(x) = \max(0, x)^2", ".")
        torch_function = "torch.relu(x) ** 2"
        hf_names = ("test_relu2",)

        def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
            return IndexEquation(("a[i, j] = max(0, h[i, j]) ** 2",), {"a": "out", "h": "in0"})

        def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                              ) -> IndexEquation:
            return IndexEquation(("dh[i, j] = da[i, j] * (2 * h[i, j] if h[i, j] > 0 else 0)",),
                                 {"dh": "result", "da": "grad", "h": "in0"})

        def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
            return args[0].applyfunc(lambda h: sympy.Max(0, h) ** 2)

        def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
            return [[relu_ball(h) ** 2 for h in row] for row in args[0]]

        def resolve(self, entry: sympy.Expr, sign) -> sympy.Expr:
            maxes = entry.atoms(sympy.Max) if isinstance(entry, sympy.Basic) else set()
            if not maxes:
                return entry
            s = sign()
            return entry.xreplace({m: (m.args[1] if m.args[0] == 0 else m.args[0])
                                   if s > 0 else sympy.S.Zero for m in maxes})

        def slope(self, h: Any, num: Arithmetic) -> Any:
            """relu2'(h) = 2 h for h > 0, else 0."""
            return 2 * h * num.step(h)

        def backward_function(self, wrt: int | str):
            return relu2_backward

    return ReLU2


@pytest.fixture(scope="module")
def relu2():
    """The operation, registered for this module's tests only."""
    cls = _define()
    try:
        yield cls
    finally:
        OPERATIONS.pop(cls.name, None)


@pytest.fixture(scope="module")
def example(relu2):
    return parse_example(TEXT, source="course_module+relu2")


@pytest.fixture(scope="module")
def graph(example):
    return with_gradients(derive(example))


@pytest.fixture()
def example_file(relu2, tmp_path):
    path = tmp_path / "test_relu2.toml"
    path.write_text(TEXT)
    return str(path)


def _floats(g, name: str) -> np.ndarray:
    """A stage's certified balls (128 bits) as float64: their midpoints."""
    return np.array([[float(v.mid()) for v in row] for row in g.evaluate(128)[name]])


def test_registered_from_its_own_module(relu2):
    assert activations()["test_relu2"] is relu2
    assert list(activations())[:4] == ["relu", "gelu", "gelu_tanh", "silu"]


def test_a_hugging_face_config_names_it_by_its_declared_hf_names(relu2):
    from symformer.registry import framework_names

    known = framework_names("activation", "hf")  # hidden_act -> the example's key
    assert known["test_relu2"] == "test_relu2"
    assert known["gelu_new"] == known["gelu_pytorch_tanh"] == "gelu_tanh"
    assert known["swish"] == known["silu"] == "silu" and known["relu"] == "relu"


def test_derive_and_backward_values(graph):
    """a = max(0, h)^2 and dL/dh = 2 max(0, h) dL/da, against float64 of the engine's h."""
    g = graph
    assert g["layer1.ffn.activation"].op.name == "test_relu2"
    h = _floats(g, "layer1.ffn.hidden")
    assert (h > 0).any() and (h < 0).any()  # both branches are exercised
    a = _floats(g, "layer1.ffn.activation")
    assert np.allclose(a, np.maximum(0, h) ** 2, rtol=1e-14, atol=1e-15)
    da = _floats(g, "grad.layer1.ffn.activation")
    dh = _floats(g, "grad.layer1.ffn.hidden")
    assert np.allclose(dh, 2 * np.maximum(0, h) * da, rtol=1e-12, atol=1e-15)
    assert (dh[h < 0] == 0).all()


def test_equations_proved(graph):
    """The declared forward and backward equations equal the exact rules at every entry."""
    assert prove_stage(graph, graph["layer1.ffn.activation"]) == 4 * 8
    assert prove_stage(graph, graph["grad.layer1.ffn.hidden"]) == 4 * 8


def test_derive_and_backward_commands(example_file, capsys):
    assert main(["derive", example_file, "--stage", "layer1.ffn.activation"]) == 0
    assert main(["backward", example_file, "--stage", "grad.layer1.ffn.hidden"]) == 0
    out = capsys.readouterr().out
    assert "layer1.ffn.activation" in out and "grad.layer1.ffn.hidden" in out


def test_export_latex_and_json(example_file, tmp_path):
    out = tmp_path / "tex"
    assert main(["export", example_file, "--out", str(out), "--quiet"]) == 0
    text = "\n".join(p.read_text() for p in out.rglob("*.tex"))
    assert r"\max" in text and "squared ReLU" in text
    assert r"\operatorname{ReLU^2}" in text  # the matrix form names the function
    js = tmp_path / "json"
    assert main(["export", example_file, "--format", "json", "--out", str(js),
                 "--quiet"]) == 0
    data = json.loads(next(js.rglob("*.json")).read_text())
    assert "layer1.ffn.activation" in json.dumps(data)


def test_trace(example_file, capsys):
    assert main(["trace", example_file, "--token", "export"]) == 0
    out = capsys.readouterr().out
    assert "squared ReLU" in out and "clipped to 0" in out
    # the clipped entries' sentence names this activation, not "ReLU"
    assert "so ReLU^2 gives 0)" in out and "so ReLU gives" not in out


def test_inactive_sentences_name_the_activation(graph):
    """A sentence about clipped units names the clipping step by its declaration."""
    from symformer.analysis.inactive import activation_name

    assert activation_name(graph["layer1.ffn.activation"]) == "ReLU^2"


def test_slides(example_file, tmp_path):
    assert main(["slides", example_file, "--out", str(tmp_path), "--quiet",
                 "--stage", "layer1.ffn.*"]) == 0
    text = "\n".join(p.read_text() for p in tmp_path.rglob("*.tex"))
    assert "squared ReLU" in text


def test_exercise_defines_the_function(example_file, tmp_path):
    assert main(["exercise", example_file, "--variants", "1", "--seed", "1", "--out",
                 str(tmp_path), "--ask", "layer1.ffn.activation", "--quiet"]) == 0
    text = "\n".join(p.read_text() for p in tmp_path.rglob("*.tex"))
    assert r"\operatorname{ReLU^2}(x) = \max(0, x)^2" in text


def test_crosscheck_numpy(example_file, capsys):
    assert main(["crosscheck", example_file]) == 0
    assert "layer1.ffn.activation" in capsys.readouterr().out


def test_torch_module_and_crosscheck(example_file, tmp_path, capsys):
    out = tmp_path / "torch"
    assert main(["export", example_file, "--format", "torch", "--out", str(out),
                 "--quiet"]) == 0
    code = "\n".join(p.read_text() for p in out.rglob("*.py"))
    assert 'if name == "test_relu2":\n            return torch.relu(x) ** 2' in code
    pytest.importorskip("torch")
    assert main(["crosscheck", example_file, "--torch"]) == 0
    assert "layer1.ffn.activation" in capsys.readouterr().out


def test_an_activation_without_a_pytorch_form_is_refused(relu2, example, monkeypatch):
    """Never silently another function: no torch form, no module."""
    from symformer.errors import NotSupportedError
    from symformer.frameworks.torch_out import to_torch

    monkeypatch.setattr(relu2, "torch_function", None)
    with pytest.raises(NotSupportedError, match="test_relu2"):
        to_torch(example)


def test_nothing_outside_ops_asks_for_a_concrete_operation_class():
    """Every list and dispatch asks the operation (its declarations), never
    ``isinstance(op, SomeOperation)``: read from the source, each name an ``isinstance``
    tests resolved through the module's own ``from symformer.ops... import``."""
    import ast
    import importlib
    import inspect
    from pathlib import Path

    import symformer
    from symformer.ops.base import Operation

    root = Path(symformer.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.is_relative_to(root / "ops"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        classes: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "symformer.ops"):
                module = importlib.import_module(node.module)
                classes |= {a.asname or a.name for a in node.names
                            if inspect.isclass(getattr(module, a.name, None))
                            and issubclass(getattr(module, a.name), Operation)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance":
                tested = node.args[1] if len(node.args) == 2 else None
                names = tested.elts if isinstance(tested, ast.Tuple) else [tested]
                if any(getattr(n, "id", None) in classes for n in names):
                    found.append(f"{path.relative_to(root)}:{node.lineno}")
    assert not found, found


# -- a new normalisation: DyT, Dynamic Tanh (Zhu, Chen, He, LeCun, Liu 2025) ----------------

#: The course example with DyT in place of its LayerNorms, and the same loss.
DYT_TEXT = TEXT.replace('activation = "test_relu2"\n', 'layer_norm = "test_dyt"\n', 1)


def _define_dyt() -> type:
    """DyT, y = gamma tanh(alpha x) + beta with alpha a learned scalar: everything about
    it, in one place (as ops/<name>.py would hold it)."""
    from dataclasses import replace

    from flint import arb

    from symformer.engine.arbmath import ArbMatrix, constant_vector, rational_ball
    from symformer.equations.ir import IndexEquation
    from symformer.lazy import sympy
    from symformer.notation_types import Notation
    from symformer.ops.base import Operation
    from symformer.ops.calculus import EXACT, Arithmetic, Rows

    def dyt(x, alpha, gamma, beta):
        """gamma tanh(alpha x) + beta, entry by entry (alpha a number)."""
        return gamma * np.tanh(alpha * x) + beta

    def dyt_backward_x(x, alpha, gamma, beta, g):
        """dL/dx = dL/dy gamma alpha (1 - tanh(alpha x)^2)."""
        return g * gamma * alpha * (1 - np.tanh(alpha * x) ** 2)

    def dyt_backward_alpha(x, alpha, gamma, beta, g):
        """dL/dalpha = sum_ij dL/dy_ij gamma_j x_ij (1 - tanh(alpha x_ij)^2), as 1 x 1."""
        return np.sum(g * gamma * x * (1 - np.tanh(alpha * x) ** 2)).reshape(1, 1)

    def dyt_backward_gamma(x, alpha, gamma, beta, g):
        """dL/dgamma_j = sum_i dL/dy_ij tanh(alpha x_ij)."""
        return np.sum(g * np.tanh(alpha * x), axis=0, keepdims=True)

    def dyt_backward_beta(x, alpha, gamma, beta, g):
        """dL/dbeta_j = sum_i dL/dy_ij."""
        return np.sum(g, axis=0, keepdims=True)

    rules = {0: dyt_backward_x, "alpha": dyt_backward_alpha, "gamma": dyt_backward_gamma,
             "beta": dyt_backward_beta}
    #: Inputs 1, 2, 3 of the form reading its weights from stages (a training step's).
    staged_inputs = {1: "alpha", 2: "gamma", 3: "beta"}

    @dataclass(frozen=True)
    class DyT(Operation):
        """``gamma_j tanh(alpha x_ij) + beta_j``: no mean, no variance; alpha starts at
        the paper's 1/2.  ``from_stages``: alpha, gamma, beta are inputs 1, 2, 3."""

        alpha: Any
        gamma: Any
        beta: Any
        notation: Notation | None = None
        from_stages: bool = False

        name = "test_dyt"
        reference_function = dyt
        default_notation = Notation("y", "y", "DyT (dynamic tanh)")
        norm_keys = ("test_dyt",)
        norm_label = "DyT"
        norm_remark = "each entry squashed by tanh of alpha times it, scaled, shifted"
        torch_norms = {"test_dyt": "return gamma * torch.tanh(0.5 * x) + beta\n"}

        @classmethod
        def add_norm(cls, g, name, x, key, eps, gamma, beta, layer):
            return g.add(name, "norm", cls(sympy.Rational(1, 2), gamma, beta), (x,),
                         g[x].rows, g[x].cols, layer=layer)

        def _weights(self, args, num: Arithmetic):
            """(alpha, gamma row, beta row) in the arithmetic ``num``."""
            if self.from_stages:
                return args[1][0][0], list(args[2][0]), list(args[3][0])
            return (num.const(self.alpha), [num.const(v) for v in self.gamma],
                    [num.const(v) for v in self.beta])

        def equation(self, shapes=()):
            if self.from_stages:
                return None
            return IndexEquation(("y[i, j] = gamma[j] * tanh(alpha * x[i, j]) + beta[j]",),
                                 {"y": "out", "x": "in0", "alpha": "param:alpha",
                                  "gamma": "param:gamma", "beta": "param:beta"})

        def backward_equation(self, wrt, shapes=()):
            if self.from_stages:
                return None
            arrays = {"dy": "grad", "x": "in0", "alpha": "param:alpha",
                      "gamma": "param:gamma"}
            sizes = {"n": ("x", 0), "d": ("x", 1)}
            line = {
                0: "dx[i, j] = dy[i, j] * gamma[j] * alpha * (1 - tanh(alpha * x[i, j]) ** 2)",
                "alpha": "dx = sum(dy[i, j] * gamma[j] * x[i, j] * (1 - tanh(alpha * x[i, j])"
                         " ** 2) for i in range(n) for j in range(d))",
                "gamma": "dx[j] = sum(dy[i, j] * tanh(alpha * x[i, j]) for i in range(n))",
                "beta": "dx[j] = sum(dy[i, j] for i in range(n))"}[wrt]
            return IndexEquation((line,), {"dx": "result", **arrays}, sizes=sizes)

        def sympy(self, args):
            X = args[0]
            alpha, gamma, beta = self._weights(
                [a.tolist() for a in args], EXACT)
            return sympy.Matrix(X.rows, X.cols, lambda i, j: gamma[j] * sympy.tanh(
                alpha * X[i, j]) + beta[j])

        def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
            if self.from_stages:
                (alpha,), gamma, beta = args[1][0], args[2][0], args[3][0]
            else:
                alpha = rational_ball(self.alpha)
                gamma, beta = constant_vector(self.gamma), constant_vector(self.beta)
            return [[c * arb.tanh(alpha * x) + b for x, c, b in zip(row, gamma, beta)]
                    for row in args[0]]

        def arguments(self, args, dtype):
            if self.from_stages:
                x, alpha, gamma, beta = (np.asarray(a, dtype=dtype) for a in args)
                return x, alpha[0, 0], gamma, beta
            return (args[0], dtype(float(self.alpha)), _floats_of(self.gamma, dtype),
                    _floats_of(self.beta, dtype))

        def parameters(self):
            """alpha (1 x 1), gamma and beta; none when they are stages."""
            if self.from_stages:
                return {}
            return {"alpha": sympy.Matrix([[self.alpha]]), "gamma": self.gamma,
                    "beta": self.beta}

        def parameter_notation(self, name: str) -> Notation:
            if name == "alpha":
                return Notation(r"\alpha", "α", "the scale inside tanh")
            return super().parameter_notation(name)

        def staged(self):
            return None if self.from_stages else replace(self, from_stages=True)

        def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt, num: Arithmetic
                     ) -> Rows:
            """dL/dx_ij = g_ij gamma_j alpha sech^2(alpha x_ij); dL/dalpha =
            sum_ij g_ij gamma_j x_ij sech^2(alpha x_ij); dL/dgamma_j = sum_i g_ij
            tanh(alpha x_ij); dL/dbeta_j = sum_i g_ij (sech^2 = 1 - tanh^2)."""
            wrt = staged_inputs.get(wrt, wrt) if self.from_stages else wrt
            alpha, gamma, _ = self._weights(args, num)
            X = args[0]

            def sech2(x):
                t = num.tanh(alpha * x)
                return 1 - t * t

            if wrt == 0:
                return [[d * c * alpha * sech2(x) for x, c, d in zip(row, gamma, ds)]
                        for row, ds in zip(X, grad)]
            if wrt == "alpha":
                return [[num.total(d * c * x * sech2(x) for row, ds in zip(X, grad)
                                   for x, c, d in zip(row, gamma, ds))]]
            if wrt == "gamma":
                return [[num.total(d * num.tanh(alpha * x) for x, d in zip(xs, ds))
                         for xs, ds in zip(zip(*X), zip(*grad))]]
            return [[num.total(column) for column in zip(*grad)]]

        def backward_function(self, wrt):
            return rules[staged_inputs.get(wrt, wrt) if self.from_stages else wrt]

        def backward_arguments(self, wrt, args, out, grad, dtype):
            x, alpha, gamma, beta = self.arguments([a.astype(dtype) for a in args], dtype)
            return x, alpha, gamma, beta, grad.astype(dtype)

    return DyT


def _floats_of(m, dtype) -> np.ndarray:
    return np.array([[float(v) for v in m]], dtype=dtype)


@pytest.fixture(scope="module")
def dyt():
    """The normalisation, registered for this module's tests only."""
    cls = _define_dyt()
    try:
        yield cls
    finally:
        OPERATIONS.pop(cls.name, None)


@pytest.fixture(scope="module")
def dyt_graph(dyt):
    return with_gradients(derive(parse_example(DYT_TEXT, source="course_module+dyt")))


@pytest.fixture()
def dyt_file(dyt, tmp_path):
    path = tmp_path / "test_dyt.toml"
    path.write_text(DYT_TEXT)
    return str(path)


def test_dyt_values_and_gradients(dyt_graph):
    """y = tanh(x / 2) (gamma = 1, beta = 0) and its gradients, against float64 of the
    engine's own input x and dL/dy."""
    g = dyt_graph
    assert g["layer1.add_norm1"].op.name == "test_dyt"
    assert {"layer1.add_norm1.mean", "layer1.add_norm1.variance"}.isdisjoint(s.name for s in g)
    x = _floats(g, "layer1.add_norm1.sum")
    y = _floats(g, "layer1.add_norm1")
    assert np.allclose(y, np.tanh(x / 2), rtol=1e-14, atol=1e-15)
    dy = _floats(g, "grad.layer1.add_norm1")
    dalpha = _floats(g, "grad.layer1.add_norm1.alpha")
    assert dalpha.shape == (1, 1)
    assert np.allclose(dalpha, np.sum(dy * x * (1 - np.tanh(x / 2) ** 2)), rtol=1e-12)
    assert np.allclose(_floats(g, "grad.layer1.add_norm1.gamma"),
                       np.sum(dy * np.tanh(x / 2), axis=0), rtol=1e-12, atol=1e-15)


def test_dyt_equations_proved(dyt_graph):
    g = dyt_graph
    assert prove_stage(g, g["layer1.add_norm1"]) == 4 * 4
    assert prove_stage(g, g["grad.layer1.add_norm1.alpha"]) == 1
    assert prove_stage(g, g["grad.layer1.add_norm1.sum"]) == 4 * 4


def test_dyt_commands(dyt_file, tmp_path, capsys):
    """derive, backward, trace, crosscheck: each names the step by its declarations."""
    assert main(["derive", dyt_file, "--stage", "layer1.add_norm1"]) == 0
    assert main(["backward", dyt_file, "--stage", "grad.layer1.add_norm1.alpha"]) == 0
    assert main(["trace", dyt_file, "--token", "export"]) == 0
    assert main(["crosscheck", dyt_file]) == 0
    out = capsys.readouterr().out
    assert "grad.layer1.add_norm1.alpha" in out and "DyT (dynamic tanh)" in out


def test_dyt_alpha_trains(dyt_graph):
    """One SGD step moves alpha by -lr dL/dalpha (float64 of the engine's gradient)."""
    from symformer.blocks.train import train
    from symformer.lazy import sympy

    run = train(dyt_graph, sympy.Rational(1, 10), 1)
    names = [w.name for w in run.weights]
    assert "layer1.add_norm1.alpha" in names, names
    after = _floats(run.graph, "step1.layer1.add_norm1.alpha")[0, 0]
    dalpha = _floats(dyt_graph, "grad.layer1.add_norm1.alpha")[0, 0]
    assert after != 0.5 and abs(after - (0.5 - 0.1 * dalpha)) < 1e-14


def test_dyt_export_slides_diagram_and_check(dyt_file, tmp_path, capsys):
    """The notes' matrix form and the block diagram name DyT (never LayerNorm); the
    JSON has its equation; the slides show the step; check reads the exported
    equation back and finds it holds."""
    out = tmp_path / "tex"
    assert main(["export", dyt_file, "--out", str(out), "--quiet", "--figures"]) == 0
    text = "\n".join(p.read_text() for p in out.rglob("*.tex"))
    assert r"\operatorname{DyT}" in text and r"\tanh" in text
    assert "Add \\& DyT" in text and "LayerNorm" not in text
    js = tmp_path / "json"
    assert main(["export", dyt_file, "--format", "json", "--out", str(js), "--quiet"]) == 0
    assert r"\tanh" in "\n".join(p.read_text() for p in js.rglob("*.json"))
    slides = tmp_path / "slides"
    assert main(["slides", dyt_file, "--out", str(slides), "--quiet",
                 "--stage", "layer1.add_norm1*"]) == 0
    assert "DyT" in "\n".join(p.read_text() for p in slides.rglob("*.tex"))
    # its exported equation, read back by check (the gradient rules' \tanh^{2} is not
    # read yet by the equation reader: checked here is the forward equation)
    (line,) = {t.strip() for t in text.splitlines() if t.strip().startswith(
        r"y_{i,j} = \gamma_{j} \tanh")}
    claims = tmp_path / "claims.toml"
    claims.write_text(f"[[equation]]\nstage = 'layer1.add_norm1'\nlatex = '{line}'\n")
    assert main(["check", str(claims), dyt_file]) == 0
    assert "holds" in capsys.readouterr().out


def test_dyt_torch_module_equals_a_hand_written_dyt(dyt, dyt_file, tmp_path, capsys):
    torch = pytest.importorskip("torch")
    from symformer.frameworks.torch_out import model_class

    example = parse_example(DYT_TEXT, source="course_module+dyt")
    stages = model_class(example)()()
    for k in (1, 2):
        x = stages[f"layer1.add_norm{k}.sum"]
        gamma = torch.ones(4, dtype=torch.float64)
        beta = torch.zeros(4, dtype=torch.float64)
        assert torch.equal(stages[f"layer1.add_norm{k}"], gamma * torch.tanh(0.5 * x) + beta)
    assert main(["export", dyt_file, "--format", "torch", "--out", str(tmp_path / "pt"),
                 "--quiet"]) == 0
    assert main(["crosscheck", dyt_file, "--torch"]) == 0
    assert "layer1.add_norm2" in capsys.readouterr().out


# -- a new attention score function: negative squared distances ---------------------------

#: The course example with every head's raw scores u_ij = -|q_i - k_j|^2, and the loss.
DISTANCE_TEXT = TEXT.replace('activation = "test_relu2"\n',
                             'attention_scores = "test_distance"\n', 1)


def _define_distance() -> type:
    """Negative squared distance scores, u_ij = -sum_c (q_ic - k_jc)^2 (closer keys score
    higher): everything about it, in one place (as ops/<name>.py would hold it)."""
    from symformer.equations.ir import IndexEquation
    from symformer.lazy import sympy
    from symformer.notation_types import Notation
    from symformer.ops.base import Operation
    from symformer.ops.calculus import Arithmetic, Rows

    def distance_scores(Q, K):
        """-|q_i - k_j|^2 for every query i and key j: (n, d) and (m, d) -> (n, m)."""
        return -((Q[:, None, :] - K[None, :, :]) ** 2).sum(-1)

    def distance_backward_Q(Q, K, G):
        """dL/dq_i = -2 sum_j G_ij (q_i - k_j)."""
        return -2 * (G.sum(1)[:, None] * Q - G @ K)

    def distance_backward_K(Q, K, G):
        """dL/dk_j = 2 sum_i G_ij (q_i - k_j)."""
        return 2 * (G.T @ Q - G.sum(0)[:, None] * K)

    @dataclass(frozen=True)
    class DistanceScores(Operation):
        """``u_ij = -sum_c (q_ic - k_jc)^2``: each query against every key."""

        notation: Notation | None = None

        name = "test_distance"
        reference_function = distance_scores
        default_notation = Notation("u", "u", "Negative squared distances to every key")
        trace_step = "attention"
        columns = "keys"
        rational = True
        score_key = "test_distance"
        torch_scores = "-((q[:, None, :] - k[None, :, :]) ** 2).sum(-1)"

        def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
            return IndexEquation(
                ("u[i, j] = -sum((q[i, c] - k[j, c]) ** 2 for c in range(d_k))",),
                {"u": "out", "q": "in0", "k": "in1"}, sizes={"d_k": ("q", 1)})

        def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                              ) -> IndexEquation:
            if wrt == 0:
                return IndexEquation(
                    ("dq[i, c] = sum(-2 * du[i, m] * (q[i, c] - k[m, c]) "
                     "for m in range(n))",),
                    {"dq": "result", "du": "grad", "q": "in0", "k": "in1"},
                    sizes={"n": ("du", 1)})
            return IndexEquation(
                ("dk[j, c] = sum(2 * du[m, j] * (q[m, c] - k[j, c]) for m in range(n))",),
                {"dk": "result", "du": "grad", "q": "in0", "k": "in1"},
                sizes={"n": ("du", 0)})

        def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
            Q, K = args
            return sympy.Matrix(Q.rows, K.rows, lambda i, j: -sum(
                (Q[i, c] - K[j, c]) ** 2 for c in range(Q.cols)))

        def arb(self, args):
            Q, K = args
            return [[-sum((a - b) ** 2 for a, b in zip(q, k)) for k in K] for q in Q]

        def arguments(self, args, dtype):
            return args

        def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                     num: Arithmetic) -> Rows:
            Q, K = args
            if wrt == 0:
                return [[num.total(num.const(sympy.Integer(-2)) * grad[i][m] * (Q[i][c] - K[m][c])
                                   for m in range(len(K))) for c in range(len(Q[i]))]
                        for i in range(len(Q))]
            return [[num.total(num.const(sympy.Integer(2)) * grad[m][j] * (Q[m][c] - K[j][c])
                               for m in range(len(Q))) for c in range(len(K[j]))]
                    for j in range(len(K))]

        def backward_function(self, wrt: int | str):
            return distance_backward_Q if wrt == 0 else distance_backward_K

        def backward_arguments(self, wrt, args, out, grad, dtype):
            return args[0].astype(dtype), args[1].astype(dtype), grad.astype(dtype)

    return DistanceScores


@pytest.fixture(scope="module")
def distance():
    """The score function, registered for this module's tests only."""
    cls = _define_distance()
    try:
        yield cls
    finally:
        OPERATIONS.pop(cls.name, None)


@pytest.fixture(scope="module")
def distance_graph(distance):
    return with_gradients(derive(parse_example(DISTANCE_TEXT, source="course+distance")))


@pytest.fixture()
def distance_file(distance, tmp_path):
    path = tmp_path / "test_distance.toml"
    path.write_text(DISTANCE_TEXT)
    return str(path)


def test_distance_scores_values_and_gradients(distance_graph):
    """u = -|q_i - k_j|^2 and its gradients, against float64 of the engine's Q, K, dL/du."""
    g = distance_graph
    p = "layer1.head1"
    assert g[f"{p}.raw_scores"].op.name == "test_distance"
    Q, K = _floats(g, f"{p}.Q"), _floats(g, f"{p}.K")
    u = _floats(g, f"{p}.raw_scores")
    assert np.allclose(u, [[-np.sum((q - k) ** 2) for k in K] for q in Q], rtol=1e-13)
    G = _floats(g, f"grad.{p}.raw_scores")
    dQ = [[-2 * sum(G[i, j] * (Q[i, c] - K[j, c]) for j in range(len(K)))
           for c in range(Q.shape[1])] for i in range(len(Q))]
    assert np.allclose(_floats(g, f"grad.{p}.Q"), dQ, rtol=1e-11, atol=1e-14)


def test_distance_equations_proved(distance_graph):
    g = distance_graph
    n, d = g["layer1.head1.Q"].shape
    assert prove_stage(g, g["layer1.head1.raw_scores"]) == n * n
    assert prove_stage(g, g["grad.layer1.head1.Q"]) == n * d


def test_distance_commands(distance_file, tmp_path, capsys):
    """derive, backward, trace, crosscheck (NumPy, its float backward reference too),
    export (LaTeX, JSON) and check (its exported equation read back): each shows the
    step by its own declarations."""
    assert main(["derive", distance_file, "--stage", "layer1.head1.raw_scores"]) == 0
    assert main(["backward", distance_file, "--stage", "grad.layer1.head1.K"]) == 0
    assert main(["trace", distance_file, "--token", "export"]) == 0
    assert main(["crosscheck", distance_file]) == 0
    out = capsys.readouterr().out
    assert "grad.layer1.head1.K" in out and "Negative squared distances" in out
    tex = tmp_path / "tex"
    assert main(["export", distance_file, "--out", str(tex), "--quiet"]) == 0
    text = "\n".join(p.read_text() for p in tex.rglob("*.tex"))
    assert "Negative squared distances" in text and "dot product" not in text.lower()
    # check reads its exported equation back and finds it holds
    (line,) = {t.strip() for t in text.splitlines() if t.strip().startswith(
        r"u^{(1)}_{i,j} = -\sum_{c = 0}")}
    claims = tmp_path / "claims.toml"
    claims.write_text(f"[[equation]]\nstage = 'layer1.head1.raw_scores'\nlatex = '{line}'\n")
    assert main(["check", str(claims), distance_file]) == 0
    assert "holds" in capsys.readouterr().out
    js = tmp_path / "json"
    assert main(["export", distance_file, "--format", "json", "--out", str(js),
                 "--quiet"]) == 0
    assert "layer1.head1.raw_scores" in "\n".join(p.read_text() for p in js.rglob("*.json"))


def test_distance_weights_keep_their_matrix_form_line(distance_graph):
    """The notes' matrix form writes the weights over the score function's own scores,
    A = softmax(U / sqrt(d_k)) (never dropped, never Q K^T), says what U is, and the
    line holds: softmax of each row of u / sqrt(d_k), in float64, is the weights."""
    from symformer.latex import matrix_form as mf

    g = distance_graph
    p = "layer1.head1"
    ((lhs, rhs),) = mf.equation_lines([g[f"{p}.weights"]])
    assert lhs == "A^{(1)}" and r"\frac{U^{(1)}}{\sqrt{d_{k}}}" in rhs
    assert "negative squared distances to every key" in rhs and "K^{" not in rhs
    u = _floats(g, f"{p}.raw_scores") / np.sqrt(g[f"{p}.Q"].shape[1])
    e = np.exp(u - u.max(axis=1, keepdims=True))
    np.testing.assert_allclose(e / e.sum(axis=1, keepdims=True),
                               _floats(g, f"{p}.weights"), rtol=1e-12)


def test_distance_torch_module_equals_a_hand_written_attention(distance, distance_file,
                                                               tmp_path, capsys):
    """The exported module computes the declared scores: each head's raw scores and
    output equal float64 NumPy written here from the module's own Q, K, V."""
    pytest.importorskip("torch")
    from symformer.frameworks.torch_out import model_class

    stages = model_class(parse_example(DISTANCE_TEXT, source="course+distance"))()()
    p = "layer1.head1"
    q, k, v = (stages[f"{p}.{m}"].numpy() for m in ("Q", "K", "V"))
    u = -((q[:, None, :] - k[None, :, :]) ** 2).sum(-1)
    np.testing.assert_allclose(stages[f"{p}.raw_scores"].numpy(), u, rtol=1e-13)
    e = np.exp(u / np.sqrt(q.shape[1]) - (u / np.sqrt(q.shape[1])).max(1, keepdims=True))
    np.testing.assert_allclose(stages[f"{p}.output"].numpy(),
                               e / e.sum(1, keepdims=True) @ v, rtol=1e-12)
    assert main(["export", distance_file, "--format", "torch", "--out",
                 str(tmp_path / "pt"), "--quiet"]) == 0
    assert main(["crosscheck", distance_file, "--torch"]) == 0
    assert f"{p}.raw_scores" in capsys.readouterr().out


def test_distance_without_a_pytorch_form_is_refused_in_one_line(distance, distance_file,
                                                               tmp_path, capsys, monkeypatch):
    """A score function declaring no torch_scores: refused, never q k^T in its place."""
    monkeypatch.setattr(distance, "torch_scores", None)
    assert main(["export", distance_file, "--format", "torch", "--out",
                 str(tmp_path / "pt"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the PyTorch module (export --format torch, " \
        "crosscheck --torch): the attention score function 'test_distance' declares no " \
        "torch_scores (its PyTorch form)" in err, err
    assert not (tmp_path / "pt" / "model.py").exists()


def test_an_unknown_score_function_is_named(distance):
    from symformer.errors import InputError

    with pytest.raises(InputError, match="attention_scores must be one of 'dot', "
                       "'test_distance'; found 'cosine'"):
        parse_example(TEXT.replace('activation = "test_relu2"\n',
                                   'attention_scores = "cosine"\n', 1), source="x.toml")


def test_dyt_is_read_from_a_pytorch_layer_by_its_declared_module(dyt, monkeypatch):
    """``from_torch`` maps a layer's norm modules by what the normalisations declare
    (``torch_modules``, a module outside ``torch.nn`` by its qualified name; its weights
    by ``module_weights``): DyT's own module in an encoder layer is read as DyT, and the
    example computes what the layer computes (float64, alpha = 1/2)."""
    torch = pytest.importorskip("torch")
    import symformer

    class TorchDyT(torch.nn.Module):
        """y = weight * tanh(0.5 x) + bias, written here by hand."""

        def __init__(self, d: int) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(1 + torch.randn(d) / 4)
            self.bias = torch.nn.Parameter(torch.randn(d) / 4)
            self.eps = 1e-5  # read by from_torch (the layer's eps); DyT does not use it

        def forward(self, x):
            return self.weight * torch.tanh(0.5 * x) + self.bias

    qualified = f"{TorchDyT.__module__}.{TorchDyT.__qualname__}"
    monkeypatch.setattr(dyt, "torch_modules", {qualified: "test_dyt"}, raising=False)
    monkeypatch.setattr(dyt, "module_weights", {"gamma": "weight", "beta": "bias"},
                        raising=False)
    torch.manual_seed(3)
    layer = torch.nn.TransformerEncoderLayer(4, 2, dim_feedforward=6, dropout=0.0,
                                             batch_first=True).eval()
    layer.norm1, layer.norm2 = TorchDyT(4), TorchDyT(4)
    x = torch.randn(3, 4)
    example = symformer.from_torch(layer, x)
    assert example.layers[0].layer_norm == "test_dyt"
    want = layer.double()(x.double().unsqueeze(0))[0].detach().numpy()  # no fast path
    got = _floats(derive(example), "output")
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
