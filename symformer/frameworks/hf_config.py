"""Reading a Hugging Face directory's ``config.json`` and tensors: what every model
family's reader (:mod:`symformer.frameworks.hf_in`, :mod:`symformer.frameworks.hf_bert`)
shares.

A configuration comes from someone else: :class:`Config` hands each reader a key only
as the type it needs (a whole number in its range, a JSON number read exactly, a
string, a flag, a table), and anything else is one line naming the file and the key
(``config.json: n_head = 0: must be a whole number from 1 to 65536``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from symformer.errors import InputError, NotSupportedError
from symformer.example.literals import DecimalText
from symformer.registry import framework_key, norm_module

#: Each family's normalisation, as transformers names the module class its blocks use
#: (GPT-2's and BERT's ``nn.LayerNorm``, Llama's ``LlamaRMSNorm``): the normalisation
#: declaring it (``hf_modules``) is the example's ``layer_norm``.
FAMILY_NORMS = {"gpt2": "LayerNorm", "llama": "LlamaRMSNorm", "mistral": "MistralRMSNorm",
                "qwen2": "Qwen2RMSNorm", "bert": "LayerNorm", "roberta": "LayerNorm",
                "distilbert": "LayerNorm"}


def hf_norm(family: str) -> tuple[str, dict[str, str]]:
    """The example-file key of the ``family``'s normalisation and its weights (the
    example's name -> the module's parameter: ``{"gamma": "weight", ...}``), as the
    normalisation declares them; a module no normalisation declares is refused in one
    line naming it and the family."""
    consumer = f"the Hugging Face import (model_type {family!r})"
    key = framework_key("normalisation", "hf", FAMILY_NORMS[family], consumer)
    return key, norm_module(key, consumer).module_weights


#: The largest width, number of heads or layers a configuration may state.
MAX_SIZE = 1 << 16
#: The most layers a configuration may state.
MAX_LAYERS = 1000
_MISSING = object()


def _shown(value: Any) -> str:
    text = value if isinstance(value, DecimalText) else json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def _is_text(value: Any) -> bool:
    """A JSON string (a number's exact text, :class:`DecimalText`, is not one)."""
    return isinstance(value, str) and not isinstance(value, DecimalText)


class Config:
    """A ``config.json`` object whose keys are read only as the type each reader needs."""

    def __init__(self, data: Any, name: str) -> None:
        if not isinstance(data, dict):
            raise InputError(f"{name}: must be a JSON object of settings, found "
                             f"{type(data).__name__}")
        self.data, self.name = data, name

    def get(self, key: str, default: Any = None) -> Any:
        """The raw value of ``key`` (for refusals that only test whether it is set)."""
        return self.data.get(key, default)

    def __contains__(self, key: str) -> bool:
        return key in self.data

    def items(self):
        """The settings, as the file states them."""
        return self.data.items()

    def _bad(self, key: str, value: Any, need: str) -> InputError:
        return InputError(f"{self.name}: {key} = {_shown(value)}: {need}")

    def whole(self, key: str, default: Any = _MISSING, *, low: int = 1,
              high: int = MAX_SIZE) -> int:
        """``key`` as a whole number from ``low`` to ``high`` (``default`` if absent or
        null; without a default, required)."""
        value = self.data.get(key)
        if value is None:
            if default is _MISSING:
                raise InputError(f"{self.name}: no {key} (a whole number from {low} to "
                                 f"{high} is needed)")
            return default
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise self._bad(key, value, f"must be a whole number from {low} to {high}")
        return value

    def number(self, key: str, default: str) -> int | DecimalText:
        """``key`` as a JSON number, kept as its exact text (``default`` if absent)."""
        value = self.data.get(key)
        if value is None:
            return DecimalText(default)
        if isinstance(value, bool) or not isinstance(value, (int, DecimalText)):
            raise self._bad(key, value, "must be a number")
        return value

    def text(self, key: str, default: Any = _MISSING) -> str:
        """``key`` as a string (``default`` if absent or null)."""
        value = self.data.get(key)
        if value is None and default is not _MISSING:
            return default
        if not _is_text(value):
            raise self._bad(key, value, "must be a string")
        return value

    def flag(self, key: str, default: bool) -> bool:
        """``key`` as true or false (``default`` if absent or null)."""
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self._bad(key, value, "must be true or false")
        return value

    def table(self, key: str) -> dict[str, Any]:
        """``key`` as a table (an empty one if absent or null)."""
        value = self.data.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self._bad(key, value, "must be a table")
        return value

    def names(self, key: str) -> list[str]:
        """``key`` as a list of strings (empty if absent or null)."""
        value = self.data.get(key)
        if value is None:
            return []
        if not isinstance(value, list) or not all(_is_text(v) for v in value):
            raise self._bad(key, value, "must be a list of strings")
        return value

    def divides(self, width_key: str, width: int, parts_key: str, parts: int) -> int:
        """``width // parts``, refusing a width the parts do not divide."""
        if width % parts:
            raise InputError(f"{self.name}: {width_key} = {width} is not divisible by "
                             f"{parts_key} = {parts}")
        return width // parts


def kept_layers(config: Config, key: str, layers: int | None) -> int:
    """How many blocks to import: the configuration's ``key``, or the first ``layers``."""
    depth = config.whole(key, high=MAX_LAYERS)
    if layers is None:
        return depth
    if not 1 <= layers <= depth:
        raise InputError(f"--layers 0:{layers}: the model has {depth} layer"
                         f"{'s' if depth != 1 else ''} ({config.name}: {key} = {depth})")
    return layers


def tensor(weights: Mapping[str, np.ndarray], name: str, prefixes: Sequence[str],
           shape: Sequence[int | None] | None = None) -> np.ndarray:
    """The tensor ``name`` under the first of ``prefixes`` that holds it, of ``shape``
    (None in it: any size) when given."""
    for prefix in prefixes:
        if prefix + name in weights:
            array = weights[prefix + name]
            if shape is not None and (len(shape) != array.ndim or any(
                    want is not None and want != got for want, got in zip(shape, array.shape))):
                want = "x".join("?" if s is None else str(s) for s in shape)
                raise InputError(f"{_file(weights)}: {prefix + name} has shape "
                                 f"{'x'.join(map(str, array.shape)) or 'scalar'}, expected "
                                 f"{want} (from config.json)")
            return array
    raise InputError(f"{_file(weights)}: no tensor {name!r}")


def tie_embeddings(config: Config, default: bool) -> bool:
    """``tie_word_embeddings``: whether the head is the embedding table when the file
    stores no head of its own (``default``: the model type's, as transformers has it)."""
    return config.flag("tie_word_embeddings", default)


def missing_head(weights: Mapping[str, np.ndarray], name: str, config: Config) -> InputError:
    """The refusal of an untied model whose file lacks its head ``name``: transformers
    would draw that head at random, so no logits of it are the model's."""
    stated = "sets" if config.get("tie_word_embeddings") is not None else "leaves at its " \
        "default for this model type"
    return InputError(f"{_file(weights)}: no tensor {name!r}, and {config.name} {stated} "
                      f"tie_word_embeddings = false: the model's head is missing (not its "
                      f"embedding table; transformers would draw it at random)")


def _file(weights: Mapping[str, np.ndarray]) -> str:
    """How messages name a weights file: its path when it knows it."""
    return getattr(weights, "name", "model.safetensors")


def has_tensor(weights: Mapping[str, np.ndarray], name: str, prefixes: Sequence[str]) -> bool:
    """True when a tensor ``name`` sits under one of ``prefixes``."""
    return any(p + name in weights for p in prefixes)


def refuse(config: Config, checks: dict[str, str]) -> None:
    """Refuse every configured feature that symformer does not compute."""
    for key, what in checks.items():
        value = config.get(key)
        if value not in (None, False, 0, "0", [], {}):
            raise NotSupportedError(f"{config.name}: {key} = {_shown(value)}: "
                                    f"{what} is not supported")


def hf_activation(config: Config, key: str) -> str:
    """The symformer activation of the configuration's ``key`` (the activation declaring
    it in ``hf_names``), or a refusal naming the key and the value."""
    name = config.get(key)
    return framework_key("activation", "hf", name if _is_text(name) else None,
                         f"{config.name}: {key}", _shown(name))
