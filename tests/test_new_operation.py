"""A new activation is one module: ReLU², defined here and registered at run time.

The operation below is the whole of it (``docs/architecture.md``, "Adding an
operation"): its exact formula, balls, NumPy reference, equation, backward rule (the
step spelled ``(2 * h if h > 0 else 0)`` so the proof decides it by the certified sign
of h), and the declarations the rest of the package reads (the example file's
``activation = "relu2"``, the exercise sheet's definition, the PyTorch form).  No other
source file changes, and every command works on an example that uses it: derive,
backward, export (LaTeX, JSON; the equations proved entry by entry), trace, slides,
exercise, export --format torch and crosscheck (NumPy, and PyTorch where installed).

The class is defined inside a fixture and removed from the registry afterwards, so the
other test files see the shipped operations only.  Every value is checked against an
independent reference: max(0, h)^2 and 2 max(0, h) g in float64 from the engine's own
hidden layer h, and the notes' text scanned for the declared pieces.
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
TEXT = TEXT.replace('eps = "1e-5"\n', 'eps = "1e-5"\nactivation = "relu2"\n', 1) + (
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

        name = "relu2"
        reference_function = relu2
        default_notation = Notation("a", "a", "FFN activation (squared ReLU)")
        clips = True  # 0 where h <= 0, and no gradient back there
        activation_key = "relu2"
        function_name = "ReLU^2"
        definition = ("Squared ReLU squares positive numbers and replaces negative ones "
                      "by 0: ", r"\operatorname{ReLU^2}(x) = \max(0, x)^2", ".")
        torch_function = "torch.relu(x) ** 2"
        hf_names = ("relu2",)

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
    path = tmp_path / "relu2.toml"
    path.write_text(TEXT)
    return str(path)


def _floats(g, name: str) -> np.ndarray:
    """A stage's certified balls (128 bits) as float64: their midpoints."""
    return np.array([[float(v.mid()) for v in row] for row in g.evaluate(128)[name]])


def test_registered_from_its_own_module(relu2):
    assert activations()["relu2"] is relu2
    assert list(activations())[:4] == ["relu", "gelu", "gelu_tanh", "silu"]


def test_a_hugging_face_config_names_it_by_its_declared_hf_names(relu2):
    from symformer.frameworks.hf_config import hf_activations

    known = hf_activations()  # hidden_act / activation_function -> the example's key
    assert known["relu2"] == "relu2"
    assert known["gelu_new"] == known["gelu_pytorch_tanh"] == "gelu_tanh"
    assert known["swish"] == known["silu"] == "silu" and known["relu"] == "relu"


def test_derive_and_backward_values(graph):
    """a = max(0, h)^2 and dL/dh = 2 max(0, h) dL/da, against float64 of the engine's h."""
    g = graph
    assert g["layer1.ffn.activation"].op.name == "relu2"
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
    from symformer.verify.inactive import activation_name

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
    assert 'if name == "relu2":\n            return torch.relu(x) ** 2' in code
    pytest.importorskip("torch")
    assert main(["crosscheck", example_file, "--torch"]) == 0
    assert "layer1.ffn.activation" in capsys.readouterr().out


def test_an_activation_without_a_pytorch_form_is_refused(relu2, example, monkeypatch):
    """Never silently another function: no torch form, no module."""
    from symformer.errors import NotSupportedError
    from symformer.frameworks.torch_out import to_torch

    monkeypatch.setattr(relu2, "torch_function", None)
    with pytest.raises(NotSupportedError, match="relu2"):
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
