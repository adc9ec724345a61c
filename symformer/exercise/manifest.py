"""``manifest.toml``: what ``symformer grade`` reads (format 1, see docs/exercises.md)."""

from __future__ import annotations

import json
from fractions import Fraction

#: The manifest's format number.
FORMAT = 1


def manifest_text(*, template: str, seed: int, decimals: int, margin: Fraction, token: int,
                  asked: list[str], ids: list[str], path: bool = False) -> str:
    """The manifest: the exercise table, then one ``[[variant]]`` per variant; ``path``:
    only the entries of the token's path are asked (``path = "token"``)."""
    names = ",\n".join(f"    {json.dumps(a)}" for a in asked)
    lines = ["[exercise]", f"format = {FORMAT}", f"template = {json.dumps(template)}",
             f"seed = {seed}", f"decimals = {decimals}",
             f"margin = {json.dumps(str(margin))}", f"token = {token}"]
    if path:  # asked: the entries of the token's path, not every entry
        lines += ['path = "token"']
    lines += [f"asked = [\n{names},\n]"]
    for vid in ids:
        lines += ["", "[[variant]]", f"id = {json.dumps(vid)}",
                  f"example = {json.dumps(f'{vid}/example.toml')}"]
    return "\n".join(lines) + "\n"
