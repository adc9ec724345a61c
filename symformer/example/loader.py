"""Read an example TOML file into a validated :class:`~symformer.example.schema.Example`.

Every problem is reported as an :class:`~symformer.errors.InputError` whose message
names the file, the key, the layer and head, and the expected and found shapes.
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

from symformer.errors import InputError
from symformer.example.alibi import alibi_slopes
from symformer.example.bert_extras import (
    TRANSFORM_KEYS,
    embedding_norm,
    lm_head_transform,
    token_types,
)
from symformer.example.decoder import parse_decoder
from symformer.example.decoding import parse_decoding
from symformer.example.exact import ExactMatrix, ExactNumber
from symformer.example.fields import (
    Where,
    choice,
    head,
    matrix,
    no_unknown_keys,
    optional_vector,
    sub_table,
    vector,
    vocab_and_tokens,
)
from symformer.example.given_inputs import (
    attention_example,
    given_inputs,
    lift_attention_settings,
)
from symformer.example.head import parse_head
from symformer.example.literals import (
    MAX_LITERAL_LENGTH,
    exact_scalar,
    exact_value,
    parse_float_text,
    shorten,
)
from symformer.example.loss import parse_loss
from symformer.example.moe import LAYER_KEYS as _MOE_LAYER_KEYS
from symformer.example.moe import layer_extras
from symformer.example.schema import (
    ACTIVATIONS,
    DEFAULT_BASE,
    DEFAULT_EPS,
    LAYER_NORMS,
    NORM_PLACEMENTS,
    POSITIONAL_ENCODINGS,
    ROPE_STYLES,
    SCALES,
    SCORE_FUNCTIONS,
    Example,
    FinalNorm,
    Head,
    KVHead,
    Layer,
    LMHead,
)
from symformer.example.stages import parse_stages
from symformer.lazy import sympy

BUILTIN_NAME = "builtin.toml"
#: The largest example or claims file read, in bytes (checked before reading it).
MAX_FILE_BYTES = 8 * 2**20
#: The deepest nesting of arrays and tables accepted in a TOML file.
MAX_NESTING = 32

#: The conventions a [[layer]] inherits from the top level unless it sets its own.
_CONVENTION_KEYS = {"eps", "activation", "norm", "layer_norm", "scale", "residual",
                    "rope_style"}
_TOP_KEYS = {
    "title", "tokens", "vocab", "embeddings", "positional_encoding", "causal", "sliding_window",
    "layer", "mask", "decoder", "description", "positional_encoding_base",
    "rope_theta", "rope_angles",
    "positional_embeddings", "final_norm", "gamma_f", "beta_f", "lm_head", "loss", "stages",
    "token_type_embeddings", "segments", "embedding_norm",  # BERT (bert_extras.py)
    "claim",  # [[claim]] tables about the example itself, read by `symformer check`
    "equation",  # [[equation]] tables about the example itself, read by `symformer check`
    "decoding",  # how `generate` chooses the next token (symformer.example.decoding)
    "train",  # the training run its claims on step stages mean (symformer.blocks.train)
    "exercise",  # `symformer exercise`'s ranges (symformer/exercise/settings.py); ignored here
    "inputs", "positions", "d_model", "alibi", "alibi_slopes", "attention",
    "head",  # a classification or regression head (symformer.example.head)
    "objective",  # an optimiser lesson (symformer.example.objective)
    "weights",  # [weights]: a safetensors file the weights are read from (weights_file.py)
    "attention_scores",  # every head's raw scores: a registered score function ("dot")
} | _CONVENTION_KEYS
_LAYER_KEYS = {
    "head", "kv_head", "W_O", "b_O", "W_1", "b_1", "W_2", "b_2", "W_gate", "b_gate",
    "gamma_1", "beta_1", "gamma_2", "beta_2", "alibi", "alibi_slopes",
} | _CONVENTION_KEYS | _MOE_LAYER_KEYS
_QUERY_HEAD_KEYS = {"W_Q", "b_Q", "kv_head"}
_KV_HEAD_KEYS = {"W_K", "W_V", "b_K", "b_V"}
_LM_HEAD_KEYS = {"W_vocab", "tied", "b_vocab", "masked"} | TRANSFORM_KEYS
#: C0 and C1 controls with DEL, the line and paragraph separators, the bidi overrides.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def builtin_text() -> str:
    """The TOML text of the built-in example (the blog post's sentence and weights)."""
    return resources.files("symformer.example").joinpath(BUILTIN_NAME).read_text("utf-8")


#: Shipped files in ``symformer/examples/`` that hold claims only, not an example.
CLAIMS_ONLY = ("post_claims",)


def packaged_files() -> dict[str, Path]:
    """Every TOML file shipped in ``symformer/examples/``, by name (no ``.toml``): the
    examples and the claims-only files (:data:`CLAIMS_ONLY`)."""
    folder = resources.files("symformer").joinpath("examples")
    return {Path(f.name).stem: Path(str(f)) for f in folder.iterdir()
            if f.name.endswith(".toml")}


def packaged_examples() -> dict[str, Path]:
    """The example files shipped in ``symformer/examples/``, by name (no ``.toml``)."""
    return {name: path for name, path in packaged_files().items()
            if name not in CLAIMS_ONLY}


def load_example(path: str | Path | None = None) -> Example:
    """Load an example file; ``None`` gives the built-in example.

    A bare name of a packaged example (``encoder_decoder``, ``course_module``) that is
    not a file here loads the packaged file, so the examples work from any folder.
    """
    if path is None:
        return parse_example(builtin_text(), source="<built-in>")
    path = Path(path)
    packaged = packaged_examples()
    if not path.exists() and str(path) in packaged:
        path = packaged[str(path)]
    names = ", ".join(sorted(packaged))
    text = read_text_file(path, "an example .toml file", f" (packaged examples: {names})")
    return parse_example(text, source=str(path))


def read_text_file(path: Path, what: str, missing_hint: str = "") -> str:
    """The UTF-8 text of a regular file of at most :data:`MAX_FILE_BYTES` bytes.

    Devices, FIFOs and directories are refused before anything is read (``/dev/zero``
    would never end), and at most one byte more than the limit is ever read.
    """
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as handle:
            mode = os.fstat(handle.fileno()).st_mode
            if stat.S_ISDIR(mode):
                raise InputError(f"{path}: is a directory, expected {what}")
            if not stat.S_ISREG(mode):
                raise InputError(f"{path}: is not a regular file (a device, FIFO or "
                                 f"socket), expected {what}")
            data = handle.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file{missing_hint}") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, expected {what}") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read the file ({exc.strerror or exc})") from None
    if len(data) > MAX_FILE_BYTES:
        raise InputError(f"{path}: the file is larger than the limit of "
                         f"{MAX_FILE_BYTES // 2**20} MiB for {what}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: cannot read the file: not UTF-8 text (byte "
                         f"{exc.start})") from None


def read_toml(text: str, source: str) -> dict[str, Any]:
    """Parse TOML text, keeping every float as its literal text (no binary doubles).

    Integers of more digits than Python converts, and arrays or tables nested more
    than :data:`MAX_NESTING` deep, are refused with a message instead of an error
    from the parser.
    """
    try:
        data = tomllib.loads(text, parse_float=parse_float_text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{source}: invalid TOML: {exc}") from None
    except RecursionError:
        raise InputError(f"{source}: arrays or tables are nested more than {MAX_NESTING} "
                         f"levels deep") from None
    except ValueError:  # int() past sys.get_int_max_str_digits()
        raise InputError(f"{source}: {_long_integer(text)}") from None
    _check_nesting(data, source)
    return data


def _long_integer(text: str) -> str:
    """The message for an integer literal too long to convert, naming its line."""
    key = ""
    for number, line in enumerate(text.splitlines(), start=1):
        named = re.match(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*=", line)
        key = named.group(1) if named else key  # an array may run over several lines
        for match in re.finditer(rf"[0-9_]{{{MAX_LITERAL_LENGTH},}}", line):
            where = f" ({key})" if key else ""
            return (f"line {number}{where}: the integer {shorten(match.group())} is too "
                    f"long (numbers have at most {MAX_LITERAL_LENGTH:,} characters)")
    return f"an integer is too long (numbers have at most {MAX_LITERAL_LENGTH:,} characters)"


def _check_nesting(data: Any, source: str) -> None:
    """Refuse values nested more than MAX_NESTING deep (iteratively: no recursion)."""
    stack = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_NESTING:
            raise InputError(f"{source}: arrays or tables are nested more than "
                             f"{MAX_NESTING} levels deep")
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)


def parse_example(text: str, source: str = "<string>") -> Example:
    """Parse and validate the TOML text of an example."""
    return example_from_dict(read_toml(text, source), source)


def example_from_dict(data: dict[str, Any], source: str) -> Example:
    """Validate a parsed TOML table and build the :class:`Example`."""
    here = Where(source)
    no_unknown_keys(data, _TOP_KEYS, here)
    if "weights" in data:  # references to a weights file: read them first
        from symformer.example.weights_file import read_weights

        data = read_weights(data, here, source)
    _printable_names(data, here)
    if "objective" in data:  # an optimiser lesson: a scalar objective of parameters
        from symformer.example.objective import objective_example

        return objective_example(data, here)
    if "attention" in data:  # given Q, K and V: a file of its own shape
        data = lift_attention_settings(data, here)
        return attention_example(data, here, _boolean(data, "causal", here, False),
                                 _mask(data, here),
                                 _scale(data, here) if "scale" in data else None)
    positions_only = "inputs" not in data and ("positions" in data or "d_model" in data)
    given = "inputs" in data or positions_only
    if given:
        tokens, embeddings = given_inputs(data, here)
        vocab, embedded = list(dict.fromkeys(tokens)), None
    else:
        vocab, tokens = vocab_and_tokens(data, here)
        embeddings, embedded = _embeddings(data, here, vocab, tokens)
    d_model = embeddings.cols
    pe = choice(data, "positional_encoding", POSITIONAL_ENCODINGS, here,
                "none" if given and not positions_only else "sinusoidal")
    causal = _boolean(data, "causal", here, False)
    defaults = _conventions(data, here, None)
    layers_data = data.get("layer", [])
    if not isinstance(layers_data, list):
        raise InputError(f"{here}: layer must be [[layer]] tables")
    layers = tuple(
        _layer(layer, here.sub(f"layer {n}"), d_model, defaults, pe)
        for n, layer in enumerate(layers_data, start=1)
    )
    # a mixture of experts, dropout with given masks (symformer.example.moe)
    layers = tuple(replace(layer, **layer_extras(
        layers_data[n - 1], here.sub(f"layer {n}"), d_model, len(tokens), layer.activation,
        (d_model if layer.W_O is not None else sum(h.d_v for h in layer.heads))
        if layer.heads else None)) for n, layer in enumerate(layers, start=1))
    own = [isinstance(t, dict) and ("alibi" in t or "alibi_slopes" in t) for t in layers_data]
    if "alibi" in data or "alibi_slopes" in data or any(own):
        if "decoder" in data:
            raise InputError(f"{here}: alibi and alibi_slopes bias the encoder stack's (or a "
                             f"decoder-only model's) scores; a [decoder] table is not "
                             f"supported with them")
        # a [[layer]]'s own alibi / alibi_slopes replace the top level's for that layer
        layers = tuple(replace(layer, alibi_slopes=alibi_slopes(
            layers_data[n - 1] if own[n - 1] else data, here.sub(f"layer {n}"),
            len(layer.heads))) if layer.heads else layer
            for n, layer in enumerate(layers, start=1))
    _output_width(layers, d_model, data, here)
    decoder = None
    if "decoder" in data:
        decoder = parse_decoder(data["decoder"], here.sub("decoder"), d_model, defaults, pe,
                                _final_norm)
    width = _output_width(layers, d_model, data, here)
    out_head = None
    if "head" in data:
        for other in ("lm_head", "decoder"):
            if other in data:
                raise InputError(f"{here}: [head] (a classification or regression head) "
                                 f"cannot be combined with [{other}]")
        out_head = parse_head(data["head"], here.sub("head"), width, causal)
    loss = None
    if "loss" in data:
        loss = parse_loss(data["loss"], here.sub("loss"), data, vocab, len(tokens),
                          width, decoder, out_head)
    title = data.get("title", "Untitled example")
    if not isinstance(title, str):
        raise InputError(f"{here}: title must be a string, found {title!r}")
    if given and "lm_head" in data:
        raise InputError(f"{here}: [lm_head] needs a vocabulary with embeddings; inputs = "
                         f"[[...]] gives the input rows themselves (give vocab and "
                         f"embeddings instead)")
    lm_head = _lm_head(data, here, embeddings, len(vocab), defaults)
    if lm_head is not None and lm_head.tied and embedded is not None:
        raise InputError(f"{here}: [lm_head] tied = true reads every word's embedding row; "
                         f"embeddings has none for {_missing(vocab, embedded)}")
    if lm_head is not None and decoder is not None:
        raise InputError(f"{here}: lm_head turns the encoder stack into a decoder-only "
                         f"language model; it cannot be combined with a [decoder] table")
    return Example(
        title=title,
        tokens=tuple(tokens),
        vocab=tuple(vocab),
        embeddings=embeddings,
        layers=layers,
        positional_encoding=pe,
        causal=causal,
        sliding_window=_sliding_window(data, here, causal),
        attention_scores=choice(data, "attention_scores", SCORE_FUNCTIONS, here, "dot"),
        mask_value=_mask(data, here),
        source=source,
        decoder=decoder,
        decoding=parse_decoding(data["decoding"], here.sub("decoding"))
        if "decoding" in data else None,
        positional_encoding_base=_base(data, here, pe),
        embedded_vocab=embedded,
        **_rope_given(data, here, pe, layers, len(tokens)),
        positional_embeddings=_learned_table(data, here, pe, len(tokens), d_model),
        final_norm=_final_norm(data, here, d_model, defaults),
        lm_head=lm_head,
        head=out_head,
        loss=loss,
        stages=parse_stages(data["stages"], here.sub("stages")) if "stages" in data else None,
        given_inputs=given,
        positions_only=positions_only,
        **token_types(data, here, len(tokens), d_model),
        embedding_norm=embedding_norm(data, here, d_model, defaults),
    )


def _conventions(data: dict[str, Any], here: Where, defaults: dict[str, Any] | None
                 ) -> dict[str, Any]:
    """The conventions of a table: its own keys, else ``defaults`` (None: today's)."""
    inherited = defaults or {
        "eps": DEFAULT_EPS, "activation": "relu", "norm": "post",
        "layer_norm": "biased", "scale": None, "residual": True,
        "rope_style": "interleaved",
    }
    eps = inherited["eps"]
    if "eps" in data:
        eps = exact_scalar(data["eps"], f"{here}: eps")
        if eps < 0:
            raise InputError(f"{here}: eps must not be negative, found {eps}")
    return {
        "eps": eps,
        "activation": choice(data, "activation", ACTIVATIONS, here, inherited["activation"]),
        "norm": choice(data, "norm", NORM_PLACEMENTS, here, inherited["norm"]),
        "layer_norm": choice(data, "layer_norm", LAYER_NORMS, here, inherited["layer_norm"]),
        "scale": _scale(data, here) if "scale" in data else inherited["scale"],
        "residual": _boolean(data, "residual", here, inherited["residual"]),
        "rope_style": choice(data, "rope_style", ROPE_STYLES, here, inherited["rope_style"]),
    }


def _scale(data: dict[str, Any], here: Where) -> sympy.Rational | None:
    """``scale``: "sqrt_dk" (None), "none" (1) or an exact positive number."""
    value = data["scale"]
    if isinstance(value, str) and value in SCALES:
        return None if value == "sqrt_dk" else ExactNumber(1)
    if isinstance(value, str) and not any(c.isdigit() for c in value):
        raise InputError(f"{here}: scale must be \"sqrt_dk\", \"none\" or a positive number; "
                         f"found {value!r}")
    number = exact_scalar(value, f"{here}: scale")
    if number <= 0:
        raise InputError(f"{here}: scale must be positive (the scores are divided by it), "
                         f"found {number}")
    return number


def _boolean(data: dict[str, Any], key: str, here: Where, default: bool) -> bool:
    value = data.get(key, default)
    if not isinstance(value, bool):
        raise InputError(f"{here}: {key} must be true or false, found {value!r}")
    return value


def _base(data: dict[str, Any], here: Where, pe: str) -> sympy.Rational:
    """``positional_encoding_base`` (sinusoidal and rope): an exact number > 1."""
    if "positional_encoding_base" not in data:
        return DEFAULT_BASE
    if pe not in ("sinusoidal", "rope"):
        raise InputError(f"{here}: positional_encoding_base is used by the sinusoidal and "
                         f"rope encodings only; positional_encoding is {pe!r}")
    base = exact_scalar(data["positional_encoding_base"], f"{here}: positional_encoding_base")
    if base <= 1:
        raise InputError(f"{here}: positional_encoding_base must be greater than 1, "
                         f"found {base}")
    return base


def _rope_given(data: dict[str, Any], here: Where, pe: str, layers: tuple[Layer, ...],
                n_tokens: int) -> dict[str, ExactMatrix | None]:
    """``rope_theta`` (one frequency per pair, or one number for every pair) or
    ``rope_angles`` (a row of angles per position, one per pair): RoPE's given angles."""
    given = [key for key in ("rope_theta", "rope_angles") if key in data]
    if not given:
        return {}
    if pe != "rope":
        raise InputError(f"{here}: {given[0]} is used by the rope encoding only; "
                         f"positional_encoding is {pe!r}")
    if len(given) == 2 or "positional_encoding_base" in data:
        other = given[1] if len(given) == 2 else "positional_encoding_base"
        raise InputError(f"{here}: {given[0]} and {other} both set RoPE's angles; give one")
    widths = {h.d_k for layer in layers for h in layer.heads}
    if not widths:
        raise InputError(f"{here}: {given[0]} turns the heads' queries and keys; the "
                         f"example has no attention head")
    pairs = min(widths) // 2
    if len(widths) != 1:
        raise InputError(f"{here}: {given[0]} needs every head to have the same d_k; "
                         f"found {sorted(widths)}")
    if given[0] == "rope_theta":
        value = data["rope_theta"]
        if not isinstance(value, list):
            value = [value] * pairs  # one number: every pair turns by it
        theta = vector({"rope_theta": value}, "rope_theta", here, pairs)
        return {"rope_theta": theta}
    angles = matrix(data, "rope_angles", here, cols=pairs)
    if angles.rows < n_tokens:
        raise InputError(f"{here}: rope_angles has {angles.rows} rows, fewer than the "
                         f"{n_tokens} tokens (one row of angles per position)")
    return {"rope_angles": angles}


def _learned_table(data: dict[str, Any], here: Where, pe: str, n: int, d_model: int
                   ) -> sympy.Matrix | None:
    """``positional_embeddings`` (learned positions): d_model wide, a row per token."""
    if pe != "learned":
        if "positional_embeddings" in data:
            raise InputError(f"{here}: positional_embeddings needs positional_encoding = "
                             f"\"learned\" (found {pe!r})")
        return None
    if "positional_embeddings" not in data:
        raise InputError(f"{here}: positional_encoding = \"learned\" needs "
                         f"positional_embeddings (one row of {d_model} per position)")
    table = matrix(data, "positional_embeddings", here, cols=d_model)
    if table.rows < n:
        raise InputError(f"{here}: positional_embeddings has {table.rows} rows, fewer than "
                         f"the {n} tokens of the sentence (one row per position)")
    return table


def _final_norm(data: dict[str, Any], here: Where, d_model: int, defaults: dict[str, Any]
                ) -> FinalNorm | None:
    """``final_norm = true`` (+ ``gamma_f``, ``beta_f``): a normalisation after the last block."""
    if not _boolean(data, "final_norm", here, False):
        for key in ("gamma_f", "beta_f"):
            if key in data:
                raise InputError(f"{here}: {key} needs final_norm = true")
        return None
    _no_beta(data, ("beta_f",), defaults["layer_norm"], here)
    return FinalNorm(layer_norm=defaults["layer_norm"], eps=defaults["eps"],
                     gamma_f=vector(data, "gamma_f", here, d_model, default=1),
                     beta_f=vector(data, "beta_f", here, d_model, default=0))


def _no_beta(data: dict[str, Any], keys: tuple[str, ...], layer_norm: str,
             here: Where) -> None:
    """RMSNorm has no beta: refuse one rather than ignore it."""
    if layer_norm == "rms":
        for key in keys:
            if key in data:
                raise InputError(f"{here}: {key} has no meaning with layer_norm = \"rms\" "
                                 f"(RMSNorm has no beta)")


def _embeddings(data: dict[str, Any], here: Where, vocab: list[str], tokens: list[str]
                ) -> tuple[ExactMatrix, tuple[str, ...] | None]:
    """``embeddings``: a row per vocabulary word (a list of rows), or a table keyed by
    word (``{ I = [1, 0], tea = [0, 1] }``) that may leave out words the sentence does not
    use; returns the rows and, for a table leaving words out, the words they belong to."""
    value = data.get("embeddings")
    if not isinstance(value, dict):
        return matrix(data, "embeddings", here, rows=len(vocab)), None
    unknown = [word for word in value if word not in vocab]
    if unknown:
        raise InputError(f"{here}: embeddings has a row for {unknown[0]!r}, which is not in "
                         f"vocab {list(vocab)}")
    unread = [t for t in tokens if t not in value]
    if unread:
        raise InputError(f"{here}: embeddings has no row for {unread[0]!r}, a token of the "
                         f"sentence (only words the sentence does not use may be left out)")
    words = tuple(word for word in vocab if word in value)
    d_model = None
    for word in words:
        row = value[word]
        if not isinstance(row, list) or not row or any(isinstance(v, list) for v in row):
            raise InputError(f"{here}: embeddings.{word} must be a non-empty list of numbers "
                             f"(the word's row)")
        if d_model is not None and len(row) != d_model:
            raise InputError(f"{here}: embeddings.{word} has {len(row)} entries, but "
                             f"embeddings.{words[0]} has {d_model}")
        d_model = len(row)
    table = ExactMatrix([[exact_value(v, f"{here}: embeddings.{word}[{j}]")
                          for j, v in enumerate(value[word])] for word in words])
    return table, None if len(words) == len(vocab) else words


def _missing(vocab: list[str], embedded: tuple[str, ...]) -> str:
    missing = [word for word in vocab if word not in embedded]
    return ", ".join(map(repr, missing[:3])) + (" ..." if len(missing) > 3 else "")


def _sliding_window(data: dict[str, Any], here: Where, causal: bool) -> int | None:
    """``sliding_window = w``: each query reads the last w positions (with ``causal``)."""
    if "sliding_window" not in data:
        return None
    w = data["sliding_window"]
    if isinstance(w, bool) or not isinstance(w, int) or not 1 <= w <= 1_000_000:
        raise InputError(f"{here}: sliding_window must be a whole number of positions from 1 "
                         f"to 1000000, found {str(w)[:40]!r}")
    if not causal:
        raise InputError(f"{here}: sliding_window needs causal = true (it narrows the causal "
                         f"mask to the last {w} positions)")
    if "decoder" in data:
        raise InputError(f"{here}: sliding_window is for a decoder-only model's (or the "
                         f"encoder stack's) self-attention; a [decoder] table is not "
                         f"supported with it")
    return w


def _lm_head(data: dict[str, Any], here: Where, embeddings: sympy.Matrix, vocab: int,
             defaults: dict[str, Any]) -> LMHead | None:
    """The ``[lm_head]`` table: ``W_vocab`` (d_model x |vocab|) or ``tied = true``."""
    found = sub_table(data, "lm_head", here, _LM_HEAD_KEYS)
    if found is None:
        return None
    table, where = found
    d_model = embeddings.cols
    tied = _boolean(table, "tied", where, False)
    if tied == ("W_vocab" in table):
        raise InputError(f"{where}: give either W_vocab ({d_model}x{vocab}) or tied = true "
                         f"(the embedding table transposed), not "
                         f"{'both' if tied else 'neither'}")
    if tied:
        W = embeddings.T
        if W.rows != d_model:  # the embedding width is d_model by construction
            raise InputError(f"{where}: tied = true needs embeddings {d_model} wide")
    else:
        W = matrix(table, "W_vocab", where, rows=d_model, cols=vocab)
    b = vector(table, "b_vocab", where, vocab) if "b_vocab" in table else None
    return LMHead(W_vocab=W, b_vocab=b, tied=tied, masked=_boolean(table, "masked", where, False),
                  **lm_head_transform(table, where, d_model, defaults))


def _printable_names(data: dict[str, Any], here: Where) -> None:
    """Refuse control characters in the title and in every vocab and token name.

    C0 and C1 controls (newline, tab, ESC, DEL, ...), the line and paragraph separators
    and the bidirectional overrides would reach terminals and documents as commands,
    not as text.  Wrongly typed entries are left to the checks that follow.
    """
    tables = [(data, here, ("title", "vocab", "tokens"))]
    if isinstance(data.get("decoder"), dict):
        tables.append((data["decoder"], here.sub("decoder"), ("vocab", "tokens")))
    if isinstance(data.get("attention"), dict):
        tables.append((data["attention"], here.sub("attention"), ("key_tokens",)))
    for table, where, keys in tables:
        for key in keys:
            value = table.get(key)
            entries = enumerate(value) if isinstance(value, list) else [(None, value)]
            for i, name in entries:
                bad = _CONTROL.search(name) if isinstance(name, str) else None
                if bad is not None:
                    entry = key if i is None else f"{key} entry {i}"
                    shown = repr(name if len(name) <= 40 else name[:40] + "...")
                    raise InputError(f"{where}: {entry} {shown} contains the control "
                                     f"character U+{ord(bad[0]):04X}; names must be "
                                     "printable text")


def _mask(data: dict[str, Any], here: Where) -> sympy.Rational | None:
    value = data.get("mask", "-inf")
    if isinstance(value, str) and value.strip() in {"-inf", "-infinity"}:
        return None
    number = exact_scalar(value, f"{here}: mask")
    if number >= 0:
        raise InputError(f"{here}: mask must be \"-inf\" or a negative number such as -1e9")
    return number


#: When the heads' concatenation, narrower or wider than d_model, may be the output.
_NARROW = ("the last [[layer]], with residual = false, norm = \"none\", no W_1 and no b_O, "
           "and no final_norm, [lm_head] or [decoder]")


def _output_width(layers: tuple[Layer, ...], d_model: int, data: dict[str, Any],
                  here: Where) -> int:
    """The width of ``output``: d_model, or the concatenation's width when a layer has
    no W_O and heads whose value widths do not add up to d_model (allowed only as the
    last layer, its output used as it is)."""
    for n, layer in enumerate(layers, start=1):
        width = sum(h.d_v for h in layer.heads)
        if layer.W_O is not None or width == d_model or not layer.heads:
            continue
        if n != len(layers) or data.get("final_norm") is True or "lm_head" in data \
                or "decoder" in data:
            raise InputError(f"{here.sub(f'layer {n}')}: W_O is missing and the heads' value "
                             f"widths add up to {width}, not d_model = {d_model}; give W_O "
                             f"({width}x{d_model}), or use the concatenation as it is: "
                             f"{_NARROW}")
        return width
    return d_model


def _layer(data: Any, here: Where, d_model: int, defaults: dict[str, Any],
           pe: str = "sinusoidal") -> Layer:
    """One ``[[layer]]`` table: attention, optional FFN, norms and conventions."""
    if not isinstance(data, dict):
        raise InputError(f"{here}: must be a table")
    no_unknown_keys(data, _LAYER_KEYS, here)
    conventions = _conventions(data, here, defaults)
    if "head" not in data and "kv_head" not in data:  # an FFN-only block
        return _ffn_only_layer(data, here, d_model, conventions)
    heads, kv_heads = _attention_heads(data, here, d_model)
    if pe == "rope":
        _even_widths(heads, here)
    width = sum(h.d_v for h in heads)
    W_O = matrix(data, "W_O", here, rows=width, cols=d_model, required=False)
    if W_O is None and width != d_model and not (
            conventions["residual"] is False and conventions["norm"] == "none"
            and "W_1" not in data and "moe" not in data and "b_O" not in data):
        raise InputError(
            f"{here}: W_O is missing and the heads' value widths add up to {width}, not "
            f"d_model = {d_model}; give W_O ({width}x{d_model}), or use the concatenation "
            f"as it is: {_NARROW}"
        )
    _no_beta(data, ("beta_1", "beta_2"), conventions["layer_norm"], here)
    return Layer(
        heads=heads,
        kv_heads=kv_heads,
        W_O=W_O,
        b_O=optional_vector(data, "b_O", here, d_model),
        **_feed_forward(data, here, d_model),
        gamma_1=vector(data, "gamma_1", here, d_model, default=1),
        beta_1=vector(data, "beta_1", here, d_model, default=0),
        gamma_2=vector(data, "gamma_2", here, d_model, default=1),
        beta_2=vector(data, "beta_2", here, d_model, default=0),
        **conventions,
    )


def _ffn_only_layer(data: dict[str, Any], here: Where, d_model: int,
                    conventions: dict[str, Any]) -> Layer:
    """A ``[[layer]]`` without ``[[layer.head]]`` tables: the FFN alone, with its residual
    and normalisation (``gamma_1``/``beta_1``: its Add & Norm is the block's first)."""
    if "W_1" not in data and "moe" not in data:
        raise InputError(f"{here}: a [[layer]] needs [[layer.head]] tables (attention), "
                         f"W_1 and W_2 (a feed-forward network) or [layer.moe] (a mixture "
                         f"of experts), or both")
    for key in ("W_O", "b_O", "gamma_2", "beta_2"):
        if key in data:
            raise InputError(f"{here}: {key} has no meaning in a layer without attention "
                             f"heads (its FFN's Add & Norm uses gamma_1 and beta_1)")
    _no_beta(data, ("beta_1",), conventions["layer_norm"], here)
    ones = vector({}, "gamma_2", here, d_model, default=1)
    return Layer(heads=(), W_O=None, **_feed_forward(data, here, d_model),
                 gamma_1=vector(data, "gamma_1", here, d_model, default=1),
                 beta_1=vector(data, "beta_1", here, d_model, default=0),
                 gamma_2=ones, beta_2=vector({}, "beta_2", here, d_model, default=0),
                 **conventions)


def _feed_forward(data: dict[str, Any], here: Where, d_model: int) -> dict[str, Any]:
    """``W_1``, ``b_1``, ``W_2``, ``b_2``, ``W_gate``, ``b_gate``; no ``W_1``: no FFN."""
    if "W_1" not in data:
        for key in ("W_2", "b_1", "b_2", "W_gate", "b_gate"):
            if key in data:
                raise InputError(f"{here}: {key} is given without W_1 (a block without W_1 "
                                 f"has no feed-forward sub-layer)")
        return {"W_1": None, "b_1": None, "W_2": None, "b_2": None}
    W_1 = matrix(data, "W_1", here, rows=d_model)
    d_ff = W_1.cols
    if "b_gate" in data and "W_gate" not in data:
        raise InputError(f"{here}: b_gate is given without W_gate")
    return {
        "W_1": W_1,
        "b_1": optional_vector(data, "b_1", here, d_ff),
        "W_2": matrix(data, "W_2", here, rows=d_ff, cols=d_model),
        "b_2": optional_vector(data, "b_2", here, d_model),
        "W_gate": matrix(data, "W_gate", here, rows=d_model, cols=d_ff, required=False),
        "b_gate": optional_vector(data, "b_gate", here, d_ff),
    }


def _attention_heads(data: dict[str, Any], here: Where, d_model: int
                     ) -> tuple[tuple[Head, ...], tuple[KVHead, ...]]:
    """The query heads and, with ``[[layer.kv_head]]`` tables, the shared key/value heads."""
    heads_data = data.get("head")
    if not isinstance(heads_data, list) or not heads_data:
        raise InputError(f"{here}: expected at least one [[layer.head]] table")
    if "kv_head" not in data:
        for k, h in enumerate(heads_data, 1):
            if isinstance(h, dict) and "kv_head" in h:
                raise InputError(f"{here.sub(f'head {k}')}: kv_head is given but the layer "
                                 f"has no [[layer.kv_head]] tables")
        return tuple(head(h, here.sub(f"head {k}"), d_model)
                     for k, h in enumerate(heads_data, 1)), ()
    kv_data = data["kv_head"]
    if not isinstance(kv_data, list) or not kv_data:
        raise InputError(f"{here}: kv_head must be [[layer.kv_head]] tables")
    kv_heads = tuple(_kv_head(h, here.sub(f"kv_head {k}"), d_model)
                     for k, h in enumerate(kv_data, 1))
    n, m = len(heads_data), len(kv_heads)
    heads = []
    for k, h in enumerate(heads_data, 1):
        where = here.sub(f"head {k}")
        if not isinstance(h, dict):
            raise InputError(f"{where}: must be a table")
        no_unknown_keys(h, _QUERY_HEAD_KEYS, where)
        if "kv_head" in h:
            index = h["kv_head"]
            if isinstance(index, bool) or not isinstance(index, int) or not 1 <= index <= m:
                raise InputError(f"{where}: kv_head must be a key/value head number from 1 "
                                 f"to {m}, found {index!r}")
            index -= 1
        elif n % m:
            raise InputError(f"{where}: {n} query heads cannot share {m} key/value heads "
                             f"evenly; give kv_head = k in every [[layer.head]]")
        else:
            index = (k - 1) // (n // m)  # consecutive query heads share one (Llama)
        kv = kv_heads[index]
        W_Q = matrix(h, "W_Q", where, rows=d_model, cols=kv.W_K.cols)
        heads.append(Head(W_Q=W_Q, W_K=kv.W_K, W_V=kv.W_V, b_Q=optional_vector(
            h, "b_Q", where, W_Q.cols), b_K=kv.b_K, b_V=kv.b_V, kv_head=index))
    return tuple(heads), kv_heads


def _kv_head(data: Any, here: Where, d_model: int) -> KVHead:
    """One ``[[layer.kv_head]]`` table: W_K, W_V and their optional biases."""
    if not isinstance(data, dict):
        raise InputError(f"{here}: must be a table")
    no_unknown_keys(data, _KV_HEAD_KEYS, here)
    W_K = matrix(data, "W_K", here, rows=d_model)
    W_V = matrix(data, "W_V", here, rows=d_model)
    return KVHead(W_K=W_K, W_V=W_V, b_K=optional_vector(data, "b_K", here, W_K.cols),
                  b_V=optional_vector(data, "b_V", here, W_V.cols))


def _even_widths(heads: tuple[Head, ...], here: Where) -> None:
    """RoPE rotates pairs of dimensions: every d_k must be even."""
    for k, h in enumerate(heads, 1):
        if h.d_k % 2:
            raise InputError(f"{here.sub(f'head {k}')}: rope needs an even d_k (it rotates "
                             f"pairs of dimensions), found d_k = {h.d_k}")
