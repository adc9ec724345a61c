"""A Hugging Face model directory (``config.json`` + ``model.safetensors``) as an example.

No torch: the weights are read from the safetensors file by
:mod:`symformer.example.model_dir`, which trusts nothing in the directory (no link
out of it, every header entry checked, only the tensors used read; bfloat16, which
NumPy lacks, widened to float32 bit for bit), and every weight is kept as the exact
dyadic rational it is (:mod:`symformer.frameworks.weights`).  Numbers of
``config.json`` (``layer_norm_epsilon``, ``rope_theta``) are read from their JSON text
exactly: ``1e-05`` is 1/100000, the value the configuration states (PyTorch itself
adds the nearest float to it); every setting a reader needs is checked for its type
and range (:class:`~symformer.frameworks.hf_config.Config`), and every tensor for the
shape the configuration implies.

Supported: GPT-2 (``gpt2``), Llama-style decoders (``llama``, ``mistral``, ``qwen2``:
RMSNorm, rotary embeddings without scaling, SwiGLU, grouped-query attention), BERT
encoders (``bert``, ``roberta``, ``distilbert``: token types, the embedding LayerNorm,
the masked-LM head; :mod:`symformer.frameworks.hf_bert`).  What a
model has that symformer does not compute is refused with one line naming it; a tensor
of the file that the example does not use is reported (:func:`unused_note`), never
dropped silently.
"""

from __future__ import annotations

import json
import math
import os
import re
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from symformer.blocks.work import check_work
from symformer.errors import InputError, NotSupportedError
from symformer.example.literals import DecimalText
from symformer.example.loader import MAX_FILE_BYTES, example_from_dict
from symformer.example.model_dir import MAX_VOCAB_BYTES, ModelDir, SafeTensors
from symformer.example.schema import Example
from symformer.frameworks.hf_config import (
    MAX_LAYERS,
    Config,
    hf_activation,
    hf_norm,
    kept_layers,
    missing_head,
    refuse,
    tensor,
    tie_embeddings,
)
from symformer.frameworks.hf_tokenizer import vocab_lines
from symformer.frameworks.weights import dyadic_row as row
from symformer.frameworks.weights import dyadic_rows as rows
from symformer.frameworks.weights import example_text, printable, weights_table

#: Operations (about 2 µs of CPU each, :mod:`symformer.blocks.cost`) to start an
#: import, and to convert one weight to its exact text and load it back.
IMPORT_START = 250_000
IMPORT_PER_WEIGHT = 10
#: Operations to read one weight as a float (the safetensors bytes, checked finite).
IMPORT_PER_READ = 0.02
#: The fewest characters a weight takes in the written example ("0, ").
_MIN_WEIGHT_CHARS = 3
#: Tensors a model recomputes rather than learns (masks, rotary frequencies, position
#: ids): not imported, and named as such.
_BUFFERS = re.compile(r"(^|\.)(attn\.bias|attn\.masked_bias|rotary_emb\.inv_freq|"
                      r"position_ids|token_type_ids)$")
#: A layer's tensors are named together: ``transformer.h.1`` (12 tensors).
_LAYER = re.compile(r"(.*?\.\d+)\.")


def from_pretrained(directory: str | Path, tokens: Sequence[int | str] | None = None,
                    segments: Sequence[int] | None = None,
                    max_work: int | None = None, text: str | None = None,
                    layers: int | None = None) -> Example:
    """The exact example of a Hugging Face model directory, on the sentence ``tokens``
    (ids, or token strings of the vocabulary the directory carries) or ``text``
    (tokenized by the directory's own tokenizer: :mod:`.hf_tokenizer`); ``segments``: a
    BERT model's token types (``token_type_ids``; default all 0).

    ``max_work`` bounds the import as ``--max-work`` does (None: SYMFORMER_MAX_WORK or
    the default; 0: no limit); ``layers``: import only the model's first ``layers``
    blocks (its final norm and head then read the last of them).  Tensors of the file
    the example does not use are named in a :class:`UserWarning`."""
    data, comments, source, unused = pretrained_data(directory, tokens, segments, max_work,
                                                     text=text, layers=layers)
    if unused:
        warnings.warn(unused, UserWarning, stacklevel=2)
    return example_from_dict(data, source)  # the same table the file holds, not re-read


def pretrained_text(directory: str | Path, tokens: Sequence[int | str] | None,
                    segments: Sequence[int] | None = None, max_work: int | None = None,
                    progress: Callable[[int, int, str], None] | None = None,
                    text: str | None = None, layers: int | None = None,
                    weights: str = "auto", out: str | Path | None = None
                    ) -> tuple[str, str, str]:
    """The example file's TOML text of a Hugging Face directory, its source name, and
    the note on the file's tensors it does not use ("" when it uses them all).

    ``weights``: ``"inline"`` writes every weight's exact number into the text,
    ``"reference"`` refers to the directory's ``model.safetensors`` (its path relative
    to the example file ``out``'s folder and its SHA-256; copied beside ``out`` when it
    is not in that folder or below: :func:`reference_file`), ``"auto"`` inlines up to
    :data:`INLINE_WEIGHTS` weights.  The note also says where a weights file was
    copied."""
    if weights not in WEIGHT_MODES:
        raise InputError(f"weights must be one of {', '.join(WEIGHT_MODES)}, found "
                         f"{weights!r}")
    data, comments, source, unused = pretrained_data(directory, tokens, segments, max_work,
                                                     progress, text, layers, weights)
    reference = data.pop("_reference")
    if reference is not None:
        with reference as file:
            path, digest, copied = reference_file(ModelDir(directory), file, out)
        written = comments.index("Every weight is the exact dyadic rational the file "
                                 "stores: a decimal where that")
        comments[written:written + 2] = ["Every weight is the exact dyadic rational the "
                                         "file stores. The configuration:"]
        data = {"weights": {"file": path, "sha256": digest}, **weights_table(data, True)}
        comments += ["The weights are read from the file [weights] names, checked "
                     "against its SHA-256:",
                     "each matrix names its tensor there and the rows and columns it "
                     "takes",
                     "(of the tensor's transpose where the file stores W^T).",
                     *([copied] if copied else [])]
        unused = "; ".join(n for n in (unused, copied) if n)
    else:
        data = weights_table(data, False)
    return example_text(data, comments), source, unused


def reference_file(folder: ModelDir, weights: SafeTensors, out: str | Path | None
                   ) -> tuple[str, str, str]:
    """Where an example written to ``out`` finds the weights file: its path relative to
    the example's folder, its SHA-256 and a note ("" or how it was copied).

    An example reads a weights file only in its own folder or below
    (:mod:`symformer.example.weights_file`): a model directory there is referred to
    where it is; any other's file is copied beside the example, as ``NAME.safetensors``
    for ``--out NAME.toml`` (the bytes hashed are those written, read through the open
    descriptor the import read)."""
    from symformer.example.weights_file import relative_inside

    given = Path(out).parent if out is not None else Path(".")
    base = Path(os.path.realpath(given))
    if folder.root.is_relative_to(base):
        path = (folder.root.relative_to(base) / "model.safetensors").as_posix()
        if relative_inside(path):
            return path, weights.sha256(), ""
    if out is None:
        raise InputError(f"{folder.given}: its weights file is not in the current folder "
                         f"or below, where an example given as text reads it; give out= "
                         f"(the example file to write), and it is copied beside it")
    import hashlib

    from symformer.files import write_file

    copy = copied_weights(out)
    if os.path.islink(copy):  # a name the user did not give: never through a link
        raise InputError(f"{copy}: a symbolic link where the example's weights file is to "
                         f"be copied; refused (remove it, or give another --out)")
    contents = weights.contents()
    write_file(copy, contents)
    return copy.name, hashlib.sha256(contents).hexdigest(), (
        f"{weights.name} is outside the example's folder, where an example reads its "
        f"weights file: copied to {copy}")


def copied_weights(out: str | Path) -> Path:
    """Where :func:`reference_file` copies a weights file for the example ``out``:
    ``NAME.safetensors`` beside ``NAME.toml``."""
    out = Path(out)
    return out.parent / (out.stem.replace("\\", "_") + ".safetensors")


#: ``--weights``: how an imported example holds its weights.
WEIGHT_MODES = ("auto", "inline", "reference")
#: ``--weights auto`` writes the weights into the example up to this many (about 3 MB
#: of text), and refers to the weights file above.
INLINE_WEIGHTS = 150_000


def import_work(weights: int, inline: bool = True) -> int:
    """The operations an import of ``weights`` numbers does: converting each to its
    exact text (``inline``), or reading it as the array it is (the rationals are made
    in NumPy when the example is evaluated: :mod:`symformer.example.dyadic`)."""
    per = IMPORT_PER_WEIGHT if inline else IMPORT_PER_READ
    return IMPORT_START + math.ceil(per * weights)


def pretrained_data(directory: str | Path, tokens: Sequence[int | str] | None,
                    segments: Sequence[int] | None = None, max_work: int | None = None,
                    progress: Callable[[int, int, str], None] | None = None,
                    text: str | None = None, layers: int | None = None,
                    weights_mode: str | None = None
                    ) -> tuple[dict[str, Any], list[str], str, str]:
    """The example table of a Hugging Face directory (its weights
    :class:`~symformer.example.dyadic.DyadicMatrix` s), its provenance comments, its
    source name and the note on unused tensors.

    Bounded before a weight is read: the file's floating-point numbers are counted from
    its (checked) header, and an import over the work limit, or (``weights_mode``, the
    example file's ``--weights``: None for none) whose weights written inline could not
    fit the example files' size limit, is refused.  With ``weights_mode``, the table's
    ``"_reference"`` is the open weights file when the example refers to it (not
    inline), else None."""
    folder = ModelDir(directory)
    if isinstance(tokens, str):
        raise InputError(f"tokens: {tokens[:40]!r} is a string; give a list of token ids or "
                         f"names, or text={tokens[:20]!r} to tokenize it with the "
                         f"directory's tokenizer")
    if (tokens is None) == (text is None):
        raise InputError("give the sentence once: tokens (ids or names) or text")
    if text is not None:
        from symformer.frameworks.hf_tokenizer import tokenize

        tokens, _ = tokenize(folder, text)
    if segments is not None and len(segments) != len(tokens):
        raise InputError(f"segments: {len(segments)} token types for {len(tokens)} tokens")
    raw = folder.read_json("config.json")
    if raw is None:
        raise InputError(f"{directory}: no config.json (expected a Hugging Face model "
                         f"directory)")
    config = Config(raw, folder.name("config.json"))
    weights = folder.safetensors()
    handed = False
    try:
        found = _read_model(folder, config, weights, tokens, segments, max_work, progress,
                            text, layers, weights_mode)
        handed = found[0].get("_reference") is weights
        return found
    finally:
        if not handed:  # the referring example's file stays open until it is hashed
            weights.close()


def _read_model(folder: ModelDir, config: Config, weights: SafeTensors,
                tokens: Sequence[int | str], segments: Sequence[int] | None,
                max_work: int | None, progress: Callable[[int, int, str], None] | None,
                text: str | None, layers: int | None, weights_mode: str | None
                ) -> tuple[dict[str, Any], list[str], str, str]:
    """:func:`pretrained_data` once the directory's files are open."""
    count = weights.float_count(skip=lambda name: _past(name, layers))
    reference = weights_mode == "reference" or (weights_mode == "auto"
                                                and count > INLINE_WEIGHTS)
    inline = weights_mode is not None and not reference
    check_work(import_work(count, inline), max_work,
               f"{folder.given}: importing {count:,} weights")
    if inline and count * _MIN_WEIGHT_CHARS > MAX_FILE_BYTES:
        raise NotSupportedError(f"{folder.given}: {count:,} weights would not fit the "
                                f"{MAX_FILE_BYTES // 2**20} MiB an example file may hold "
                                f"written inline; give --weights reference")
    if progress is not None:
        weights.progress = progress
    kind = config.text("model_type", None)
    try:
        data = _family_data(config, weights, len(tokens), segments, kind, layers)
    except (InputError, NotSupportedError) as exc:  # every message names the directory
        if str(exc).startswith(str(folder.given)):
            raise
        raise type(exc)(f"{folder.given}: {exc}") from None
    vocab_size = data["embeddings"].rows
    if not vocab_size:
        raise InputError(f"{weights.name}: the embedding table has no rows")
    vocab = read_vocab(folder, vocab_size)
    data = {"title": "", "tokens": pick_tokens(tokens, vocab, str(folder.given)),
            "vocab": vocab, **data}
    pad = config.whole("pad_token_id", None, low=0, high=2**62)
    if kind == "roberta" and pad is not None and pad < vocab_size \
            and vocab[pad] in data["tokens"]:  # RoBERTa counts positions past padding
        raise NotSupportedError(f"{folder.given}: the padding token {vocab[pad]!r} in the "
                                f"sentence (RoBERTa's positions skip it) is not supported")
    architectures = ",".join(config.names("architectures") or [kind])
    dtype = "/".join(weights.dtypes())
    depth = f"first {layers} of {config.get(_DEPTH_KEYS.get(kind, ''))} layers, " \
        if layers else ""
    data["title"] = printable(f"{architectures} from {folder.given.name} ({depth}{dtype} "
                              f"weights, exact)")
    if segments is not None and "token_type_embeddings" not in data:
        raise NotSupportedError(f"{folder.given}: segments given, but model_type {kind!r} "
                                f"has no token types")
    unused = unused_note(weights)
    comments = [
        f"Imported by `symformer import` from the Hugging Face directory {folder.given}",
        f"(class {architectures}, model_type {kind}, weights {dtype}).",
        *([f"The sentence is the text {text!r}, tokenized by the directory's tokenizer "
           f"({len(tokens)} tokens)."] if text is not None else []),
        "Every weight is the exact dyadic rational the file stores: a decimal where that",
        "is short, else \"p/2^k\". The configuration:",
        *(f"  {k} = {v if isinstance(v, DecimalText) else json.dumps(v)}"
          for k, v in sorted(config.items())
          if not isinstance(v, (dict, list)) or k in ("rope_scaling", "rope_parameters")),
    ]
    if kind in ("bert", "roberta", "distilbert"):
        comments.append("The masked-LM head is [lm_head] (its transform, then the "
                        "vocabulary)." if "lm_head" in data else "The example ends at the "
                        "encoder's output (last_hidden_state).")
    if layers:
        comments.append(f"Only the model's {depth.removesuffix(', ')}: `output` is layer "
                        f"{layers}'s output, not the model's"
                        + ("; the final norm and the head read it." if "lm_head" in data
                           or "final_norm" in data else "."))
    comments += [unused] if unused else []
    if weights_mode is not None:
        data["_reference"] = weights if reference else None
    return data, comments, str(folder.given), unused


def _family_data(config: Config, weights: SafeTensors, n_tokens: int,
                 segments: Sequence[int] | None, kind: str | None, layers: int | None
                 ) -> dict[str, Any]:
    """The example table of the model family ``kind`` (its ``model_type``)."""
    if kind == "gpt2":
        return _gpt2(config, weights, n_tokens, layers)
    if kind in ("llama", "mistral", "qwen2"):
        return _llama(config, weights, n_tokens, layers)
    if kind in ("bert", "roberta", "distilbert"):
        from symformer.frameworks.hf_bert import bert_data  # it reads with this module

        return bert_data(config, weights, n_tokens, segments, kind, layers)
    raise NotSupportedError(f"model_type {printable(str(kind))[:40]!r} is not supported "
                            f"(supported: gpt2, llama, mistral, qwen2, bert, roberta, "
                            f"distilbert)")


#: Where each family's configuration states its number of blocks.
_DEPTH_KEYS = {"gpt2": "n_layer", "llama": "num_hidden_layers", "mistral": "num_hidden_layers",
               "qwen2": "num_hidden_layers", "bert": "num_hidden_layers",
               "roberta": "num_hidden_layers", "distilbert": "n_layers"}
#: A block's tensors: ``transformer.h.3.``, ``model.layers.3.``, ``encoder.layer.3.``.
_LAYER_INDEX = re.compile(r"(?:^|\.)(?:h|layers|layer)\.(\d+)\.")


def _past(name: str, layers: int | None) -> bool:
    """True when ``name`` belongs to a block past the first ``layers`` (None: none is)."""
    found = _LAYER_INDEX.search(name) if layers is not None else None
    return found is not None and int(found.group(1)) >= layers


def unused_note(weights: SafeTensors) -> str:
    """One sentence naming the file's tensors the example does not use ("" if none):
    weights of parts symformer does not import (a pooler, a classifier, layers past
    ``n_layer``), grouped by module, and buffers the model recomputes."""
    left = weights.unused()
    buffers = [k for k in left if _BUFFERS.search(k)]
    groups: dict[str, int] = {}
    for name in (k for k in left if k not in buffers):
        layer = _LAYER.match(name)
        key = layer.group(1) if layer else name.rpartition(".")[0] or name
        groups[key] = groups.get(key, 0) + 1
    parts = []
    if groups:
        count = sum(groups.values())
        listed = [f"{k} ({n} tensors)" if n > 1 else k for k, n in groups.items()]
        shown = ", ".join(listed[:8]) + (f" and {len(listed) - 8} more" if len(listed) > 8
                                         else "")
        parts.append(f"{count} tensor{'s' if count != 1 else ''} of {weights.name} not "
                     f"imported (parts the example does not compute): {shown}")
    if buffers:
        shown = ", ".join(buffers[:3]) + (f" and {len(buffers) - 3} more" if len(buffers) > 3
                                          else "")
        parts.append(f"{len(buffers)} buffer{'s' if len(buffers) != 1 else ''} the model "
                     f"recomputes not read: {shown}")
    return printable("; ".join(parts) + ".") if parts else ""


def read_vocab(folder: ModelDir, size: int) -> list[str]:
    """Token names by id: ``vocab.txt`` (a token per line), ``vocab.json`` or
    ``tokenizer.json``'s model vocabulary, where the directory carries one; ``t17`` for
    an id it does not name (or names twice, or with a character that does not print).

    A vocabulary file that is not what it should be (not UTF-8, not a table of token
    to whole-number id) is refused in one line naming it."""
    names: dict[int, str] = {}
    text = folder.read_bytes("vocab.txt", MAX_VOCAB_BYTES)  # BERT's WordPiece: id = line
    if text is not None:
        try:
            lines = vocab_lines(text.decode("utf-8"))
        except UnicodeDecodeError:
            raise InputError(f"{folder.name('vocab.txt')}: not UTF-8 text") from None
        names = {i: t for i, t in enumerate(lines) if t.isprintable()}
    for file in () if text is not None else ("vocab.json", "tokenizer.json"):
        table = folder.read_json(file, MAX_VOCAB_BYTES)
        if table is None:
            continue
        if file == "tokenizer.json":
            model = table.get("model") if isinstance(table, dict) else None
            table = model.get("vocab") if isinstance(model, dict) else None
            if not isinstance(table, dict):  # a Unigram list, or no vocabulary: names t<k>
                continue
        if not isinstance(table, dict):
            raise InputError(f"{folder.name(file)}: must be a table of token to id")
        for token, i in table.items():
            if isinstance(i, bool) or not isinstance(i, int) or i < 0:
                raise InputError(f"{folder.name(file)}: token {printable(token)[:40]!r} has "
                                 f"the id {printable(str(i))[:20]}; ids are whole numbers >= 0")
            if i < size and token.isprintable():
                names[i] = token
        break
    vocab = [names.get(i, f"t{i}") for i in range(size)]
    seen: set[str] = set()
    for i, name in enumerate(vocab):
        if name in seen:
            vocab[i] = f"t{i}"
        seen.add(vocab[i])
    return vocab


def pick_tokens(tokens: Sequence[int | str], vocab: list[str], where: str) -> list[str]:
    """The sentence as vocabulary names: ids index ``vocab``, strings must be in it."""
    if not tokens:
        raise InputError(f"{where}: give at least one token")
    out = []
    for position, token in enumerate(tokens):
        if isinstance(token, (int, np.integer)) and not isinstance(token, bool):
            if not 0 <= int(token) < len(vocab):
                raise InputError(f"{where}: token id {token} (position {position}) is not in "
                                 f"0..{len(vocab) - 1}")
            out.append(vocab[int(token)])
        elif isinstance(token, str) and token in vocab:
            out.append(token)
        else:
            raise InputError(f"{where}: token {token!r} (position {position}) is not in the "
                             f"vocabulary (give ids, or names such as {vocab[0]!r})")
    return out


def _gpt2(config: Config, w: SafeTensors, n_tokens: int, layers: int | None
          ) -> dict[str, Any]:
    """GPT-2: learned positions, pre-LayerNorm, fused Conv1D c_attn, tied head."""
    refuse(config, {"scale_attn_by_inverse_layer_idx": "scaling attention by 1/layer",
                    "add_cross_attention": "cross-attention"})
    if not config.flag("scale_attn_weights", True):
        raise NotSupportedError("config.json: scale_attn_weights = false is not supported")
    p = ("transformer.", "")
    d, n_head = config.whole("n_embd"), config.whole("n_head")
    hd = config.divides("n_embd", d, "n_head", n_head)
    n_layer = kept_layers(config, "n_layer", layers)
    inner = config.whole("n_inner", 4 * d)
    vec, mat = (d,), (d, d)
    norm_key, norm_weights = hf_norm("gpt2")
    wte = tensor(w, "wte.weight", p, (None, d))
    data: dict[str, Any] = {
        "embeddings": rows(wte, "wte"),
        "positional_encoding": "learned",
        "positional_embeddings": rows(tensor(w, "wpe.weight", p, (None, d)), "wpe"),
        "causal": True, "norm": "pre", "layer_norm": norm_key,
        "activation": hf_activation(config, "activation_function"),
        "eps": config.number("layer_norm_epsilon", "1e-5"),
        "final_norm": True,
        **{f"{name}_f": row(tensor(w, f"ln_f.{attr}", p, vec), f"ln_f.{attr}")
           for name, attr in norm_weights.items()},
    }
    data["lm_head"] = _lm_head(w, wte, config, tie_embeddings(config, True))
    blocks = []
    for i in range(n_layer):
        b = f"h.{i}."

        def t(name: str, shape: tuple[int, ...], b: str = b) -> np.ndarray:
            return tensor(w, b + name, p, shape)

        W, bias = t("attn.c_attn.weight", (d, 3 * d)), t("attn.c_attn.bias", (3 * d,))
        heads = []
        for h in range(n_head):
            head = {}
            for letter, part in (("Q", 0), ("K", 1), ("V", 2)):
                cols = slice(part * d + h * hd, part * d + (h + 1) * hd)
                head[f"W_{letter}"] = rows(W[:, cols], f"{b}attn.c_attn.weight")
                head[f"b_{letter}"] = row(bias[cols], f"{b}attn.c_attn.bias")
            heads.append(head)
        blocks.append({
            "W_O": rows(t("attn.c_proj.weight", mat), f"{b}attn.c_proj.weight"),
            "b_O": row(t("attn.c_proj.bias", vec), f"{b}attn.c_proj.bias"),
            "W_1": rows(t("mlp.c_fc.weight", (d, inner)), f"{b}mlp.c_fc.weight"),
            "b_1": row(t("mlp.c_fc.bias", (inner,)), f"{b}mlp.c_fc.bias"),
            "W_2": rows(t("mlp.c_proj.weight", (inner, d)), f"{b}mlp.c_proj.weight"),
            "b_2": row(t("mlp.c_proj.bias", vec), f"{b}mlp.c_proj.bias"),
            **{f"{name}_{k}": row(t(f"ln_{k}.{attr}", vec), f"{b}ln_{k}.{attr}")
               for k in (1, 2) for name, attr in norm_weights.items()},
            "head": heads,
        })
    data["layer"] = blocks
    return data


def _lm_head(w: SafeTensors, embeddings: np.ndarray, config: Config, tied: bool
             ) -> dict[str, Any]:
    """The head: tied to the embeddings when the configuration ties them and the file
    stores no other head (transformers keeps a stored head that differs), refused
    when it is untied and the file lacks it."""
    if "lm_head.weight" not in w:
        if not tied:
            raise missing_head(w, "lm_head.weight", config)
        return {"tied": True}
    head = tensor(w, "lm_head.weight", ("",), embeddings.shape)
    if tied and np.array_equal(head, embeddings):
        return {"tied": True}
    return {"W_vocab": rows(np.asarray(head).T, "lm_head.weight")}


def _rope_theta(config: Config) -> Any:
    """The rotary base; any rotary scaling (not an exact re-indexing) is refused."""
    params = Config(config.table("rope_parameters"), f"{config.name}: rope_parameters")
    scaling = Config(config.table("rope_scaling"), f"{config.name}: rope_scaling")
    for table in (params, scaling):
        kind = table.text("rope_type", None) or table.text("type", "default")
        if kind != "default":
            raise NotSupportedError(f"config.json: rope scaling {printable(kind)[:40]!r} is "
                                    f"not supported (only plain rotary embeddings)")
    if config.get("partial_rotary_factor") not in (None, 1, DecimalText("1.0")):
        raise NotSupportedError("config.json: partial_rotary_factor (rotating part of each "
                                "head) is not supported")
    if "rope_theta" in params:
        return params.number("rope_theta", "10000")
    return config.number("rope_theta", "10000")


def _llama_biases(config: Config) -> dict[str, bool]:
    """Which projections have a bias, as transformers builds the model: Llama's
    attention as ``attention_bias`` says and its MLP as ``mlp_bias`` (both false by
    default), Qwen2's query, key and value always, Mistral's none.  A bias the model has
    must be in the file; one it has not is never read (transformers ignores it too)."""
    kind = config.text("model_type")
    attention = config.flag("attention_bias", False) if kind == "llama" else kind == "qwen2"
    mlp = config.flag("mlp_bias", False) if kind == "llama" else False
    return {"q_proj": attention, "k_proj": attention, "v_proj": attention,
            "o_proj": attention and kind == "llama", "gate_proj": mlp, "up_proj": mlp,
            "down_proj": mlp}


def _llama(config: Config, w: SafeTensors, n_tokens: int, layers: int | None
           ) -> dict[str, Any]:
    """Llama, Mistral, Qwen2: RMSNorm, RoPE ("half"), SwiGLU, grouped-query attention."""
    refuse(config, {"num_local_experts": "a mixture of experts",
                    "num_experts": "a mixture of experts",
                    "attn_logit_softcapping": "attention logit soft-capping",
                    "final_logit_softcapping": "logit soft-capping",
                    "alibi": "ALiBi"})
    window = config.whole("sliding_window", None, high=2**62)
    if not config.flag("use_sliding_window", True) or (window is not None and
                                                       window > n_tokens):
        window = None  # a window longer than the sentence masks nothing more
    # Qwen2 windows only the layers from max_window_layers on (none when it is the depth)
    full = config.whole("max_window_layers", 0, low=0, high=MAX_LAYERS * 2)
    if window is not None and full >= config.whole("num_hidden_layers", high=MAX_LAYERS):
        window = None
    kinds = config.get("layer_types")
    if window is not None and (full or (isinstance(kinds, list)
                                        and len(set(map(str, kinds))) > 1)):
        raise NotSupportedError(f"{config.name}: sliding-window attention in some layers "
                                f"only (layer_types / max_window_layers) is not supported")
    p = ("model.", "")
    d, n_head = config.whole("hidden_size"), config.whole("num_attention_heads")
    n_kv = config.whole("num_key_value_heads", n_head)
    hd = config.whole("head_dim", None) or config.divides("hidden_size", d,
                                                          "num_attention_heads", n_head)
    if n_head % n_kv:
        raise InputError(f"{config.name}: num_attention_heads = {n_head} heads cannot share "
                         f"num_key_value_heads = {n_kv} key/value heads")
    n_layer = kept_layers(config, "num_hidden_layers", layers)
    inner = config.whole("intermediate_size")
    embed = tensor(w, "embed_tokens.weight", p, (None, d))
    norm_key, norm_weights = hf_norm(config.text("model_type"))
    data: dict[str, Any] = {
        "embeddings": rows(embed, "embed_tokens"),
        "positional_encoding": "rope", "rope_style": "half",
        **({"sliding_window": window} if window is not None else {}),
        "positional_encoding_base": _rope_theta(config),
        "causal": True, "norm": "pre", "layer_norm": norm_key,
        "activation": hf_activation(config, "hidden_act"),
        "eps": config.number("rms_norm_eps", "1e-6"),
        "final_norm": True,
        **{f"{name}_f": row(tensor(w, f"norm.{attr}", p, (d,)), f"norm.{attr}")
           for name, attr in norm_weights.items()},
        "lm_head": _lm_head(w, embed, config, tie_embeddings(config, False)),
    }
    out = {"q_proj": n_head * hd, "k_proj": n_kv * hd, "v_proj": n_kv * hd, "o_proj": d,
           "gate_proj": inner, "up_proj": inner, "down_proj": d}
    width = {"o_proj": n_head * hd, "down_proj": inner}
    biased = _llama_biases(config)
    blocks = []
    for i in range(n_layer):
        b = f"layers.{i}."

        def lin(name: str, b: str = b) -> np.ndarray:  # nn.Linear stores W^T
            short = name.split(".")[-1]
            return np.asarray(tensor(w, f"{b}{name}.weight", p,
                                     (out[short], width.get(short, d)))).T

        def bias(name: str, b: str = b) -> np.ndarray | None:
            short = name.split(".")[-1]
            if not biased[short]:  # the model has none: a stored one is left unused
                return None
            return tensor(w, f"{b}{name}.bias", p, (out[short],))

        q, k, v = lin("self_attn.q_proj"), lin("self_attn.k_proj"), lin("self_attn.v_proj")
        bq, bk, bv = (bias(f"self_attn.{x}_proj") for x in "qkv")
        heads, kv_heads = [], []
        for h in range(n_head):
            cols = slice(h * hd, (h + 1) * hd)
            head = {"W_Q": rows(q[:, cols], f"{b}q_proj")}
            if bq is not None:
                head["b_Q"] = row(bq[cols], f"{b}q_proj.bias")
            heads.append(head)
        for h in range(n_kv):
            cols = slice(h * hd, (h + 1) * hd)
            kv = {"W_K": rows(k[:, cols], f"{b}k_proj"), "W_V": rows(v[:, cols], f"{b}v_proj")}
            if bk is not None:
                kv["b_K"] = row(bk[cols], f"{b}k_proj.bias")
            if bv is not None:
                kv["b_V"] = row(bv[cols], f"{b}v_proj.bias")
            kv_heads.append(kv)
        layer = {
            "W_O": rows(lin("self_attn.o_proj"), f"{b}o_proj"),
            "W_gate": rows(lin("mlp.gate_proj"), f"{b}gate_proj"),
            "W_1": rows(lin("mlp.up_proj"), f"{b}up_proj"),
            "W_2": rows(lin("mlp.down_proj"), f"{b}down_proj"),
            **{f"{name}_{k}": row(tensor(w, f"{b}{module}.{attr}", p, (d,)),
                                  f"{b}{module}.{attr}")
               for k, module in ((1, "input_layernorm"), (2, "post_attention_layernorm"))
               for name, attr in norm_weights.items()},
        }
        for key, name in (("b_O", "self_attn.o_proj"), ("b_gate", "mlp.gate_proj"),
                          ("b_1", "mlp.up_proj"), ("b_2", "mlp.down_proj")):
            value = bias(name)
            if value is not None:
                layer[key] = row(value, f"{b}{name}.bias")
        layer["kv_head"] = kv_heads
        layer["head"] = heads
        blocks.append(layer)
    data["layer"] = blocks
    return data
