"""symformer prove: identities on the built-in and random examples; false ones reported."""

from __future__ import annotations

import json
from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from symformer import parse_example
from symformer.cli import main
from symformer.verify.prove import CERTIFIED, FALSE, PROVED, prove_all


def by_name(facts):
    return {f.name: f for f in facts}


def test_builtin_example(builtin_prove_json) -> None:
    status, out = builtin_prove_json
    assert status == 0
    facts = {f["name"]: SimpleNamespace(**f) for f in json.loads(out)["facts"]}
    for name in ["layer1.head1.weights.row_sums", "layer1.head2.weights.row_sums (causal)",
                 "masked_weights_zero", "last_token_unchanged", "layer1.add_norm1.mean",
                 "layer1.add_norm2.variance", "pe_bounded"]:
        assert facts[name].status == PROVED, facts[name]
    assert facts["repeated_tokens_differ"].status == CERTIFIED
    # eps = 1e-6 > 0: the variance is sigma^2/(sigma^2+eps), not 1
    assert facts["layer1.add_norm1.unit_variance"].status == FALSE


def _example(tokens, weights, positional="sinusoidal", layers=1, layer_norm="biased") -> str:
    w = [[f'"{v}"' for v in row] for row in weights]
    m2 = "[" + ", ".join("[" + ", ".join(r[:2]) + "]" for r in w[:3]) + "]"
    layer = f"""
[[layer]]
W_1 = {m2}
b_1 = [0, "-1/3"]
W_2 = [[1, 0, 1], [0, 1, "1/2"]]
b_2 = [0, 0, 0]
[[layer.head]]
W_Q = {m2}
W_K = [[1, 0], [0, 1], [1, 1]]
W_V = [[0, 1, 0], [1, 0, 0], [0, 0, 1]]
"""
    return f"""
tokens = {json.dumps(tokens)}
vocab = ["a", "b", "c"]
embeddings = [[1, 0, 2], [0, 1, 1], [2, 2, 0]]
positional_encoding = "{positional}"
layer_norm = "{layer_norm}"
""" + layer * layers


@settings(max_examples=6, deadline=None)
@given(tokens=st.lists(st.sampled_from(["a", "b", "c"]), min_size=2, max_size=3),
       weights=st.lists(st.lists(st.integers(-3, 3), min_size=3, max_size=3),
                        min_size=3, max_size=3),
       layer_norm=st.sampled_from(["biased", "unbiased"]))
def test_random_examples(tokens, weights, layer_norm) -> None:
    facts = prove_all(parse_example(_example(tokens, weights, layer_norm=layer_norm)))
    for f in facts:
        if f.name.endswith(".unit_variance"):
            assert f.status == FALSE
        else:
            assert f.status in (PROVED, CERTIFIED, "vacuous"), f


def test_false_facts_reported() -> None:
    # Without positional encoding the two "a" rows are exactly equal.
    facts = by_name(prove_all(parse_example(_example(["a", "b", "a"], [[1, 0, 0]] * 3,
                                                     positional="none"))))
    assert facts["repeated_tokens_differ"].status == FALSE
    # Two blocks: the first block's masked rows change the second block's keys, so the
    # fact is stated (and proved) for the first block only, where it is a theorem.
    two = by_name(prove_all(parse_example(_example(["a", "b", "c"], [[1, 2, 0]] * 3,
                                                   layers=2))))
    assert two["last_token_unchanged"].status == PROVED
    assert "first block (layer1.add_norm2)" in two["last_token_unchanged"].statement


def test_cli(builtin_prove_json) -> None:
    status, out = builtin_prove_json
    assert status == 0
    data = json.loads(out)
    assert {f["status"] for f in data["facts"]} >= {PROVED, FALSE}


def test_prove_asks_each_operation_for_its_facts(monkeypatch, capsys) -> None:
    """A fact an operation states is reported (and decides the exit status) unchanged."""
    import symformer.cli.prove
    from symformer.ops import PositionalEncoding
    from symformer.ops.facts import Fact

    asked = []

    def planted(self, stage):
        asked.append(stage.name)
        return [Fact("pe_bounded", "positional encodings lie in [-1, 1]", FALSE, "planted")]

    monkeypatch.setattr(PositionalEncoding, "facts", planted)
    proved = []  # what the command's prove_all returned (one run of the built-in's facts)

    def recording(*args, **kwargs):
        proved.extend(prove_all(*args, **kwargs))
        return proved

    monkeypatch.setattr(symformer.cli.prove, "prove_all", recording)
    assert main(["prove"]) == 1
    assert "(planted)" in capsys.readouterr().out
    assert set(asked) == {"positional_encoding"}
    facts = {f.name: f for f in proved}
    assert facts["pe_bounded"].status == FALSE and facts["pe_bounded"].detail == "planted"
