"""`check` explains a printed -inf under a finite mask, and names a print block's lines.

Reference values: the independent float64 forward pass (``tests/float_reference.py``),
rounded with ``decimal``.
"""

from __future__ import annotations

import json
from decimal import ROUND_HALF_EVEN, Decimal

import numpy as np
from float_reference import float_forward

from symformer.cli import main
from symformer.example import load_example
from symformer.example.loader import builtin_text


def rounded(x: float, decimals: int) -> str:
    return str(Decimal(repr(float(x))).quantize(Decimal(1).scaleb(-decimals),
                                                ROUND_HALF_EVEN))


def test_printed_minus_inf_under_a_finite_mask_is_a_convention(tmp_path, capsys):
    example = tmp_path / "masked.toml"
    example.write_text('mask = "-1e9"\n' + builtin_text().replace("\ncausal = false",
                                                                   "\ncausal = true"))
    scores = float_forward(load_example(), causal=True)["layer1.head1.scores"]
    rows = [[rounded(x, 3) if j <= i else '"-inf"' for j, x in enumerate(row)]
            for i, row in enumerate(scores)]
    claims = tmp_path / "claims.toml"
    claims.write_text('[[claim]]\nname = "masked scores"\nstage = "layer1.head1.scores"\n'
                      "values = [" + ", ".join("[" + ", ".join(r) + "]" for r in rows) + "]\n")
    assert main(["check", str(claims), "--example", str(example)]) == 1
    out = capsys.readouterr().out
    assert "10 of 16 right, 6 of 16 wrong" in out
    why = [line for line in out.splitlines() if line.strip().startswith("why:")]
    assert len(why) == 1 and "mask -inf" in why[0]
    assert "the example masks with -1e9" in why[0] and "not an error" in why[0]
    assert main(["check", str(claims), "--example", str(example), "--mask=-inf"]) == 0
    assert "16 of 16 numbers correct" in capsys.readouterr().out


def test_wrong_numbers_of_a_print_block_are_reported_with_their_line(tmp_path, capsys):
    Q = float_forward(load_example())["layer1.head1.Q"]
    text = [rounded(x, 3) for x in Q.ravel()]
    correct, text[5] = text[5], "9.999"  # row 2, column 1: wrong
    doc = tmp_path / "post.md"
    doc.write_text("Intro.\n\n```python\nprint(np.round(Q, 3))\n"
                   f"# [[{text[0]} {text[1]}]\n"
                   f"#  [{text[2]}\n"  # a row wrapped over two lines: its first line
                   f"#   {text[3]}]\n"
                   f"#  [{text[4]} {text[5]}]\n"
                   f"#  [{text[6]} {text[7]}]]\n```\n")
    assert main(["check", str(doc), "--name", "Q=layer1.head1.Q"]) == 1
    out = capsys.readouterr().out
    wrong = [line for line in out.splitlines() if "claimed" in line]
    assert wrong == [f"  line 8, q^(1)_1 of 'I' (position 2): claimed 9.999, correct {correct} "
                     f"(exact {wrong[0].split('(exact ')[1]}"]
    assert main(["check", str(doc), "--name", "Q=layer1.head1.Q", "--json"]) == 1
    details = json.loads(capsys.readouterr().out)["claims"][0]["details"]
    assert [(d["row"], d["col"], d["line"]) for d in details] == [(2, 1, 8)]
    assert np.isclose(float(details[0]["correct"]), Q[2, 1], atol=5e-4)
