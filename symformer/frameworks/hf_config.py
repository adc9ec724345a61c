"""Reading a Hugging Face directory's ``config.json`` and tensors: what every model
family's reader (:mod:`symformer.frameworks.hf_in`, :mod:`symformer.frameworks.hf_bert`)
shares."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from symformer.errors import InputError, NotSupportedError
from symformer.example.numbers import DecimalText

#: Hugging Face's activation names, and symformer's.
_HF_ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh",
                   "gelu": "gelu", "relu": "relu", "silu": "silu", "swish": "silu"}


def tensor(weights: dict[str, np.ndarray], name: str, prefixes: Sequence[str]) -> np.ndarray:
    """The tensor ``name`` under the first of ``prefixes`` that holds it."""
    for prefix in prefixes:
        if prefix + name in weights:
            return weights[prefix + name]
    raise InputError(f"model.safetensors: no tensor {name!r}")


def has_tensor(weights: dict[str, np.ndarray], name: str, prefixes: Sequence[str]) -> bool:
    """True when a tensor ``name`` sits under one of ``prefixes``."""
    return any(p + name in weights for p in prefixes)


def refuse(config: dict[str, Any], checks: dict[str, str]) -> None:
    """Refuse every configured feature that symformer does not compute."""
    for key, what in checks.items():
        value = config.get(key)
        if value not in (None, False, 0, "0", [], {}):
            raise NotSupportedError(f"config.json: {key} = {json.dumps(value, default=str)}: "
                                    f"{what} is not supported")


def hf_activation(config: dict[str, Any], key: str) -> str:
    """The symformer activation of the configuration's ``key``, or a refusal."""
    name = config.get(key)
    if name not in _HF_ACTIVATIONS:
        raise NotSupportedError(f"config.json: {key} = {name!r} is not supported (supported: "
                                f"{', '.join(sorted(_HF_ACTIVATIONS))})")
    return _HF_ACTIVATIONS[name]


def config_number(config: dict[str, Any], key: str, default: str) -> Any:
    """The configuration's number ``key`` as exact decimal text (``default`` if absent)."""
    value = config.get(key, DecimalText(default))
    return value if isinstance(value, (DecimalText, int)) else DecimalText(str(value))
