"""symformer crosscheck: float64 agrees with the exact values, float32 drifts, conventions."""

from __future__ import annotations

import json

import numpy as np
import pytest

from symformer import load_example
from symformer.cli import main
from symformer.verify.conventions import Convention
from symformer.verify.crosscheck import crosscheck


@pytest.mark.parametrize("convention", [
    Convention(), Convention(mask="-1e9"), Convention(layer_norm="unbiased"),
    Convention(layer_norm="whole_matrix"), Convention(norm="pre"),
])
def test_float64_within_1e12_under_every_convention(convention) -> None:
    rows = crosscheck(load_example(), convention, causal=True)
    assert all(r.ok for r in rows), [r for r in rows if not r.ok]
    # float64 is not exact either: some stage shows a relative rounding error, far below tol
    assert 0 < max(r.rel_error for r in rows) < 1e-12


def test_float32_drifts() -> None:
    rows = crosscheck(load_example(), Convention(), dtype=np.float32)
    worst = max(r.rel_error for r in rows)
    assert 1e-9 < worst < 1e-5
    assert not all(r.ok for r in rows)


def test_a_wrong_reference_is_caught(monkeypatch) -> None:
    from symformer.ops import Softmax

    softmax = Softmax.reference_function
    monkeypatch.setattr(Softmax, "reference_function",
                        staticmethod(lambda s: softmax(s) * (1 + 1e-9)))
    rows = {r.stage: r for r in crosscheck(load_example(), Convention())}
    assert not rows["layer1.head1.weights"].ok and rows["layer1.head1.Q"].ok


def test_cli(capsys) -> None:
    assert main(["crosscheck", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] and len(data["stages"]) == 33  # 31 + two .std stages
    assert main(["crosscheck", "--dtype", "float32"]) == 1
    assert "> tol" in capsys.readouterr().out
    assert main(["crosscheck", "--mask=5"]) == 2
    assert "mask" in capsys.readouterr().err
