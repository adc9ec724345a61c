"""Sheets refuse, in one line naming the stage and its kind, what a sheet cannot ask
(sheets3): a stage whose rows are not the sentence's positions (the next token's
argmax over the vocabulary has one row, the last position's)."""

from __future__ import annotations

import pytest

from symformer.cli import main
from symformer.errors import InputError
from symformer.exercise import SheetRequest, make_exercise


def test_next_token_is_refused_in_one_line_naming_it():
    with pytest.raises(InputError) as caught:
        make_exercise(SheetRequest("decoding_lesson", 1, 1, ask=("next_token",)))
    text = str(caught.value)
    assert "\n" not in text
    assert "--ask next_token" in text and "'argmax'" in text and "decoding_lesson" in text


def test_the_cli_exits_2_without_a_traceback(tmp_path, capsys):
    code = main(["exercise", "decoding_lesson", "--variants", "1", "--seed", "1",
                 "--out", str(tmp_path / "x"), "--ask", "next_token", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err and "internal error" not in err
    assert not (tmp_path / "x").exists()


def test_a_row_the_given_mask_drops_is_not_asked():
    """moe_dropout's attention mask drops "cat"'s whole row ([0, 0], by hand)."""
    request = SheetRequest("moe_dropout", 1, 1, ask=("layer1.attention.output.dropout",))
    with pytest.raises(InputError) as caught:
        make_exercise(request)
    text = str(caught.value)
    assert "\n" not in text and "(row 1) is 0" in text and "'dropout'" in text


def test_a_template_weight_of_0_is_not_a_structural_0():
    """decoding_lesson's W_V = 0 makes its template's V row 0, but variants draw W_V."""
    from symformer.blocks import derive
    from symformer.example.loader import packaged_examples, parse_example
    from symformer.exercise.cells import check_work, token_path

    path = packaged_examples()["decoding_lesson"]
    g = derive(parse_example(path.read_text(), str(path)))
    assert all(v == 0 for v in g.local("layer1.head1.V"))   # the template's zeros ...
    check_work(g, token_path(g, ["layer1.head1.V", "layer1.head1.output"], 1), "t")  # ... pass
