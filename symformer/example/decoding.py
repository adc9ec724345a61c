"""The optional ``[decoding]`` table: how ``generate`` chooses the next token.

Every number is exact (TOML text read as a rational).  The rules are Hugging Face's
logits processors and warpers, applied in their order: the repetition penalty, the
banned tokens and the end tokens masked before ``min_new_tokens`` (and every token but
a forced one), then temperature, top-k, top-p, min-p; with a ``seed`` the next token is
drawn from what is kept, else it is the exact argmax (greedy).  ``symformer generate``'s
flags override the table's keys one by one.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from symformer.errors import InputError
from symformer.example.fields import Where, no_unknown_keys
from symformer.example.literals import exact_number
from symformer.example.schema import Decoding
from symformer.lazy import sympy

#: The keys of a ``[decoding]`` table (and, with dashes, of ``generate``'s flags).
DECODING_KEYS = ("temperature", "top_k", "top_p", "min_p", "repetition_penalty", "banned",
                 "min_new_tokens", "stop", "forced", "seed", "steps")


def parse_decoding(data: Any, here: Where) -> Decoding:
    """Validate a ``[decoding]`` table (one line naming the file and the key if wrong)."""
    if not isinstance(data, dict):
        raise InputError(f"{here}: must be a table")
    no_unknown_keys(data, set(DECODING_KEYS), here)
    return decoding_settings(data, here)


def decoding_settings(data: dict[str, Any], here: Where | str) -> Decoding:
    """The settings read from ``data`` (a table's keys, or the flags given), checked."""
    out: dict[str, Any] = {}
    for key in ("temperature", "top_p", "min_p", "repetition_penalty"):
        if data.get(key) is not None:
            out[key] = _number(data[key], key, here)
    for key, low in (("top_k", 1), ("min_new_tokens", 0), ("seed", 0), ("steps", 1)):
        if data.get(key) is not None:
            out[key] = _integer(data[key], key, here, low)
    for key in ("banned", "stop"):
        if data.get(key) is not None:
            out[key] = _tokens(data[key], key, here)
    if data.get("forced") is not None:
        out["forced"] = _forced(data["forced"], here)
    return Decoding(**out)


def merged(base: Decoding | None, given: dict[str, Any], here: str) -> Decoding | None:
    """``base`` (an example's ``[decoding]``) with the keys ``given`` (not None) replacing
    its own, read and checked as the table's are; None when neither says anything."""
    given = {k: v for k, v in given.items() if v is not None and v != []}
    if not given:
        return base
    parsed = decoding_settings(given, here)
    return replace(base or Decoding(), **{k: getattr(parsed, k) for k in given})


def _number(value: Any, key: str, here: Where | str) -> sympy.Rational:
    number = exact_number(value, f"{here}: {key}")
    bad = {"temperature": number <= 0, "repetition_penalty": number <= 0,
           "top_p": not 0 < number <= 1, "min_p": not 0 <= number <= 1}[key]
    if bad:
        rule = {"temperature": "positive", "repetition_penalty": "positive",
                "top_p": "in (0, 1]", "min_p": "in [0, 1]"}[key]
        raise InputError(f"{here}: {key} must be {rule}, found {number}")
    return number


def _integer(value: Any, key: str, here: Where | str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InputError(f"{here}: {key} must be an integer >= {low}, found {str(value)[:40]!r}")
    return value


def _tokens(value: Any, key: str, here: Where | str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise InputError(f"{here}: {key} must be a list of tokens, found {str(value)[:40]!r}")
    return tuple(value)


def _forced(value: Any, here: Where | str) -> tuple[tuple[int, str], ...]:
    if not isinstance(value, dict):
        raise InputError(f"{here}: forced must be a table step = token (forced = {{ 1 = "
                         f"\"je\" }}), found {str(value)[:40]!r}")
    out = []
    for step, token in value.items():
        if not str(step).isdigit() or int(step) < 1 or not isinstance(token, str):
            raise InputError(f"{here}: forced: {str(step)[:20]!r} = {str(token)[:20]!r} must "
                             f"be a step number >= 1 and a token")
        out.append((int(step), token))
    return tuple(sorted(out))


def check_tokens(settings: Decoding, vocab: tuple[str, ...], where: str) -> None:
    """Every token the settings name is in the vocabulary the next token is chosen from."""
    named = [("banned", t) for t in settings.banned] + [("stop", t) for t in settings.stop] \
        + [("forced", t) for _, t in settings.forced]
    for key, token in named:
        if token not in vocab:
            raise InputError(f"{where}: {key}: {token[:30]!r} is not in the vocabulary "
                             f"({', '.join(vocab)[:200]})")
