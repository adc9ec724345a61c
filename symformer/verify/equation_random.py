"""Random examples of an equation claim: the example's file with its numbers drawn anew.

An equation is judged on the example and on a few random examples of the same shape
and conventions, so that a wrong equation cannot pass by coincidence at one example's
numbers: embeddings and weights drawn as exercise sheets draw theirs
(:mod:`symformer.exercise.draw`), every normalisation's gain and shift, an mse target,
an ``[attention]`` table's Q, K, V and a given dL/dO, an optimiser lesson's start
values -- exact small rationals, from a fixed seed (the same examples on every machine).
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from pathlib import Path

from symformer.blocks import derive
from symformer.engine import Derivation
from symformer.errors import InputError
from symformer.example import Example
from symformer.example.loader import builtin_text, example_from_dict, read_text_file, read_toml
from symformer.exercise.settings import Range

#: Seed of the random examples' draws (the same examples on every machine).
SEED = 31


def random_derivation(example: Example, variant: int, causal: bool) -> Derivation | None:
    """Random example ``variant`` of ``example``, derived (None: nothing to redraw)."""
    from symformer.exercise.draw import Stream, draw
    from symformer.exercise.settings import Settings
    if example.source == "<built-in>":
        text = builtin_text()
    elif Path(example.source).is_file():
        text = read_text_file(Path(example.source), "an example file")
    else:
        return None
    data = read_toml(text, example.source)
    data = {k: v for k, v in data.items() if k not in ("claim", "equation", "train")}
    stream = Stream(SEED, variant, 0)
    drawn = _norm_weights(draw(data, Settings(), stream), stream)
    if isinstance(data.get("objective"), dict):  # an optimiser lesson: new start values
        drawn = {**drawn, "objective": _start_values(data["objective"], stream)}
    if isinstance(data.get("attention"), dict):  # given Q, K, V: each drawn anew
        drawn = {**drawn, "attention": {
            key: _redrawn(value, stream) if key in ("Q", "K", "V") else value
            for key, value in data["attention"].items()}}
    loss = drawn.get("loss")
    if isinstance(loss, dict) and isinstance(loss.get("target"), list):
        choices = _TARGETS.entries()
        drawn["loss"] = {**loss, "target": [[choices[stream.below(len(choices))]
                                             for _ in row] for row in loss["target"]]}
    if isinstance(loss, dict) and isinstance(loss.get("gradient"), list):  # dL/dO given
        drawn["loss"] = {**drawn["loss"], "gradient": _redrawn(loss["gradient"], stream)}
    if drawn == data:
        return None
    gains = _with_gains(drawn, example, stream)
    other = None
    for candidate in (gains, drawn):
        try:
            other = example_from_dict(candidate, f"random example {variant}")
            break
        except InputError:
            continue
    if other is None:
        return None
    other = replace(other, source=f"random example {variant}")
    return derive(other, causal=causal)


#: A normalisation's gain and shift drawn for random examples (exercise sheets keep
#: the template's; an equation with the gain on the wrong index would pass at γ = 1).
_GAINS = Range(Fraction(1, 2), Fraction(3, 2), Fraction(1, 4))
_SHIFTS = Range(Fraction(-1, 2), Fraction(1, 2), Fraction(1, 4))


#: An objective's start values in random examples (an optimiser lesson's θ_0).
_STARTS = Range(Fraction(-2), Fraction(2), Fraction(1, 4))


def _start_values(table: dict, stream) -> dict:
    """An ``[objective]`` table with each parameter's start value (a number, or a list
    of numbers) drawn anew; the objective ``f`` kept."""
    choices = _STARTS.entries()

    def one() -> object:
        return choices[stream.below(len(choices))]

    out = {}
    for key, value in table.items():
        if key == "f" or isinstance(value, bool):
            out[key] = value
        elif isinstance(value, (int, float, str)):
            out[key] = one()
        elif isinstance(value, list) and all(isinstance(v, (int, float, str))
                                             and not isinstance(v, bool) for v in value):
            out[key] = [one() for _ in value]
        else:
            out[key] = value
    return out


def _redrawn(rows: object, stream) -> object:
    """A given matrix (rows of numbers) with every entry drawn anew (:data:`_TARGETS`'s
    range, halves from -1 to 1, and never all zero); anything else as it is."""
    if not (isinstance(rows, list) and rows and all(isinstance(r, list) for r in rows)):
        return rows
    choices = [c for c in _TARGETS.entries() if c != 0] + list(_TARGETS.entries())
    return [[choices[stream.below(len(choices))] for _ in row] for row in rows]


#: An mse target's entries in random examples.
_TARGETS = Range(Fraction(-1), Fraction(1), Fraction(1, 2))


def _with_gains(data: dict, example: Example, stream) -> dict:
    """``data`` with a gain (and shift) for every normalisation that takes the default
    (1 and 0: an equation with a gain on the wrong index would pass there)."""
    layers = data.get("layer")
    if not isinstance(layers, list) or len(layers) != len(example.layers):
        return data
    gains, shifts = _GAINS.entries(), _SHIFTS.entries()
    out = []
    for table, layer in zip(layers, example.layers):
        table = dict(table)
        if layer.norm != "none":
            for which in (1, 2):
                if f"gamma_{which}" not in table:
                    table[f"gamma_{which}"] = [gains[stream.below(len(gains))]
                                               for _ in range(example.d_model)]
                if layer.layer_norm != "rms" and f"beta_{which}" not in table:
                    table[f"beta_{which}"] = [shifts[stream.below(len(shifts))]
                                              for _ in range(example.d_model)]
        out.append(table)
    return {**data, "layer": out}


def _norm_weights(data: object, stream) -> object:
    """``data`` with every ``gamma*``/``beta*`` list redrawn (in file order)."""
    if isinstance(data, list):
        return [_norm_weights(v, stream) for v in data]
    if not isinstance(data, dict):
        return data
    out = {}
    for key, value in data.items():
        if key.startswith(("gamma", "beta")) and isinstance(value, list) and all(
                isinstance(v, (int, str)) and not isinstance(v, bool) for v in value):
            choices = (_GAINS if key.startswith("gamma") else _SHIFTS).entries()
            out[key] = [choices[stream.below(len(choices))] for _ in value]
        else:
            out[key] = _norm_weights(value, stream)
    return out


# -- helpers ------------------------------------------------------------------------
