"""`check` judges the loss and every gradient stage (claims files and tagged notes).

The claimed numbers come from an independent float64 backward pass written from the
textbook formulas (``tests/float_backward.py``), rounded with ``decimal``; the engine's
own values are never the reference.
"""

from __future__ import annotations

import json
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

import numpy as np
import pytest
from float_backward import float_backward

import symformer.example
from symformer import derive, load_example
from symformer.cli import main
from symformer.verify.check import Checker
from symformer.verify.claims import claims_from_toml, validate


def text(x: float, decimals: int) -> str:
    return str(Decimal(repr(float(x))).quantize(Decimal(1).scaleb(-decimals), ROUND_HALF_EVEN))


def claim(stage: str, values: np.ndarray, decimals: int = 4) -> str:
    rows = ", ".join("[" + ", ".join(text(v, decimals) for v in row) + "]" for row in values)
    return f'[[claim]]\nname = "{stage}"\nstage = "{stage}"\ndecimals = {decimals}\n' \
           f"values = [{rows}]\n"


# Stages whose float values are not within 1e-10 of a rounding boundary at 4 decimals
# (checked below), so the float reference decides their correct rounding.
STAGES = ["loss", "grad.output", "grad.layer1.head1.weights", "grad.layer1.head1.W_Q",
          "grad.layer1.W_O", "grad.layer1.add_norm2.gamma", "grad.embedding_table"]


def _safe(values: np.ndarray, decimals: int = 4) -> bool:
    scaled = np.abs(values) * 10 ** decimals
    return bool(np.all(np.abs(scaled - np.floor(scaled) - 0.5) > 1e-6))


def test_gradient_claims_right_and_perturbed_wrong() -> None:
    example = load_example()
    want = float_backward(example)
    assert all(_safe(want[s]) for s in STAGES)
    body = "".join(claim(s, want[s]) for s in STAGES)
    g = derive(example)
    claims = claims_from_toml(body, "grads.toml")
    validate(claims, g)
    results = Checker(example).check_all(claims)
    assert [len(r.entries) for r in results] == [want[s].size for s in STAGES]
    assert all(not r.wrong for r in results)
    # one entry of W_Q's gradient off by one in the last place: exactly that one is wrong
    bad = want["grad.layer1.head1.W_Q"].copy()
    bad[1, 1] += 1e-4
    claims = claims_from_toml(claim("grad.layer1.head1.W_Q", bad), "bad.toml")
    validate(claims, g)
    (result,) = Checker(example).check_all(claims)
    assert [(e.row, e.col) for e in result.wrong] == [(1, 1)]


def test_forward_only_checks_stay_forward_only() -> None:
    example = load_example()
    g = derive(example)
    body = '[[claim]]\nstage = "layer1.head1.Q"\nentry = [1, 0]\nvalues = 1.60\n'
    claims = claims_from_toml(body, "q.toml")
    validate(claims, g)
    checker = Checker(example)
    assert not checker.check_all(claims)[0].wrong
    assert "grad.loss" not in g
    assert all("grad.loss" not in d for d in checker._derived.values())


def test_unknown_stage_hint_counts_every_stage(tmp_path, capsys) -> None:
    assert main(["derive", "--list"]) == 0
    listed = len(capsys.readouterr().out.strip().splitlines())
    path = tmp_path / "c.toml"
    path.write_text('[[claim]]\nstage = "grad.layer1.W_9"\nentry = [0, 0]\nvalues = 0.1\n')
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"lists all {listed} stages" in err and "grad.layer1.W_1" in err
    assert len(err.strip().splitlines()) == 1


def test_gradient_claim_without_loss_says_how_to_add_one(tmp_path, capsys) -> None:
    example = tmp_path / "e.toml"
    builtin = Path(symformer.example.__file__).with_name("builtin.toml").read_text()
    example.write_text(builtin.split("\n[loss]")[0])
    path = tmp_path / "c.toml"
    path.write_text('[[claim]]\nstage = "grad.output"\nentry = [0, 0]\nvalues = 0.1\n')
    assert main(["check", str(path), "--example", str(example)]) == 2
    assert "no [loss] table" in capsys.readouterr().err


def test_tagged_notes_tie_gradients(tmp_path, capsys) -> None:
    want = float_backward(load_example())
    loss = text(want["loss"][0, 0], 3)
    wq = text(want["grad.layer1.head1.W_Q"][0, 1], 4)
    notes = tmp_path / "notes.md"
    notes.write_text(f"The loss is {loss} <!-- symformer: loss[0,0] -->\n"
                     f"and one gradient {wq}. <!-- symformer: grad.layer1.head1.W_Q[0,1] -->\n"
                     f"a stale one 0.5 <!-- symformer: grad.output[0,0] -->\n")
    assert main(["check", str(notes), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert [c["right"] for c in doc["claims"]] == [1, 1, 0]
    assert doc["claims"][2]["name"] == "line 3"


@pytest.mark.parametrize("stage", ["loss", "grad.layer1.W_1"])
def test_cli_accepts_backward_stages(tmp_path, capsys, stage) -> None:
    want = float_backward(load_example())
    path = tmp_path / "c.toml"
    path.write_text(claim(stage, want[stage], 3))
    assert main(["check", str(path)]) == 0
    assert "numbers correct" in capsys.readouterr().out


def test_work_limit_counts_the_backward_pass(tmp_path, capsys):
    from symformer import load_example
    from symformer.blocks.cost import estimate
    from symformer.blocks.work import operations

    path = tmp_path / "c.toml"
    forward = tmp_path / "f.toml"
    path.write_text('[[claim]]\nstage = "grad.output"\nentry = [0, 0]\nvalues = 0.1\n')
    forward.write_text('[[claim]]\nstage = "output"\nentry = [0, 0]\nvalues = 0.1\n')
    example = load_example()
    limit = estimate("check", example, claims=1, numbers=1)
    assert estimate("check", example, gradients=True) > limit
    assert main(["check", str(forward), "--max-work", str(limit)]) == 1  # forward: allowed
    capsys.readouterr()
    assert main(["check", str(path), "--max-work", str(limit)]) == 2
    err = capsys.readouterr().err
    assert f"over the limit of {operations(limit)}" in err and len(err.strip().splitlines()) == 1
