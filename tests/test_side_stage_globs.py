"""A glob over side stages (`derive --stage 'layer1.head1.Q_rot.*'`) selects what
`derive --list --all` lists under it; a glob matching nothing is still refused."""

from __future__ import annotations

import fnmatch
import re

from symformer.cli import main


def test_a_glob_over_side_stages_selects_what_list_all_lists(capsys):
    assert main(["derive", "llama_style", "--list", "--all"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()
              if line.strip()]
    wanted = [n for n in listed if fnmatch.fnmatchcase(n, "layer1.head1.Q_rot.*")]
    assert wanted  # RoPE's side stages
    assert main(["derive", "llama_style", "--stage", "layer1.head1.Q_rot.*"]) == 0
    shown = re.findall(r"^(\S+)  \(\d+x\d+\)$", capsys.readouterr().out, re.M)
    assert shown == wanted


def test_a_glob_matching_nothing_is_refused(capsys):
    assert main(["derive", "llama_style", "--stage", "layer1.head1.nothing.*"]) == 2
    assert "unknown stage" in capsys.readouterr().err
