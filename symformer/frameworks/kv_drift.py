"""How far PyTorch's own cached forward drifts from the exact values (``crosscheck DIR
--kv-cache``; an example file's module: ``crosscheck EXAMPLE --torch --kv-cache``,
:func:`example_drift`).

The user's Hugging Face causal language model (GPT-2, Llama-style) runs, in ``dtype``,
as generation runs it: a prefill of the prompt with ``use_cache=True``, then one token
at a time with ``past_key_values`` (the tokens the exact greedy run chose, so both
paths read the same sentence).  Forward hooks record every stage each call computes
(:func:`~symformer.frameworks.torch_check.hook_points`: norms, attention and FFN
outputs, each block's output, the final norm, the logits); the calls' rows, stacked,
are the cached path's stage, compared with the exact stage of the whole sentence
(the engine proves cached = uncached exactly, ``generate --kv-cache``: so every
difference is rounding).  The same model's uncached forward of the whole sentence in
the same dtype is compared too, and each step's greedy token of either path is
compared with the exact one (a flip: the float argmax is not the exact argmax, nor
one of an exact tie).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from symformer.errors import InputError
from symformer.example.schema import Example
from symformer.frameworks import require_torch
from symformer.frameworks.torch_check import StageError, hook_points, stage_error


@dataclass(frozen=True)
class Flip:
    """One step's greedy token: the exact one (several: a tie) and each float path's."""

    step: int
    exact: tuple[str, ...]
    cached: str
    uncached: str

    @property
    def cached_flipped(self) -> bool:
        """True when the cached path's argmax is not the exact one."""
        return self.cached not in self.exact

    @property
    def uncached_flipped(self) -> bool:
        """True when the uncached path's argmax is not the exact one."""
        return self.uncached not in self.exact


@dataclass
class DriftReport:
    """Per stage, the cached and the uncached path's worst error; per step, the flips."""

    cached: list[StageError] = field(default_factory=list)
    uncached: list[StageError] = field(default_factory=list)
    flips: list[Flip] = field(default_factory=list)
    tokens: tuple[str, ...] = ()


def cached_drift(model: Any, example: Example, dtype: str, steps: int,
                 max_work: int | None = None) -> DriftReport:
    """The report of :mod:`this module <symformer.frameworks.kv_drift>` for ``model`` (a
    Hugging Face causal LM loaded from the directory ``example`` was imported from) on
    ``example``'s sentence and ``steps`` greedy steps."""
    import copy

    torch = require_torch()
    if example.lm_head is None or not hasattr(model, "generate"):
        raise InputError("--kv-cache: a causal language model (GPT-2, Llama-style) has a "
                         "cache to check; this model has no next-token head")
    kind = getattr(torch, dtype)
    if any(p.dtype != kind for p in model.parameters()):
        model = copy.deepcopy(model).to(kind)
    return _drift(example, dtype, steps, max_work,
                  lambda calls, cache: _recorded(model, calls, cache))


def example_drift(example: Example, dtype: str, steps: int, max_work: int | None = None
                  ) -> DriftReport:
    """The report for an example file's own PyTorch module (``export --format torch``,
    ``crosscheck EXAMPLE --torch --kv-cache``) in ``dtype``: its forward with a cache
    (``Model.forward(ids, cache)``: a prefill, then one token a call) against the exact
    values, and its forward without.  A decoder-only language model (``[lm_head]``,
    causal): an encoder-decoder's cache is its decoder's, which the module does not
    run one token at a time."""
    torch = require_torch()
    from symformer.frameworks.torch_out import model_class

    if example.lm_head is None or example.decoder is not None:
        raise InputError(f"{example.source}: --kv-cache runs a decoder-only language model "
                         f"([lm_head]) one token at a time; this example is not one (its "
                         f"exact cache: generate EXAMPLE --kv-cache)")
    # generation derives a language model causally, whatever the example's causal says
    model = model_class(dataclasses.replace(example, causal=True))(dtype=getattr(torch, dtype))

    def recorded(calls: list[list[int]], cache: bool) -> dict[str, Any]:
        store: dict | None = {} if cache else None
        seen: dict[str, list[Any]] = {}
        for ids in calls:
            for name, value in model(ids, cache=store).items():
                seen.setdefault(name, []).append(value.detach().reshape(-1, value.shape[-1]))
        return {name: torch.cat(rows) for name, rows in seen.items()
                if len({r.shape[-1] for r in rows}) == 1}  # scores: a row per key, not stacked
    return _drift(example, dtype, steps, max_work, recorded)


def _drift(example: Example, dtype: str, steps: int, max_work: int | None,
           recorded: Callable[[list[list[int]], bool], dict[str, Any]]) -> DriftReport:
    """The report from ``recorded(calls, cache)`` (each stage's rows over the calls,
    stacked; with ``cache`` the calls after the first read the cache) on the exact
    greedy run's sentence: a prefill then one call a token, and one uncached call."""
    torch = require_torch()
    from symformer.blocks import generate

    chosen = generate(example, steps, max_work=max_work)
    g = chosen[-1].derivation  # the whole sentence fed: prompt + every chosen but the last
    ids = list(g.example.token_ids)
    vocab = example.vocab
    prompt = len(example.token_ids)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one order of summation, as module_crosscheck
    try:
        with torch.no_grad():
            cached = recorded([ids[:prompt]] + [[t] for t in ids[prompt:]], True)
            uncached = recorded([ids], False)
    finally:
        torch.set_num_threads(threads)
    report = DriftReport(tokens=tuple(vocab[j] for j in ids))
    for name in cached:  # a stage of every position (not next_token's last row alone)
        if name in g and name in uncached and cached[name].shape[0] == g[name].shape[0]:
            report.cached.append(stage_error(name, g, cached[name], dtype))
            report.uncached.append(stage_error(name, g, uncached[name], dtype))
    for t, step in enumerate(chosen, start=1):
        row = prompt + t - 2
        report.flips.append(Flip(t, tuple(step.choice.tokens),
                                 vocab[int(cached["logits"][row].argmax())],
                                 vocab[int(uncached["logits"][row].argmax())]))
    return report


def _recorded(model: Any, calls: list[list[int]], cache: bool) -> dict[str, Any]:
    """Every hooked stage's rows over the forward calls (each call's ``input_ids``; with
    ``cache``, each after the first reads the ``past_key_values`` the one before
    returned), stacked, and the logits."""
    import torch

    seen: dict[str, list[Any]] = {}
    handles = []
    for name, module in hook_points(model).items():
        def hook(_m: Any, _i: Any, out: Any, name: str = name) -> None:
            out = out[0] if isinstance(out, tuple) else out
            seen.setdefault(name, []).append(out.detach().reshape(-1, out.shape[-1]))
        handles.append(module.register_forward_hook(hook))
    past = None
    # transformers 5 names the cache ``cache`` (``past_key_values`` before, deprecated)
    key = "cache" if "cache" in inspect.signature(model.forward).parameters \
        else "past_key_values"
    try:
        for ids in calls:
            out = model(torch.tensor([ids]), **{key: past}, use_cache=cache)
            past = getattr(out, key) if cache else None
            seen.setdefault("logits", []).append(out.logits[0])
    finally:
        for handle in handles:
            handle.remove()
    return {name: torch.cat(rows) for name, rows in seen.items()}
