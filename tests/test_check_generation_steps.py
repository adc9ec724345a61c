"""``check`` on a claims file whose ``[decoding]`` table gives no ``steps``: the run is
generated as far as the latest claimed step, whichever claim comes first (a claim on
step 3 after one on step 1 was "unknown stage 'step3.kept'").  The expected kept sets
are ``generate``'s own JSON for the same rule and seed, and a wrong set is judged
wrong: the verdicts are over what was compared."""

from __future__ import annotations

import json

from symformer.cli import main

RULE = """
[decoding]
temperature = 0.7
top_p = 0.9
seed = 1
"""


def _kept(capsys, steps: int) -> list[list[int]]:
    assert main(["generate", "gpt2_style", "--temperature", "0.7", "--top-p", "0.9",
                 "--seed", "1", "--steps", str(steps), "--json", "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out)
    return [[round(float(x)) for x in s["decoding"]["stages"][f"step{t}.kept"][0]]
            for t, s in enumerate(out["steps"], 1)]


def test_a_later_step_after_an_earlier_one(tmp_path, capsys):
    kept = _kept(capsys, 3)
    wrong = [1 - x for x in kept[1]]
    claims = tmp_path / "claims.toml"
    claims.write_text(RULE + "".join(
        f'\n[[claim]]\nstage = "step{t}.kept"\nvalues = [{values}]\n'
        for t, values in ((1, kept[0]), (3, kept[2]), (2, wrong))), encoding="utf-8")
    assert main(["check", str(claims), "gpt2_style", "--quiet"]) == 1
    out = capsys.readouterr().out
    assert "step1.kept -> step1.kept" in out and "step3.kept -> step3.kept" in out
    assert out.count("all right") == 2 and f"{10} of {15} numbers correct" in out
