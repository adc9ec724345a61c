"""PyTorch in float32, float64 or bfloat16 against the exact derivation, stage by stage.

The example runs as the PyTorch module :func:`~symformer.frameworks.torch_out.to_torch`
writes (PyTorch's own kernels: matmul, softmax, GELU, ...), its weights rounded to the
dtype, and every stage it returns is compared with the certified values: the worst
error of the stage, relative to the largest exact magnitude in it, in units of the
dtype's machine epsilon (float32 2^-23, bfloat16 2^-7, float64 2^-52), and the decimal
digits it keeps.  The stage that keeps the fewest digits is the one that loses most.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from symformer.errors import NotSupportedError
from symformer.example.schema import Example
from symformer.frameworks import require_torch


@dataclass(frozen=True)
class StageError:
    """One stage's worst error: absolute, relative, in units of epsilon, digits kept."""

    stage: str
    abs_error: float
    rel_error: float
    ulps: float
    digits: float


def torch_crosscheck(example: Example, dtype: str = "float32",
                     derivation: Any = None) -> list[StageError]:
    """Every stage PyTorch computes for ``example`` in ``dtype``, against the exact values
    (``derivation``: the example's, if already derived)."""
    torch = require_torch()
    from symformer.blocks import derive
    from symformer.frameworks.torch_out import model_class

    stages = model_class(example)(dtype=getattr(torch, dtype))()
    g = derivation if derivation is not None else derive(example)
    return [_error(name, g, value, dtype) for name, value in stages.items() if name in g]


def _error(name: str, g: Any, value: Any, dtype: str) -> StageError:
    """A stage's float values (a tensor) against its certified values."""
    torch = require_torch()
    eps = float(torch.finfo(getattr(torch, dtype)).eps)
    balls = g[name].balls(128)
    exact = np.array([[np.nan if b is None else float(b.mid()) for b in row]
                      for row in balls])
    got = value.detach().double().numpy().reshape(exact.shape)
    known = ~np.isnan(exact)
    err = float(np.abs(exact[known] - got[known]).max()) if known.any() else 0.0
    scale = float(np.abs(exact[known]).max()) if known.any() else 0.0
    rel = err / scale if scale else err
    digits = math.inf if rel == 0 else -math.log10(rel)
    return StageError(name, err, rel, rel / eps, digits)


#: A stage's float values against its certified values, for other comparisons
#: (``crosscheck DIR --kv-cache``: :mod:`symformer.frameworks.kv_drift`).
stage_error = _error


def worst_stage(rows: list[StageError]) -> StageError:
    """The stage that keeps the fewest digits."""
    return max(rows, key=lambda r: r.rel_error)


def _bert(model: Any) -> Any:
    """A Hugging Face BERT-family encoder (``BertModel``, ``RobertaModel``,
    ``DistilBertModel``, or the one a head model holds), else None."""
    for name in ("bert", "roberta", "distilbert"):
        model = getattr(model, name, model)
    found = hasattr(model, "embeddings") and (hasattr(model, "encoder")
                                              or hasattr(model, "transformer"))
    return model if found else None


def hook_points(model: Any) -> dict[str, Any]:
    """The submodules of a supported model whose outputs are symformer stages, by name."""
    torch = require_torch()
    if isinstance(model, torch.nn.MultiheadAttention):
        return {"output": model}
    if isinstance(model, torch.nn.TransformerEncoderLayer):
        norms = (("layer1.norm1", "layer1.norm2") if model.norm_first
                 else ("layer1.add_norm1", "layer1.add_norm2"))
        return {"layer1.attention.output": model.self_attn, norms[0]: model.norm1,
                norms[1]: model.norm2, "output": model}
    if isinstance(model, torch.nn.TransformerDecoderLayer):
        p = "decoder.layer1"
        norms = ({f"{p}.norm{k}": getattr(model, f"norm{k}") for k in (1, 2, 3)}
                 if model.norm_first else {f"{p}.add_norm1": model.norm1,
                                           f"{p}.add_norm2": model.norm2})
        # the layer's output (post-norm: norm3's), before any final norm of a stack
        return {f"{p}.self.output": model.self_attn, f"{p}.cross.output": model.multihead_attn,
                **norms, f"{p}.add_norm3": model}
    points: dict[str, Any] = {}
    bert = _bert(model)
    if bert is not None:
        points["embedding_norm"] = bert.embeddings.LayerNorm
        transform = getattr(getattr(model, "cls", None), "predictions", None)
        if transform is not None:  # BertForMaskedLM's head
            points["lm_head.transform_norm"] = transform.transform
        if hasattr(bert, "transformer"):  # DistilBERT
            for i, layer in enumerate(bert.transformer.layer, 1):
                points |= {f"layer{i}.add_norm1": layer.sa_layer_norm,
                           f"layer{i}.ffn.output": layer.ffn,
                           f"layer{i}.add_norm2": layer.output_layer_norm}
            return points
        for i, layer in enumerate(bert.encoder.layer, 1):
            points |= {f"layer{i}.attention.concat": layer.attention.self,
                       f"layer{i}.add_norm1": layer.attention.output,
                       f"layer{i}.ffn.activation": layer.intermediate,
                       f"layer{i}.add_norm2": layer.output}
        return points
    if hasattr(model, "transformer") and hasattr(model.transformer, "h"):  # GPT-2
        for i, block in enumerate(model.transformer.h, 1):
            points |= {f"layer{i}.norm1": block.ln_1, f"layer{i}.attention.output": block.attn,
                       f"layer{i}.norm2": block.ln_2, f"layer{i}.ffn.output": block.mlp,
                       f"layer{i}.add_norm2": block}
        return points | {"final_norm": model.transformer.ln_f}
    if hasattr(model, "model") and hasattr(model.model, "layers"):  # Llama, Mistral, Qwen2
        for i, layer in enumerate(model.model.layers, 1):
            points |= {f"layer{i}.norm1": layer.input_layernorm,
                       f"layer{i}.attention.output": layer.self_attn,
                       f"layer{i}.norm2": layer.post_attention_layernorm,
                       f"layer{i}.ffn.output": layer.mlp, f"layer{i}.add_norm2": layer}
        return points | {"final_norm": model.model.norm}
    raise NotSupportedError(f"{type(model).__name__}: no known stages to hook (supported: "
                            f"MultiheadAttention, TransformerEncoderLayer, "
                            f"TransformerDecoderLayer, GPT-2, Llama-style, BERT-family)")


def _decode(model: Any, example: Example, g: Any, kind: Any) -> None:
    """Run a decoder layer on the example's target rows over its exact memory (the
    encoder's ``output``, certified, rounded to the dtype): the decoder's own error."""
    import torch

    from symformer.frameworks.torch_out import float_rows

    dec = example.decoder
    tgt = torch.tensor(float_rows(dec.embeddings), dtype=kind)[list(dec.token_ids)]
    memory = torch.tensor([[float(b.mid()) for b in row] for row in g["output"].balls(128)],
                          dtype=torch.float64).to(kind)
    batch = 0 if model.self_attn.batch_first else 1
    n = len(dec.token_ids)
    mask = (torch.nn.Transformer.generate_square_subsequent_mask(n, dtype=kind)
            if dec.causal else None)
    model(tgt.unsqueeze(batch), memory.unsqueeze(batch), tgt_mask=mask,
          tgt_is_causal=dec.causal)


def hook_paths(model: Any) -> dict[str, str]:
    """Each hooked stage's module path in ``model`` (``layer1.norm1`` ->
    ``transformer.h.0.ln_1``): the published table of where a stage is read."""
    paths = {id(module): path for path, module in model.named_modules()}
    return {stage: paths.get(id(module), "") or "(the model)"
            for stage, module in hook_points(model).items()}


#: The Hugging Face classes ``crosscheck DIR`` loads, by ``model_type`` (a masked-LM
#: head where the example has one).
_CAUSAL = ("gpt2", "llama", "mistral", "qwen2")
#: The dtypes a model may be run and loaded in, and the attention implementations it
#: may be loaded with (``from_pretrained(attn_implementation=...)``; sdpa is
#: transformers' default).
DTYPES = ("float64", "float32", "float16", "bfloat16")
ATTENTIONS = ("sdpa", "eager")


def load_hf_model(directory: Any, example: Example, dtype: str = "float32",
                  attention: str = "sdpa") -> Any:
    """The user's own Hugging Face model of ``directory``, loaded as a user loads it:
    ``from_pretrained(dtype=torch.<dtype>, attn_implementation=attention)`` (so that
    what the model computes at load time, such as the rotary frequencies, is computed
    as in the user's run), by ``transformers`` from the safetensors file only (never a
    pickle, never remote code), through a private folder of links to the files
    :class:`~symformer.example.model_dir.ModelDir` has checked (so the library reads
    nothing else of the directory)."""
    from symformer.files import private_links

    torch = require_torch()
    if dtype not in DTYPES or attention not in ATTENTIONS:
        raise NotSupportedError(f"load the model in one of {', '.join(DTYPES)} with "
                                f"attention {' or '.join(ATTENTIONS)}, not {dtype!r}, "
                                f"{attention!r}")
    try:  # the submodule itself: transformers' lazy attributes race between threads
        from transformers.models.auto import modeling_auto
        from transformers.utils import logging as hf_logging
    except ImportError:
        raise NotSupportedError("crosscheck of a model directory needs transformers: pip "
                                "install 'symformer[torch]'") from None
    from symformer.example.model_dir import ModelDir

    hf_logging.set_verbosity_error()  # its notes are not the user's
    hf_logging.disable_progress_bar()
    folder = ModelDir(directory)
    config = folder.read_json("config.json")
    kind = config.get("model_type") if isinstance(config, dict) else None
    checked = {name: folder.path(name) for name in ("config.json", "model.safetensors")}
    with private_links(checked) as private:
        if kind in _CAUSAL:
            auto = modeling_auto.AutoModelForCausalLM
        elif example.lm_head is not None:
            auto = modeling_auto.AutoModelForMaskedLM
        else:
            auto = modeling_auto.AutoModel
        try:
            model = auto.from_pretrained(private, use_safetensors=True,
                                         trust_remote_code=False, local_files_only=True,
                                         dtype=getattr(torch, dtype),
                                         attn_implementation=attention)
        except (OSError, ValueError, KeyError, RuntimeError, ImportError) as exc:
            first = (str(exc).splitlines() or [type(exc).__name__])[0][:160]
            raise NotSupportedError(f"{folder.given}: transformers cannot load it ({first})"
                                    ) from None
    return model.eval()


def loaded_as(model: Any) -> str:
    """How a Hugging Face model was loaded, for a table's title:
    ``dtype=torch.bfloat16, attn_implementation='sdpa'``."""
    config = getattr(model, "config", None)
    attention = getattr(config, "_attn_implementation", None) or "?"
    dtype = next((p.dtype for p in model.parameters()), None)
    return f"dtype={dtype}, attn_implementation={attention!r}"


def module_crosscheck(model: Any, example: Example, dtype: str = "float32",
                      derivation: Any = None, max_work: int | None = None
                      ) -> list[StageError]:
    """The user's own ``model`` run in ``dtype`` (eval mode; a copy of it cast to
    ``dtype`` when its weights are in another, else the model itself, its hooks removed
    after) on ``example`` -- the example :func:`~symformer.frameworks.from_torch` or
    ``from_pretrained`` made of it -- and every stage a forward hook reaches (the
    logits of a language model) compared with the exact values.  The model runs on one
    thread (PyTorch's sums are ordered by its thread count: one thread gives the same
    floats serially, on ``--jobs`` processes and on Dask workers).  ``max_work`` bounds
    the whole comparison as ``--max-work`` does (:func:`symformer.blocks.cost.
    crosscheck_work`; 0: no limit)."""
    import copy

    torch = require_torch()
    from symformer.blocks import derive
    from symformer.blocks.cost import crosscheck_work
    from symformer.blocks.work import check_size

    if derivation is None:
        check_size(example, max_work, crosscheck_work(example, model=True), "crosscheck")
    kind = getattr(torch, dtype)
    if any(p.dtype != kind for p in model.parameters()):
        model = copy.deepcopy(model).to(kind)
    training = model.training
    model.eval()
    seen: dict[str, Any] = {}
    handles = []
    for name, module in hook_points(model).items():
        def hook(_m: Any, _i: Any, out: Any, name: str = name) -> None:
            out = out[0] if isinstance(out, tuple) else out
            seen[name] = out.detach().reshape(-1, out.shape[-1])  # a batch of one
        handles.append(module.register_forward_hook(hook))
    g = derivation if derivation is not None else derive(example, max_work=0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one order of summation: the same table in any process
    try:
        with torch.no_grad():
            _run(model, example, g, kind, seen)
    finally:
        torch.set_num_threads(threads)
        for handle in handles:
            handle.remove()
        model.train(training)
    return [_error(name, g, value, dtype) for name, value in seen.items()]


def _run(model: Any, example: Example, g: Any, kind: Any, seen: dict[str, Any]) -> None:
    """One forward pass of ``model`` on ``example``'s sentence in ``kind`` (the logits
    of a language model into ``seen``; the hooks record the rest)."""
    import torch

    from symformer.frameworks.torch_out import float_rows

    if isinstance(model, (torch.nn.MultiheadAttention, torch.nn.TransformerEncoderLayer)):
        x = torch.tensor(float_rows(example.embeddings), dtype=kind)[list(example.token_ids)]
        attention = getattr(model, "self_attn", model)
        x = x.unsqueeze(0 if attention.batch_first else 1)  # a batch of one
        n = len(example.token_ids)
        mask = (torch.nn.Transformer.generate_square_subsequent_mask(n, dtype=kind)
                if example.causal else None)
        if isinstance(model, torch.nn.MultiheadAttention):
            model(x, x, x, attn_mask=mask)
        else:
            model(x, src_mask=mask)
    elif isinstance(model, torch.nn.TransformerDecoderLayer):
        _decode(model, example, g, kind)
    elif _bert(model) is not None:
        types = ({"token_type_ids": torch.tensor([list(example.segments)])}
                 if example.segments else {})
        out = model(torch.tensor([list(example.token_ids)]), **types)
        if example.lm_head is not None and hasattr(out, "logits"):  # the masked-LM head
            seen["logits"] = out.logits[0]
    else:
        seen["logits"] = model(torch.tensor([list(example.token_ids)])).logits[0]
