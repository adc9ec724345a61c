"""The constants notes print in prose are claimable: √d_k (``S.scale``) and a
cross-entropy's loss at a uniform prediction, −log(1/V) (``loss.uniform``).

The references are closed forms computed here with mpmath from the example file's own
sizes (d_k from the weights' shape, V from the vocabulary), not from the derivation.
"""

from __future__ import annotations

import tomllib

import mpmath
import pytest

from symformer.cli import main
from symformer.example import load_example

mpmath.mp.dps = 40


def _claims(tmp_path, stage: str, values: list[str]) -> str:
    body = "".join(f'[[claim]]\nname = "c{k}"\nstage = "{stage}"\nentry = [0, 0]\n'
                   f"values = {v}\n\n" for k, v in enumerate(values))
    path = tmp_path / "claims.toml"
    path.write_text(body)
    return str(path)


def _decimals(x: mpmath.mpf, d: int) -> str:
    return mpmath.nstr(x, d + 1 + int(mpmath.floor(mpmath.log10(abs(x)))), strip_zeros=False)


def _with_cross_entropy(tmp_path) -> tuple[str, int]:
    source = load_example("gpt2_style").source
    text = open(source, encoding="utf-8").read()
    data = tomllib.loads(text)
    path = tmp_path / "ce.toml"
    targets = data["tokens"][1:] + data["tokens"][:1]
    path.write_text(text + f'\n[loss]\nkind = "cross_entropy"\ntargets = {targets!r}\n'
                    .replace("'", '"'))
    return str(path), len(data["vocab"])


def test_the_score_divisor_is_sqrt_d_k(tmp_path, capsys):
    source = load_example("gpt2_style").source
    data = tomllib.loads(open(source, encoding="utf-8").read())
    d_k = len(data["layer"][0]["head"][1]["W_Q"][0])
    root = mpmath.sqrt(d_k)
    right, wrong = _decimals(root, 3), _decimals(root + mpmath.mpf("0.002"), 3)
    claims = _claims(tmp_path, "layer1.head2.scores.scale",
                     [right, wrong, f'"sqrt({d_k})"', f'"sqrt({d_k + 1})"'])
    assert main(["check", claims, "--example", source]) == 1
    out = capsys.readouterr().out
    assert "c0" in out and "c1" in out
    lines = {name: line for line in out.splitlines() for name in ("c0", "c1", "c2", "c3")
             if line.lstrip().startswith(name)}
    assert "right" in lines["c0"].lower() and "right" in lines["c2"].lower()
    assert "wrong" in lines["c1"].lower() and "wrong" in lines["c3"].lower()


def test_uniform_loss_is_log_of_the_vocabulary(tmp_path, capsys):
    example, V = _with_cross_entropy(tmp_path)
    value = -mpmath.log(mpmath.mpf(1) / V)
    claims = _claims(tmp_path, "loss.uniform",
                     [_decimals(value, 4), _decimals(value - mpmath.mpf("0.001"), 4),
                      f'"-log(1/{V})"', f'"log({V + 1})"'])
    assert main(["check", claims, "--example", example]) == 1
    out = capsys.readouterr().out
    lines = {name: line for line in out.splitlines() for name in ("c0", "c1", "c2", "c3")
             if line.lstrip().startswith(name)}
    assert "right" in lines["c0"].lower() and "right" in lines["c2"].lower()
    assert "wrong" in lines["c1"].lower() and "wrong" in lines["c3"].lower()


@pytest.mark.parametrize("stage, why", [("loss.uniform", "not a cross-entropy"),
                                        ("layer1.head1.weights.scale",
                                         "not a scaled-score stage")])
def test_a_constant_of_the_wrong_stage_is_one_line(tmp_path, capsys, stage, why):
    claims = _claims(tmp_path, stage, ["1.0"])
    assert main(["check", claims]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and why in err


def test_the_addresses_are_listed(tmp_path, capsys):
    example, _ = _with_cross_entropy(tmp_path)
    assert main(["derive", example, "--list", "--all"]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert "loss.uniform" in names and "layer2.head1.scores.scale" in names


def test_tagged_prose_numbers_name_the_constants(tmp_path, capsys):
    """``% symformer: loss.uniform[0,0]`` in notes ties a sentence's number to log V."""
    example, V = _with_cross_entropy(tmp_path)
    value = mpmath.log(V)
    notes = tmp_path / "notes.tex"
    notes.write_text(
        f"An untrained model starts near $-\\log(1/{V}) = {_decimals(value, 3)}$. "
        "% symformer: loss.uniform[0,0]\n"
        f"We divide by $\\sqrt{{2}} = 1.415$. % symformer: layer1.head1.scores.scale[0,0]\n")
    assert main(["check", str(notes), "--example", example]) == 1
    out = capsys.readouterr().out
    assert "claimed 1.415, correct 1.414" in out
    assert "claimed " + _decimals(value, 3) not in out
