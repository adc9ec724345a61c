"""check on the numbers worked examples print: a scalar as a bare number, inputs and
reader rounding from some printed rows, why lines citing only the tables that feed
the stage, the max-subtracted softmax and truncation named as conventions.  Each
reference is worked by hand (exact fractions) or by mpmath."""

from __future__ import annotations

import json
import tomllib
from fractions import Fraction

import mpmath
from test_side_stages import mids, run_cli

from symformer import derive
from symformer.example import load_example
from symformer.example.loader import builtin_text

mpmath.mp.dps = 40


def check(tmp_path, text: str) -> tuple[int, dict]:
    claims = tmp_path / "claims.toml"
    claims.write_text(text)
    code, out = run_cli(["check", str(claims), "--json"])
    return code, json.loads(out) if code != 2 else out


def by_name(doc: dict) -> dict[str, dict]:
    return {c["name"]: c for c in doc["claims"]}


def hand_q() -> list[list[mpmath.mpf]]:
    """Head 1's queries of the built-in example by mpmath: (embedding + sinusoid) W_Q."""
    data = tomllib.loads(builtin_text())
    table = dict(zip(data["vocab"], data["embeddings"]))
    W = [[mpmath.mpf(Fraction(str(v)).numerator) / Fraction(str(v)).denominator for v in r]
         for r in data["layer"][0]["head"][0]["W_Q"]]
    rows = []
    for p, token in enumerate(data["tokens"]):
        pe = [f(mpmath.mpf(p) / 10000 ** (mpmath.mpf(i - i % 2) / 4))
              for i, f in enumerate((mpmath.sin, mpmath.cos) * 2)]
        x = [e + q for e, q in zip(table[token], pe)]
        rows.append([mpmath.fsum(x[c] * W[c][j] for c in range(4)) for j in range(2)])
    return rows


def test_a_scalar_claimed_as_a_bare_number(tmp_path):
    """1/√d_k = 1/√2 = 0.70710678…: 0.7071 is right, 0.7072 wrong; a bare number on a
    4x4 stage is one line naming entry."""
    code, doc = check(tmp_path, '[[claim]]\nname = "ok"\nstage = "layer1.head1.scores.inv_scale"\n'
                                'values = 0.7071\n\n[[claim]]\nname = "off"\n'
                                'stage = "layer1.head1.scores.scale"\nvalues = 1.4143\n')
    assert code == 1 and by_name(doc)["ok"]["wrong"] == [] and \
        by_name(doc)["off"]["wrong"] == [[0, 0]], doc  # √2 = 1.41421…
    code, out = check(tmp_path, '[[claim]]\nstage = "layer1.head1.weights"\nvalues = 0.25\n')
    assert code == 2 and "a bare number claims a 1x1 stage" in out and "entry" in out, out


def test_max_subtracted_exponentials_are_named_as_that_convention(tmp_path):
    """e^{s − max s} of row 0 by mpmath, claimed on S.exp: wrong, and the why says it is
    the max-subtracted softmax; the plain e^s is right with no why."""
    g = derive(load_example())
    s = mids(g["layer1.head1.scores"])[0]
    shifted = [mpmath.nstr(mpmath.exp(v - max(s)), 5, min_fixed=-1, max_fixed=2) for v in s]
    plain = [mpmath.nstr(mpmath.exp(v), 5) for v in s]
    code, doc = check(tmp_path, f'[[claim]]\nname = "shifted"\nstage = "layer1.head1.weights.exp"\n'
                                f'rows = [0]\ndecimals = 4\nvalues = [[{", ".join(shifted)}]]\n\n'
                                f'[[claim]]\nname = "plain"\nstage = "layer1.head1.weights.exp"\n'
                                f'rows = [0]\ndecimals = 3\nvalues = [[{", ".join(plain)}]]\n')
    claims = by_name(doc)
    assert claims["plain"]["wrong"] == [] and claims["shifted"]["wrong"], doc
    assert any("max-subtracted softmax" in why and "layer1.head1.weights.shifted_exp" in why
               for why in claims["shifted"]["explanations"]), claims["shifted"]


def test_truncation_is_named_as_a_convention(tmp_path):
    """q of every token by mpmath, cut off at 2 decimals (toward zero) by mpmath: the
    truncated table is wrong where rounding differs, and the why names truncation; a
    table neither rounded nor truncated gets no such why."""
    q = hand_q()
    cut = [[mpmath.nstr(mpmath.floor(v * 100) / 100, 3, min_fixed=-1, max_fixed=3) for v in r]
           for r in q]
    rows = ", ".join("[" + ", ".join(f"{float(x):.2f}" for x in r) + "]" for r in cut)
    other = ", ".join("[" + ", ".join(f"{float(v) + 0.02:.2f}" for v in r) + "]" for r in q)
    code, doc = check(tmp_path, f'[[claim]]\nname = "cut"\nstage = "layer1.head1.Q"\n'
                                f'values = [{rows}]\n\n[[claim]]\nname = "off"\n'
                                f'stage = "layer1.head1.Q"\nvalues = [{other}]\n')
    claims = by_name(doc)
    assert claims["cut"]["wrong"] and any("truncation" in why for why in
                                          claims["cut"]["explanations"]), claims["cut"]
    assert not any("truncation" in why for why in claims["off"]["explanations"])


def test_a_negative_value_truncates_toward_zero(tmp_path):
    """The first LayerNorm's output of 'I' (position 0) to 30 decimals, truncated toward
    zero by mpmath (−1.2345… -> −1.23): truncation, not floor."""
    g = derive(load_example())
    y = mids(g["layer1.add_norm1"])[0]
    assert any(v < 0 for v in y)
    cut = [f"{float(mpmath.sign(v) * mpmath.floor(abs(v) * 1000) / 1000):.3f}" for v in y]
    assert any(f"{float(v):.3f}" != c for v, c in zip(y, cut))
    code, doc = check(tmp_path, f'[[claim]]\nname = "y"\nstage = "layer1.add_norm1"\n'
                                f'rows = [0]\nvalues = [[{", ".join(cut)}]]\n')
    assert code == 1 and any("truncation" in why for why in doc["claims"][0]["explanations"])


POST_Q = ('[[claim]]\nname = "emb"\nstage = "embeddings"\ndecimals = 2\n'
          'values = [[1, 0, 3, 2], [4, 1, 0, 2], [1, 0, 3, 2], [0, 3, 1, 4]]\n\n'
          '[[claim]]\nname = "inp"\nstage = "input"\nrows = [1]\ndecimals = 2\n'
          'values = [[4.84, 1.54, 0.01, 3.00]]\n\n')


def test_reader_rounding_from_a_printed_row_cites_only_what_feeds_the_stage(tmp_path):
    """A reader takes the printed row of 'think' (4.84, 1.54, 0.01, 3.00) times W_Q by
    hand: q_0 = (4.84 + 1.54)/4 = 1.595 exactly, so 1.59 follows from it (the exact
    1.5954… rounds to 1.60).  The embeddings printed before feed the input, which is
    replaced: they are not cited."""
    assert (Fraction("4.84") + Fraction("1.54")) / 4 == Fraction("1.595")
    code, doc = check(tmp_path, POST_Q + '[[claim]]\nname = "Q"\nstage = "layer1.head1.Q"\n'
                                         'rows = [1]\ndecimals = 2\nvalues = [[1.59, 0.75]]\n')
    q = by_name(doc)["Q"]
    assert q["wrong"] == [[1, 0]], q
    reader = [why for why in q["explanations"] if why.startswith("reader rounding")]
    assert reader and reader[0].endswith("as printed (inp)"), q["explanations"]


def test_inputs_from_a_claim_of_some_rows(tmp_path):
    """The step from the printed row of 'think' (the other rows exact): the scores row
    q_1 · k_j with k from the file by hand (1.59 is consistent as printed: 1.595 - 1.59
    is half a unit); 1.62 is inconsistent."""
    code, doc = check(tmp_path, POST_Q + '[[claim]]\nname = "Q"\nstage = "layer1.head1.Q"\n'
                                         'entry = [1, 0]\nvalues = 1.59\n'
                                         'inputs = { "input" = "inp" }\n\n'
                                         '[[claim]]\nname = "Q2"\nstage = "layer1.head1.Q"\n'
                                         'entry = [1, 0]\nvalues = 1.62\n'
                                         'inputs = { "input" = "inp" }\n')
    claims = by_name(doc)
    assert claims["Q"]["wrong"] == [] and claims["Q2"]["wrong"] == [[1, 0]], doc
    code, out = check(tmp_path, POST_Q.replace('rows = [1]', 'rows = [7]') +
                      '[[claim]]\nstage = "layer1.head1.Q"\nentry = [1, 0]\nvalues = 1.59\n'
                      'inputs = { "input" = "inp" }\n')
    assert code == 2 and "Traceback" not in out, out


def test_masked_entries_of_the_log_and_the_shift_are_minus_infinity(tmp_path):
    """Causal row 0 of head 1: α_0 = 1 (log 1 = 0, and 0 − max = 0), every later key
    masked (log 0 = −inf, −inf − max = −inf): "-inf" is claimable there, a number is not."""
    code, doc = check(tmp_path, '[[claim]]\nname = "log"\nstage = "layer1.head1.weights.log"\n'
                                'causal = true\nrows = [0]\n'
                                'values = [[0, "-inf", "-inf", "-inf"]]\n\n'
                                '[[claim]]\nname = "z"\nstage = "layer1.head1.weights.shifted"\n'
                                'causal = true\nrows = [0]\nvalues = [[0, "-inf", "-inf", -99]]\n')
    claims = by_name(doc)
    assert code == 1 and claims["log"]["wrong"] == [] and claims["z"]["wrong"] == [[0, 3]], doc
