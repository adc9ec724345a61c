"""`check` judges a training run's numbers: the weights and the loss after step k.

The claimed numbers come from an independent float64 training loop
(``test_train.float_training``: textbook gradients, PyTorch's AdamW), rounded
with ``decimal``; the claims file's ``[train]`` table says which run they are about.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sympy
from test_train import _get
from test_train_options import float_loop, rounded

from symformer import derive
from symformer.blocks.train import train
from symformer.cli import main
from symformer.example import load_example
from symformer.example.loader import builtin_text

TRAIN = '[train]\nlr = 0.05\nsteps = 2\noptimizer = "adamw"\nweight_decay = 0.1\n' \
        'freeze = ["embedding_table"]\n'


def _floats():
    example = load_example()
    names = [w.name for w in train(derive(example), sympy.Rational(1, 10), 1).weights]
    return float_loop(example, names, 0.05, 2, "adam", decay=0.1,
                      frozen=("embedding_table",))


def _claims(W, losses, bump: float = 0.0) -> str:
    rows = ", ".join("[" + ", ".join(rounded(x, 4) for x in row) + "]" for row in W)
    wrong = rounded(losses[1] + bump, 4)
    return (f'[[claim]]\nname = "W_1 after two steps"\nstage = "step2.layer1.W_1"\n'
            f"values = [{rows}]\n\n"
            f'[[claim]]\nstage = "step1.loss"\nentry = [0, 0]\nvalues = {wrong}\n\n'
            f'[[claim]]\nstage = "step2.loss"\nentry = [0, 0]\nvalues = {rounded(losses[2], 4)}\n')


def test_step_claims_right_and_wrong(tmp_path, capsys):
    losses, trained = _floats()
    W = _get(trained, "layer1.W_1")
    path = tmp_path / "claims.toml"
    path.write_text(TRAIN + "\n" + _claims(W, losses))
    assert main(["check", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["numbers"] == W.size + 2 and doc["ok"]
    path.write_text(TRAIN + "\n" + _claims(W, losses, bump=1e-3))
    assert main(["check", str(path)]) == 1
    out = capsys.readouterr().out
    assert "step1.loss -> step1.loss" in out and "0 of 1 right" in out
    assert f"{W.size + 1} of {W.size + 2} numbers correct" in out


def test_an_example_file_with_its_own_run_and_claims(tmp_path, capsys):
    losses, _ = _floats()
    text = builtin_text() + "\n" + TRAIN + \
        f'\n[[claim]]\nstage = "step2.loss"\nentry = [0, 0]\nvalues = {rounded(losses[2], 3)}\n'
    path = tmp_path / "example.toml"
    path.write_text(text)
    assert main(["check", str(path)]) == 0
    assert "1 of 1 numbers correct" in capsys.readouterr().out


@pytest.mark.parametrize(("train", "stage", "message"), [
    ("", "step1.loss", "give its settings in a [train] table"),
    ("[train]\nsteps = 1\n", "step1.loss", "train: missing key 'lr'"),
    ("[train]\nlr = 0.1\nmomentum = 0.9\n", "step1.loss", "unknown key 'momentum'"),
    ("[train]\nlr = 0.1\nsteps = 1\n", "step2.loss", "the [train] table takes 1 step"),
    ("[train]\nlr = 0.1\nsteps = 1\n", "step1.layer1.W_9", "unknown stage 'step1.layer1.W_9'"),
    ('[train]\nlr = 0.1\noptimizer = "lion"\n', "step1.loss", "optimizer must be one of"),
    ('[train]\nlr = 0.1\nfreeze = ["nope"]\n', "step1.loss", "matches no weight"),
])
def test_bad_training_claims(tmp_path, capsys, train, stage, message):
    path = tmp_path / "claims.toml"
    path.write_text(train + f'\n[[claim]]\nstage = "{stage}"\nentry = [0, 0]\nvalues = 1\n')
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_an_example_files_run_serves_train_and_tagged_notes(tmp_path, capsys):
    losses, _ = _floats()
    example = tmp_path / "example.toml"
    example.write_text(builtin_text() + "\n" + TRAIN)
    assert main(["train", str(example), "--decimals", "4"]) == 0  # lr etc. from [train]
    out = capsys.readouterr().out
    assert "2 steps, lr = 1/20 (adamw)" in out and "frozen: embedding_table" in out
    assert f"step 2  loss {rounded(losses[2], 4)}" in out
    notes = tmp_path / "notes.md"
    notes.write_text(f"After two steps the loss is {rounded(losses[2], 3)}. "
                     f"<!-- symformer: step2.loss[0,0] -->\n")
    assert main(["check", str(notes), "--example", str(example)]) == 0
    assert "1 of 1 numbers correct" in capsys.readouterr().out
    assert main(["train"]) == 2
    assert "--lr is required" in capsys.readouterr().err


def test_a_steps_next_token_is_claimable(tmp_path, capsys):
    """``stepT.next_token`` (documented as stepT.<forward stage>): the argmax of step T's
    own logits, judged by ``check``; step 0's is the untrained example's next token."""
    import symformer

    text = (Path(symformer.__file__).parent / "examples" / "gpt2_style.toml").read_text()
    example = tmp_path / "g.toml"
    example.write_text(text + '\n[loss]\nkind = "cross_entropy"\ntargets = ["cat", "sat", '
                              '"the"]\n')
    untrained = symformer.derive(symformer.load_example(str(example)))
    first = untrained["next_token"].rounded(decimals=0)[0]
    claims = tmp_path / "c.toml"
    claims.write_text('[train]\nlr = 0.1\nsteps = 1\n\n[[claim]]\nstage = "step0.next_token"\n'
                      f'values = [{[int(r.digits) for r in first]}]\n\n'
                      '[[claim]]\nstage = "step1.next_token"\nvalues = [[0, 0, 0, 0, 1]]\n')
    status = main(["check", str(claims), "--example", str(example)])
    out = capsys.readouterr().out
    assert "step0.next_token" in out and "step1.next_token" in out
    assert status == 1 and out.count("wrong") >= 1  # step 1's argmax is not "mat"
    assert "of 'sat' (position 2), column 'mat'" in out  # the last position's row
    claims.write_text('[train]\nlr = 0.1\nsteps = 1\noptimizer = "adam"\n\n[[claim]]\n'
                      'stage = "step1.adam_v.layer1.W_1"\nentry = [1, 0]\nvalues = 5\n\n'
                      '[[claim]]\nstage = "grad.step0.embedding_table"\nentry = [1, 0]\n'
                      'values = 5\n')
    main(["check", str(claims), "--example", str(example)])
    out = capsys.readouterr().out
    assert "v_0 of row 1" in out and "m_0" not in out  # Adam's second moment is v
    assert "embedding_table_0 of row 1 ('cat')" in out  # a vocabulary row, no position
