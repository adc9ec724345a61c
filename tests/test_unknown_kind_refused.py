"""Fail closed: a consumer that does not know a kind of step refuses it in one line.

A deliberately incomplete normalisation (``test_bare``: y = gamma x + beta) declares
its example-file key and its stages, and nothing else: no label, no PyTorch form.  It
derives (the engine needs nothing more), and every consumer that needs a declaration it
lacks refuses the example with one line naming the kind and the consumer (exit 2) --
never LayerNorm drawn or computed in its place: the PyTorch module (export --format
torch, crosscheck --torch), the block diagram (figures, export --figures), the matrix
form (export), the slides, and the notes' name for it (--layer-norm).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np
import pytest

from symformer.cli import main
from symformer.registry import OPERATIONS

TEXT = (resources.files("symformer.examples") / "course_module.toml").read_text().replace(
    'eps = "1e-5"\n', 'eps = "1e-5"\nlayer_norm = "test_bare"\n', 1)


def _define() -> type:
    from symformer.engine.arbmath import constant_vector
    from symformer.equations.ir import IndexEquation
    from symformer.lazy import sympy
    from symformer.notation_types import Notation
    from symformer.ops.base import Operation

    def bare(x, gamma, beta):
        return gamma * x + beta

    @dataclass(frozen=True)
    class Bare(Operation):
        """gamma_j x_ij + beta_j: a normalisation that declares only its key and stages."""

        gamma: Any
        beta: Any

        name = "test_bare"
        reference_function = bare
        default_notation = Notation("y", "y", "Bare scale and shift")
        norm_keys = ("test_bare",)

        @classmethod
        def add_norm(cls, g, name, x, key, eps, gamma, beta, layer):
            return g.add(name, "norm", cls(gamma, beta), (x,), g[x].rows, g[x].cols,
                         layer=layer)

        def equation(self, shapes=()):
            return IndexEquation(("y[i, j] = gamma[j] * x[i, j] + beta[j]",),
                                 {"y": "out", "x": "in0", "gamma": "param:gamma",
                                  "beta": "param:beta"})

        def parameters(self):
            return {"gamma": self.gamma, "beta": self.beta}

        def sympy(self, args: Sequence[Any]) -> Any:
            X = args[0]
            return sympy.Matrix(X.rows, X.cols,
                                lambda i, j: self.gamma[j] * X[i, j] + self.beta[j])

        def arb(self, args):
            gamma, beta = constant_vector(self.gamma), constant_vector(self.beta)
            return [[c * x + b for x, c, b in zip(row, gamma, beta)] for row in args[0]]

        def arguments(self, args, dtype):
            row = lambda m: np.array([[float(v) for v in m]], dtype=dtype)  # noqa: E731
            return args[0], row(self.gamma), row(self.beta)

    return Bare


@pytest.fixture(scope="module")
def bare():
    cls = _define()
    try:
        yield cls
    finally:
        OPERATIONS.pop(cls.name, None)


@pytest.fixture()
def bare_file(bare, tmp_path):
    path = tmp_path / "test_bare.toml"
    path.write_text(TEXT)
    return str(path)


def test_it_derives(bare_file, capsys):
    assert main(["derive", bare_file, "--stage", "layer1.add_norm1"]) == 0
    assert "layer1.add_norm1" in capsys.readouterr().out


@pytest.mark.parametrize("args, consumer, missing", [
    (["export", "--format", "torch"], "the PyTorch module", "torch_norms"),
    (["figures"], "the block diagram", "norm_label"),
    (["export", "--stage", "layer1.add_norm1"], "the matrix form", "norm_label"),
    (["slides"], "the ", "norm_label"),
])
def test_each_consumer_refuses_it_in_one_line(bare_file, tmp_path, capsys, args, consumer,
                                              missing):
    command, *rest = args
    assert main([command, bare_file, *rest, "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert "'test_bare'" in err and consumer in err and missing in err, err


def test_crosscheck_torch_refuses_it(bare_file, capsys):
    pytest.importorskip("torch")
    assert main(["crosscheck", bare_file, "--torch"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the PyTorch module" in err and "'test_bare'" in err


def test_the_notes_refuse_to_name_it(bare, capsys):
    """``--layer-norm test_bare`` on another example: the header would name it."""
    assert main(["derive", "gpt2_style", "--layer-norm", "test_bare"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'test_bare'" in err and "the notes" in err, err
