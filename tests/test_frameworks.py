"""Imported models against the framework's own forward pass (PyTorch, Hugging Face).

GPT-2, Llama-style, BERT (with token types and the embedding LayerNorm),
TransformerEncoderLayer, MultiheadAttention.

Tiny random models are built here with a fixed seed, run by the framework in float64
(eval mode), and their outputs -- logits and every stage a forward hook reaches --
compared with symformer's certified values of the imported example.
"""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import symformer  # noqa: E402
from symformer.errors import InputError, NotSupportedError  # noqa: E402
from symformer.example.model_dir import ModelDir  # noqa: E402
from symformer.frameworks import from_pretrained, from_torch  # noqa: E402
from symformer.frameworks.hf_in import pretrained_text  # noqa: E402
from symformer.frameworks.torch_check import module_crosscheck  # noqa: E402
from symformer.frameworks.torch_out import model_class  # noqa: E402

TOKENS = [3, 5, 7, 1]


def certified(g: symformer.Derivation, name: str) -> np.ndarray:
    """A stage's certified values (128-bit balls, their midpoints as floats)."""
    balls = g[name].balls(128)
    for row in balls:
        for b in row:
            assert b.rad() < 1e-30  # far inside float64's resolution
    return np.array([[float(b.mid()) for b in row] for row in balls])


def close(exact: np.ndarray, framework: np.ndarray, rel: float = 1e-12) -> None:
    framework = np.asarray(framework, dtype=np.float64).reshape(exact.shape)
    scale = max(np.abs(exact).max(), 1e-300)
    assert np.abs(exact - framework).max() <= rel * scale, (exact, framework)


def hooked(model, modules: dict[str, object]) -> dict[str, np.ndarray]:
    """Register forward hooks on ``modules``; their float64 outputs land in the dict."""
    seen: dict[str, np.ndarray] = {}
    for name, module in modules.items():
        def hook(_m, _inp, out, name=name):
            out = out[0] if isinstance(out, tuple) else out
            seen[name] = out.detach().reshape(out.shape[-2], out.shape[-1]).numpy()
        module.register_forward_hook(hook)
    return seen


def tiny_gpt2(folder, seed: int, n_embd: int = 8, vocab_size: int = 16, n_positions: int = 8):
    """A random one-layer, two-head GPT-2 (seeded), saved to ``folder`` as safetensors."""
    torch.manual_seed(seed)
    config = transformers.GPT2Config(n_layer=1, n_embd=n_embd, n_head=2,
                                     vocab_size=vocab_size, n_positions=n_positions)
    model = transformers.GPT2LMHeadModel(config).eval()
    model.save_pretrained(folder, safe_serialization=True)
    return model


def _exact_weights_match(folder, example) -> None:
    """Every tensor of the file is in the example as exactly its dyadic value."""
    weights = ModelDir(folder).safetensors()
    wte = next(v for k, v in weights.items() if k.endswith(("wte.weight", "embed_tokens.weight")))
    for i in range(wte.shape[0]):
        for j in range(wte.shape[1]):
            v = example.embeddings[i, j]
            assert Fraction(int(v.p), int(v.q)) == Fraction(float(wte[i, j]))


def test_gpt2_logits_and_stages_match_hugging_face(tmp_path) -> None:
    model = tiny_gpt2(tmp_path, 0)
    example = from_pretrained(tmp_path, TOKENS)
    _exact_weights_match(tmp_path, example)
    assert example.tokens == ("t3", "t5", "t7", "t1")
    model = model.double()
    block = model.transformer.h[0]
    _language_model_matches(model, example, {
        "layer1.norm1": block.ln_1, "layer1.attention.output": block.attn,
        "layer1.norm2": block.ln_2, "layer1.ffn.output": block.mlp,
        "layer1.add_norm2": block, "final_norm": model.transformer.ln_f})


def _language_model_matches(model, example, modules: dict[str, object]) -> None:
    """The example's logits and hooked stages equal the float64 model's to 1e-12."""
    seen = hooked(model, modules)
    with torch.no_grad():
        logits = model(torch.tensor([TOKENS])).logits[0].numpy()
    g = symformer.derive(example)
    close(certified(g, "logits"), logits)
    assert len(seen) == len(modules)  # every hook ran
    for name, value in seen.items():
        close(certified(g, name), value)


def _llama_float64(monkeypatch, kind: str) -> None:
    """HF's Llama (and Qwen2) compute RMSNorm and the rotary angles in float32 even in a
    float64 model; make those two steps float64 (same formulas) so that the reference is."""
    import importlib

    ml = importlib.import_module(f"transformers.models.{kind}.modeling_{kind}")
    prefix = {"llama": "Llama", "qwen2": "Qwen2", "mistral": "Mistral"}[kind]

    def rms(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.variance_epsilon))

    def rotary(self, x, position_ids):
        dim = self.inv_freq.shape[0] * 2
        base = self.config.rope_parameters["rope_theta"]
        inv = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
        freqs = position_ids[..., None].double() * inv
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

    monkeypatch.setattr(getattr(ml, f"{prefix}RMSNorm"), "forward", rms)
    monkeypatch.setattr(getattr(ml, f"{prefix}RotaryEmbedding"), "forward", rotary)


@pytest.mark.parametrize(("kind", "extra"), [
    ("llama", {}),
    ("llama", {"tie_word_embeddings": True, "attention_bias": True, "mlp_bias": True}),
    ("qwen2", {}),  # biases on q, k, v
])
def test_llama_with_grouped_query_attention_matches_hugging_face(tmp_path, monkeypatch,
                                                                 kind, extra) -> None:
    _llama_float64(monkeypatch, kind)
    torch.manual_seed(1)
    name = {"llama": "Llama", "qwen2": "Qwen2"}[kind]
    config = getattr(transformers, f"{name}Config")(
        vocab_size=16, hidden_size=8, intermediate_size=12, num_hidden_layers=1,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=16, **extra)
    model = getattr(transformers, f"{name}ForCausalLM")(config).eval()
    with torch.no_grad():  # norm weights start at 1, biases at 0: make them random
        for p in model.parameters():
            if p.ndim == 1:
                p.uniform_(0.5, 1.5)
    model.save_pretrained(tmp_path, safe_serialization=True)
    example = from_pretrained(tmp_path, TOKENS)
    _exact_weights_match(tmp_path, example)
    assert len(example.layers[0].kv_heads) == 2 and len(example.layers[0].heads) == 4
    assert example.lm_head.tied == bool(extra.get("tie_word_embeddings"))
    assert (example.layers[0].heads[0].b_Q is not None) == (kind == "qwen2" or bool(extra))
    model = model.double()
    layer = model.model.layers[0]
    _language_model_matches(model, example, {
        "layer1.norm1": layer.input_layernorm, "layer1.attention.output": layer.self_attn,
        "layer1.norm2": layer.post_attention_layernorm, "layer1.ffn.output": layer.mlp,
        "final_norm": model.model.norm})


@pytest.mark.parametrize(("norm_first", "activation"), [(False, "relu"), (True, "gelu")])
def test_transformer_encoder_layer_matches_pytorch(norm_first, activation) -> None:
    torch.manual_seed(2)
    layer = torch.nn.TransformerEncoderLayer(4, 2, dim_feedforward=6, activation=activation,
                                             norm_first=norm_first, batch_first=True,
                                             layer_norm_eps=1e-5).eval()
    x = torch.randn(3, 4)
    example = from_torch(layer, x)
    layer = layer.double()
    norms = ("layer1.norm1", "layer1.norm2") if norm_first else ("layer1.add_norm1",
                                                                  "layer1.add_norm2")
    seen = hooked(layer, {"layer1.attention.output": layer.self_attn,
                          norms[0]: layer.norm1, norms[1]: layer.norm2})
    with torch.no_grad():
        out = layer(x.double().unsqueeze(0))[0].numpy()
    g = symformer.derive(example)
    close(certified(g, "output"), out)
    assert len(seen) == 3  # every hook ran
    for name, value in seen.items():
        close(certified(g, name), value)


@pytest.mark.filterwarnings("ignore:enable_nested_tensor")  # nn.Transformer, norm_first
@pytest.mark.parametrize(("norm_first", "activation", "causal", "bias", "whole"), [
    (False, "relu", True, True, False),   # a TransformerDecoderLayer over memory rows
    (True, "gelu", False, False, True),   # nn.Transformer: 2 encoder layers, final norms
])
def test_transformer_decoder_layer_matches_pytorch(norm_first, activation, causal, bias,
                                                   whole) -> None:
    torch.manual_seed(9)
    settings = {"dim_feedforward": 6, "activation": activation, "norm_first": norm_first,
                "batch_first": True, "bias": bias, "layer_norm_eps": 1e-5}
    model = (torch.nn.Transformer(4, 2, num_encoder_layers=2, num_decoder_layers=1,
                                  **settings) if whole
             else torch.nn.TransformerDecoderLayer(4, 2, **settings)).eval()
    with torch.no_grad():  # LayerNorms start at gamma = 1, beta = 0: make them random
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5)
    tgt, src = torch.randn(3, 4), torch.randn(5, 4)
    example = from_torch(model, tgt, causal=causal, memory=src)
    assert example.decoder.causal == causal and len(example.layers) == (2 if whole else 0)
    assert (example.decoder.final_norm is None) != whole
    layer = model.decoder.layers[0] if whole else model
    g = symformer.derive(example)
    rows = module_crosscheck(layer, example, "bfloat16", g)  # over the exact memory
    assert len(rows) == (6 if norm_first else 5) and all(r.ulps < 50 for r in rows)
    assert min(r.digits for r in rows) < 3.5
    model = model.double()
    p = "decoder.layer1"
    norms = ({f"{p}.norm{k}": getattr(layer, f"norm{k}") for k in (1, 2, 3)} if norm_first
             else {f"{p}.add_norm1": layer.norm1, f"{p}.add_norm2": layer.norm2})
    seen = hooked(layer, {f"{p}.self.output": layer.self_attn,
                          f"{p}.cross.output": layer.multihead_attn,
                          f"{p}.ffn.output": layer.linear2, f"{p}.add_norm3": layer, **norms})
    mask = (torch.nn.Transformer.generate_square_subsequent_mask(3, dtype=torch.float64)
            if causal else None)
    x, y = src.double()[None], tgt.double()[None]
    with torch.no_grad():
        memory = model.encoder(x) if whole else x
        out = (model(x, y, tgt_mask=mask, tgt_is_causal=causal) if whole
               else model(y, x, tgt_mask=mask, tgt_is_causal=causal))
    close(certified(g, "output"), memory)
    close(certified(g, "decoder.output"), out)
    exported = model_class(example)()()  # the exported module computes the same
    np.testing.assert_allclose(exported["decoder.output"].numpy(), out[0].numpy(), rtol=0,
                               atol=1e-12)
    assert len(seen) == len(norms) + 4  # every hook ran
    for name, value in seen.items():
        close(certified(g, name), value)


def test_multihead_attention_matches_pytorch() -> None:
    torch.manual_seed(3)
    mha = torch.nn.MultiheadAttention(4, 2).eval()
    x = torch.randn(3, 4)
    example = from_torch(mha, x, causal=True)
    mha = mha.double()
    xd = x.double()
    mask = torch.nn.Transformer.generate_square_subsequent_mask(3, dtype=torch.float64)
    with torch.no_grad():
        out, weights = mha(xd, xd, xd, attn_mask=mask, average_attn_weights=False)
    g = symformer.derive(example)
    close(certified(g, "output"), out.numpy())
    got = g["layer1.head2.weights"].balls(128)
    assert got[0][1] is None or float(got[0][1].mid()) == 0  # masked: exactly zero
    close(np.array([[0.0 if b is None else float(b.mid()) for b in row] for row in got]),
          weights[1].numpy())


def test_unsupported_features_are_refused_in_one_line(tmp_path) -> None:
    layer = torch.nn.TransformerEncoderLayer(4, 2, dim_feedforward=6)  # train mode
    with pytest.raises(NotSupportedError, match="dropout in train mode"):
        from_torch(layer, torch.zeros(2, 4))
    decoder = torch.nn.TransformerDecoderLayer(4, 2, dim_feedforward=6).eval()
    with pytest.raises(InputError, match="give memory"):
        from_torch(decoder, torch.zeros(2, 4))
    with pytest.raises(NotSupportedError, match="activation"):
        decoder.activation = torch.tanh
        from_torch(decoder, torch.zeros(2, 4), memory=torch.zeros(3, 4))


@pytest.mark.parametrize("window", [2, 4096])
def test_mistral_sliding_window_matches_hugging_face(tmp_path, monkeypatch, window) -> None:
    """A window shorter than the sentence masks the keys w or more positions back (the
    example's sliding_window); Mistral's default 4096 masks nothing more than causal."""
    _llama_float64(monkeypatch, "mistral")
    torch.manual_seed(0)
    config = transformers.MistralConfig(vocab_size=16, hidden_size=8, intermediate_size=8,
                                        num_hidden_layers=1, num_attention_heads=2,
                                        num_key_value_heads=1, sliding_window=window)
    model = transformers.MistralForCausalLM(config).eval()
    model.save_pretrained(tmp_path, safe_serialization=True)
    example = from_pretrained(tmp_path, TOKENS)
    assert example.sliding_window == (2 if window == 2 else None)
    g = symformer.derive(example)
    weights = g["layer1.head1.weights"].rounded(decimals=6)
    assert (float(weights[3][0].digits) == 0) == (window == 2)  # 3 back: masked by w = 2
    model = model.double()
    with torch.no_grad():
        logits = model(torch.tensor([TOKENS])).logits[0].numpy()
    exact = np.array([[float(b.mid()) for b in row] for row in g["logits"].balls(128)])
    close(exact, logits)
    from symformer.frameworks.torch_check import torch_crosscheck

    rows = torch_crosscheck(example, "float64", g)  # the exported module masks alike
    assert max(r.ulps for r in rows) < 100, max(rows, key=lambda r: r.ulps)


def _run_module_file(path, name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["gpt2_style", "llama_style", None, "encoder_decoder"])
def test_exported_torch_module_reproduces_the_exact_values(name, tmp_path) -> None:
    example = symformer.load_example(name)
    path = tmp_path / "model.py"
    path.write_text(symformer.to_torch(example))
    stages = _run_module_file(path, f"model_{name}").Model()()
    g = symformer.derive(example)
    assert {s.name for s in g} <= set(stages)  # every stage, Q, K, V and statistics too
    for stage, value in stages.items():
        balls = g[stage].balls(128)
        exact = np.array([[np.nan if b is None else float(b.mid()) for b in row]
                          for row in balls])
        known = ~np.isnan(exact)
        value = value.numpy()
        scale = np.abs(exact[known]).max()
        assert np.abs(exact[known] - value[known]).max() <= 1e-14 * max(scale, 1e-300), stage


def test_export_of_a_table_keyed_by_word_and_refusal_of_given_rope_angles() -> None:
    text = """
vocab = ["I", "like", "tea", "coffee"]
tokens = ["tea", "I", "tea"]
positional_encoding = "none"
embeddings = { I = [1, 0], tea = [0, 0.5] }
[[layer]]
[[layer.head]]
W_Q = [[1, 0], [0, 1]]
W_K = [[1, 0], [0, 1]]
W_V = [[1, 0], [0, 2]]
"""
    example = symformer.parse_example(text)  # the table holds the rows of I and tea only
    stages = model_class(example)()()
    assert stages["embeddings"].tolist() == [[0, 0.5], [1, 0], [0, 0.5]]
    close(certified(symformer.derive(example), "output"), stages["output"].numpy())
    rope = text.replace('"none"', '"rope"\nrope_theta = 0.5')
    with pytest.raises(NotSupportedError, match="rope_theta"):
        model_class(symformer.parse_example(rope))


def test_cli_import_then_export_torch_round_trip(tmp_path) -> None:
    from symformer.cli import main

    model = tiny_gpt2(tmp_path / "hf", 4, n_embd=4, vocab_size=8, n_positions=4)
    out = tmp_path / "gpt2.toml"
    assert main(["import", str(tmp_path / "hf"), "--tokens", "1,t2,3", "--out", str(out)]) == 0
    assert "GPT2LMHeadModel" in out.read_text()
    assert main(["export", str(out), "--out", str(tmp_path / "pt"), "--format", "torch"]) == 0
    logits = _run_module_file(tmp_path / "pt" / "model.py", "model_gpt2").Model()()["logits"]
    with torch.no_grad():
        ref = model.double()(torch.tensor([[1, 2, 3]])).logits[0]
    assert torch.allclose(logits, ref, rtol=1e-12, atol=1e-15)


def test_crosscheck_torch_errors_are_consistent_with_the_dtype(capsys) -> None:
    from symformer.cli import main
    from symformer.frameworks.torch_check import torch_crosscheck, worst_stage

    example = symformer.load_example("gpt2_style")
    g = symformer.derive(example)
    worst = {dt: worst_stage(torch_crosscheck(example, dt, g))
             for dt in ("float64", "float32", "bfloat16")}
    # a few units of each dtype's epsilon at most, on a model this small
    assert all(0 < w.ulps < 50 for w in worst.values()), worst
    assert worst["float64"].digits > 13 > worst["float32"].digits > 5
    assert 0.5 < worst["bfloat16"].digits < 3.5
    assert main(["crosscheck", "gpt2_style", "--torch", "--dtype", "float32",
                 "--tol", "1e-5"]) == 0
    out = capsys.readouterr().out
    assert "loses most digits: " + worst["float32"].stage in out
    assert main(["crosscheck", "gpt2_style", "--torch", "--dtype", "bfloat16",
                 "--tol", "1e-5"]) == 1


def test_crosscheck_of_the_users_own_module(tmp_path) -> None:
    model = tiny_gpt2(tmp_path, 5)
    example = from_pretrained(tmp_path, TOKENS)
    g = symformer.derive(example)
    rows = {dt: module_crosscheck(model, example, dt, g) for dt in ("float64", "float32")}
    assert {r.stage for r in rows["float64"]} >= {"logits", "layer1.norm1", "final_norm"}
    assert max(r.ulps for r in rows["float64"]) < 50
    assert 0 < max(r.ulps for r in rows["float32"]) < 50
    assert next(model.parameters()).dtype == torch.float32  # the user's model is untouched
    layer = torch.nn.TransformerEncoderLayer(4, 2, dim_feedforward=6, norm_first=True).eval()
    x = torch.randn(3, 4)
    rows = module_crosscheck(layer, from_torch(layer, x, causal=True), "bfloat16")
    assert len(rows) == 4 and all(r.ulps < 50 for r in rows)
    assert min(r.digits for r in rows) < 3.5


# -- BERT encoders (in this file: its worker has imported torch and transformers' models
# already, a few seconds of CPU a file of its own would pay again) ----------------------

WORDS = ["[PAD]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "##s",
         "a", "dog"]
SENTENCE = ["[CLS]", "the", "cat", "[SEP]", "sat", "[SEP]"]
SEGMENTS = [0, 0, 0, 0, 1, 1]


def _tiny_bert(folder, seed: int, layers: int = 2, masked_lm: bool = True,
               name: str = "Bert"):
    """A random BERT, RoBERTa or DistilBERT (``name``; its LayerNorms random too) saved
    to ``folder`` with a vocab.txt."""
    torch.manual_seed(seed)
    sizes = (dict(dim=8, n_layers=layers, n_heads=2, hidden_dim=12) if name == "DistilBert"
             else dict(hidden_size=8, num_hidden_layers=layers, num_attention_heads=2,
                       intermediate_size=12, type_vocab_size=2))
    config = getattr(transformers, f"{name}Config")(
        vocab_size=len(WORDS), max_position_embeddings=8, attn_implementation="eager",
        pad_token_id=0, **sizes)
    kind = getattr(transformers, f"{name}ForMaskedLM" if masked_lm else f"{name}Model")
    model = kind(config).eval()
    with torch.no_grad():  # LayerNorms start at gamma = 1, beta = 0: make them random
        for key, p in model.named_parameters():
            if "norm" in key.lower():
                p.uniform_(0.5, 1.5)
    model.save_pretrained(folder, safe_serialization=True)
    (folder / "vocab.txt").write_text("\n".join(WORDS) + "\n")
    return model


def test_bert_every_stage_matches_hugging_face(tmp_path) -> None:
    model = _tiny_bert(tmp_path, seed=6)
    example = from_pretrained(tmp_path, SENTENCE, segments=SEGMENTS)
    assert example.tokens == tuple(SENTENCE) and example.segments == tuple(SEGMENTS)
    table = model.bert.embeddings.token_type_embeddings.weight.detach()
    assert all(Fraction(int(example.token_type_embeddings[i, j].p),
                        int(example.token_type_embeddings[i, j].q)) == Fraction(float(table[i, j]))
               for i in range(2) for j in range(8))  # every weight its exact dyadic value
    g = symformer.derive(example)
    rows = module_crosscheck(model, example, "float32", g)  # the user's own BERT
    assert len(rows) == 11 and all(0 < r.ulps < 50 for r in rows)
    assert {"logits", "lm_head.transform_norm"} <= {r.stage for r in rows}
    model = model.double()
    bert = model.bert
    layer = bert.encoder.layer[0]
    seen = hooked(model, {
        "lm_head.transform_norm": model.cls.predictions.transform,
        "embeddings": bert.embeddings.word_embeddings,
        "token_type_embeddings": bert.embeddings.token_type_embeddings,
        "layer1.attention.concat": layer.attention.self,
        "layer1.add_norm1": layer.attention.output,
        "layer1.ffn.activation": layer.intermediate,
        "layer1.ffn.output": layer.output.dense,
    })
    ids = torch.tensor([[WORDS.index(t) for t in SENTENCE]])
    with torch.no_grad():
        out = model(ids, token_type_ids=torch.tensor([SEGMENTS]), output_hidden_states=True,
                    output_attentions=True)
    assert len(seen) == 7  # every hook ran
    for name, value in seen.items():
        close(certified(g, name), value)
    close(certified(g, "embedding_norm"), out.hidden_states[0])
    for number in (1, 2):
        close(certified(g, f"layer{number}.add_norm2"), out.hidden_states[number])
        for head in (1, 2):
            close(certified(g, f"layer{number}.head{head}.weights"),
                  out.attentions[number - 1][0, head - 1])
    close(certified(g, "output"), out.hidden_states[2])
    close(certified(g, "logits"), out.logits)  # the masked-LM head, tied to the embeddings
    assert example.lm_head.tied and example.lm_head.W_transform is not None
    # the exported PyTorch module computes the same (token types, norms, the head)
    stages = model_class(example)()()
    np.testing.assert_allclose(stages["logits"].numpy(), out.logits[0].numpy(), rtol=0,
                               atol=1e-12)


@pytest.mark.parametrize("name", ["Bert", "Roberta", "DistilBert"])
def test_bert_family_imported_by_the_command_matches_hugging_face(tmp_path, name) -> None:
    """RoBERTa: positions from pad + 1; DistilBERT: no token types, its masked-LM head."""
    from symformer.cli import main

    distil = name == "DistilBert"
    model = _tiny_bert(tmp_path / "hf", seed=7, layers=1, masked_lm=distil,
                       name=name).double()
    out = tmp_path / "bert.toml"
    segments = [] if distil else ["--segments", "0,1,1,0"]
    assert main(["import", str(tmp_path / "hf"), "--tokens", "[CLS],cat,5,[SEP]", *segments,
                 "--out", str(out)]) == 0
    text = out.read_text()
    assert ("segments = [0, 1, 1, 0]" in text) != distil and "[embedding_norm]" in text
    assert ("[lm_head]" in text) == distil
    assert ("does not compute): pooler" in text) != distil
    with torch.no_grad():
        ref = model(torch.tensor([[1, 5, 5, 2]]),
                    **({} if distil else {"token_type_ids": torch.tensor([[0, 1, 1, 0]])}))
    g = symformer.derive(symformer.load_example(out))
    if distil:
        close(certified(g, "logits"), ref.logits)
    else:
        close(certified(g, "output"), ref.last_hidden_state)
    if name == "Bert":
        assert pretrained_text(tmp_path / "hf", [1])[0].count("segments = [0]") == 1
    if name == "Roberta":
        with pytest.raises(NotSupportedError, match="padding token"):
            from_pretrained(tmp_path / "hf", [1, 0])
    if distil:
        with pytest.raises(NotSupportedError, match="no token types"):
            from_pretrained(tmp_path / "hf", [1, 2], segments=[0, 1])
    rows = module_crosscheck(model, symformer.load_example(out), "float32", g)
    assert len(rows) == 5 and all(0 < r.ulps < 50 for r in rows)  # the family, hooked


def test_what_bert_cannot_map_is_refused_in_one_line(tmp_path) -> None:
    _tiny_bert(tmp_path, seed=8, layers=1)
    with pytest.raises(InputError, match="token_type_embeddings"):
        from_pretrained(tmp_path, [1, 2], segments=[0, 2])
    with pytest.raises(InputError, match="3 token types for 2 tokens"):
        from_pretrained(tmp_path, [1, 2], segments=[0, 1, 1])
    config = (tmp_path / "config.json").read_text()
    (tmp_path / "config.json").write_text(config.replace('"is_decoder": false',
                                                         '"is_decoder": true'))
    with pytest.raises(NotSupportedError, match="is_decoder"):
        from_pretrained(tmp_path, [1, 2])


def test_crosscheck_of_the_users_own_model_directory(tmp_path, capsys) -> None:
    """``crosscheck DIR``: the user's GPT-2 in float32, each hooked stage's error; the
    logits' row agrees with an independent comparison (the model run here, the exact
    logits from the derivation)."""
    from symformer.cli import main
    from symformer.frameworks.torch_check import hook_paths

    model = tiny_gpt2(tmp_path / "m", 11)
    assert main(["crosscheck", str(tmp_path / "m"), "--tokens", "1,2,3", "--dtype",
                 "float32", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    rows = {r["stage"]: r for r in report["stages"]}
    assert {"layer1.norm1", "layer1.attention.output", "final_norm", "logits"} <= set(rows)
    exact = symformer.derive(from_pretrained(tmp_path / "m", [1, 2, 3]))["logits"]
    exact = np.array([[float(b.mid()) for b in row] for row in exact.balls(128)])
    with torch.no_grad():
        got = model(torch.tensor([[1, 2, 3]])).logits[0].double().numpy()
    rel = np.abs(got - exact).max() / np.abs(exact).max()
    assert rows["logits"]["rel_error"] == pytest.approx(rel, rel=1e-6)
    assert hook_paths(model)["layer1.norm1"] == "transformer.h.0.ln_1"
    assert main(["crosscheck", str(tmp_path / "m"), "--tokens", "1", "--causal"]) == 2


def test_crosscheck_over_a_file_of_prompts(tmp_path, capsys) -> None:
    """``crosscheck DIR --prompts``: each prompt's rows equal its own ``crosscheck DIR
    --text`` run; a prompt that cannot be read is named, the others kept."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    from symformer.cli import main

    tiny_gpt2(tmp_path / "m", 12)
    tok = Tokenizer(WordLevel({f"w{i}": i for i in range(16)}, unk_token="w0"))
    tok.pre_tokenizer = Whitespace()
    (tmp_path / "m" / "tokenizer.json").write_text(tok.to_str())
    (tmp_path / "p.txt").write_text("w1 w2\n# skipped\nw3 w4 w5\n")
    assert main(["crosscheck", str(tmp_path / "m"), "--prompts", str(tmp_path / "p.txt"),
                 "--dtype", "float32", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [p["prompt"] for p in report["prompts"]] == ["w1 w2", "w3 w4 w5"]
    assert main(["crosscheck", str(tmp_path / "m"), "--text", "w3 w4 w5", "--dtype",
                 "float32", "--json"]) == 0
    alone = json.loads(capsys.readouterr().out)["stages"]
    assert report["prompts"][1]["stages"] == alone
