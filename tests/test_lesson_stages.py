"""The intermediate stages lessons print, exact claimed values, and a rule's printed form.

References, independent of the engine:

* hand-derived values on the ln 2 example of ``test_irrational_inputs`` (scores
  [ln 2, 0, 0], weights [1/2, 1/4, 1/4], head output sqrt(2)/4);
* the cross-entropy rule with positions without a target written -w_i (not -1 w_i).
"""

from __future__ import annotations

import pytest

from symformer import derive
from symformer.errors import InputError
from symformer.example.loader import parse_example
from symformer.verify.check import Checker
from symformer.verify.claims import claims_from_toml, validate
from tests.test_irrational_inputs import LN2


@pytest.fixture(scope="module")
def ln2():
    example = parse_example(LN2, "ln2.toml")
    return example, derive(example)


def verdicts(example, g, text: str) -> dict[str, list[bool]]:
    claims = claims_from_toml(text, "claims.toml")
    validate(claims, g)
    return {r.claim.name: [e.ok for e in r.entries] for r in Checker(example).check_all(claims)}


def test_exact_irrational_claims(ln2):
    """ "log(2)" is right only where the value is exactly ln 2; 1e-30 off is wrong."""
    found = verdicts(*ln2, '''
[[claim]]
name = "scores"
stage = "layer1.head1.scores"
rows = [0]
values = [["log(2)", "0", "0.0"]]
[[claim]]
name = "output"
stage = "layer1.head1.output"
entry = [0, 0]
values = "sqrt(2)/4"
[[claim]]
name = "output off"
stage = "layer1.head1.output"
entry = [0, 0]
values = "sqrt(2)/4 + 1/10^30"
[[claim]]
name = "weights"
stage = "layer1.head1.weights"
rows = [0]
significant = 3
values = [["exp(-log(2))", 0.25, "log(2)/log(4) - 1/4"]]
''')
    assert found == {"scores": [True, True, True], "output": [True], "output off": [False],
                     "weights": [True, True, True]}


def test_irrational_claim_refused_politely(ln2):
    with pytest.raises(InputError, match="not a number"):
        claims_from_toml('[[claim]]\nstage = "output"\nentry = [0, 0]\n'
                         'values = "__import__(1)"\n', "claims.toml")
