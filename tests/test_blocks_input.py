"""Issue 10's keys: every bad input is one line naming the file and the key, exit 2."""

from __future__ import annotations

from importlib import resources

import pytest

from symformer.cli import main


def shipped(name: str) -> str:
    return resources.files("symformer").joinpath(f"examples/{name}.toml").read_text("utf-8")


GPT2, LLAMA, ATTN = shipped("gpt2_style"), shipped("llama_style"), shipped("attention_only")

W_3x1 = "[[1], [0], [0]]"


@pytest.mark.parametrize(("text", "message"), [
    # the attention scale
    (ATTN.replace('scale = "none"', "scale = 0"), "scale must be positive"),
    (ATTN.replace('scale = "none"', "scale = -2"), "scale must be positive"),
    (ATTN.replace('scale = "none"', 'scale = "sqrt_d"'),
     'scale must be "sqrt_dk", "none" or a positive number'),
    # RoPE needs an even d_k
    (ATTN.replace('positional_encoding = "none"', 'positional_encoding = "rope"'),
     "layer 1, head 1: rope needs an even d_k"),
    # grouped-query attention
    (LLAMA.replace("\nW_Q = [", "\nkv_head = 3\nW_Q = [", 1),
     "layer 1, head 1: kv_head must be a key/value head number from 1 to 2, found 3"),
    (LLAMA.replace("\nW_Q = [", "\nkv_head = 0\nW_Q = [", 1), "kv_head must be"),
    (ATTN.replace("\nW_Q = [", "\nkv_head = 1\nW_Q = [", 1),
     "kv_head is given but the layer has no [[layer.kv_head]] tables"),
    # learned positions
    (GPT2.replace("    [0.5, 0, 0, 0],      # position 0\n", "").replace(
        "    [0, 0.5, 0, 0],      # position 1\n", "").replace(
        "    [0, 0, 0.5, 0],      # position 2\n", "").replace(
        "    [0, 0, 0, 0.5],      # position 3\n", ""),
     "positional_embeddings has 2 rows, fewer than the 3 tokens"),
    (ATTN.replace('positional_encoding = "none"', 'positional_encoding = "learned"'),
     'positional_encoding = "learned" needs positional_embeddings'),
    # the LM head
    (GPT2.replace("tied = true ", "tied = true\nW_vocab = [[1]] "),
     "give either W_vocab (4x5) or tied = true"),
    (GPT2.replace("tied = true ", "tied = false "), "give either W_vocab (4x5) or tied = true"),
    (GPT2.replace("tied = true ", 'tied = "yes" '), "tied must be true or false"),
    (LLAMA.replace("    [0, -0.5, 0, 1, 0.5],\n]", "]"), "W_vocab has shape 3x5, expected 4x5"),
    # unknown values
    (LLAMA.replace('\nrope_style = "half"', '\nrope_style = "halves"'),
     "rope_style must be one of"),
    (GPT2.replace('activation = "gelu_tanh"', 'activation = "swish"'),
     "activation must be one of 'relu', 'gelu', 'gelu_tanh', 'silu'"),
    (LLAMA.replace('layer_norm = "rms"', 'layer_norm = "rmsnorm"'),
     "layer_norm must be one of 'biased', 'unbiased', 'whole_matrix', 'rms'"),
    (ATTN.replace('norm = "none"', 'norm = "sandwich"'), "norm must be one of"),
    (ATTN.replace("residual = false", "residual = 0"), "residual must be true or false"),
    # unknown keys, with the closest valid one
    (ATTN.replace("residual = false", "residual = false\ncausual = true"),
     "unknown key 'causual' (did you mean 'causal'?)"),
    (LLAMA.replace("W_gate = [", "W_gat = [", 1), "layer 1: unknown key 'W_gat' (did you mean "
                                                  "'W_gate'?)"),
    (ATTN.replace("\nW_Q = [", "\nb_q = [1, 2, 3]\nW_Q = [", 1),
     "layer 1, head 1: unknown key 'b_q' (did you mean 'b_Q'?)"),
    (LLAMA.replace("W_K = [", "W_k = [", 1), "kv_head 1: unknown key 'W_k' (did you mean "
                                             "'W_K'?)"),
    (GPT2.replace("tied = true ", "tide = true "), "lm_head: unknown key 'tide' (did you mean "
                                                   "'tied'?)"),
    # keys that would otherwise be ignored
    (LLAMA.replace("\nfinal_norm = true", "\nfinal_norm = true\nbeta_f = [0, 0, 0, 0]"),
     'beta_f has no meaning with layer_norm = "rms"'),
    (GPT2.replace("final_norm = true", "final_norm = false"), "gamma_f needs final_norm = true"),
    (ATTN.replace("[[layer]]", f"[[layer]]\nW_2 = {W_3x1}"), "W_2 is given without W_1"),
    (ATTN.replace('positional_encoding = "none"',
                  'positional_encoding = "none"\npositional_encoding_base = 100'),
     "positional_encoding_base is used by the sinusoidal and rope encodings only"),
    (LLAMA.replace('\nrope_style = "half"', '\nrope_style = "half"\npositional_encoding_base = 1'),
     "positional_encoding_base must be greater than 1"),
    # W_O may only be left out when the heads are d_model wide
    (LLAMA.replace("W_O = [", "W_Ox = [", 1), "unknown key 'W_Ox' (did you mean 'W_O'?)"),
])
def test_bad_input_is_one_line_naming_file_and_key(tmp_path, capsys, text, message) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    assert main(["derive", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert str(path) in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_missing_W_O_with_narrow_heads_is_named(tmp_path, capsys) -> None:
    text = LLAMA
    start = text.index("W_O = [")
    end = text.index("\n]\n", start) + 3
    path = tmp_path / "bad.toml"
    path.write_text(text[:start] + text[end:], encoding="utf-8")
    assert main(["derive", str(path)]) == 2
    err = capsys.readouterr().err
    assert "W_O is missing and the heads' value widths add up to 8, not d_model = 4" in err


def test_lm_head_and_decoder_do_not_mix(tmp_path, capsys) -> None:
    decoder = shipped("encoder_decoder")
    path = tmp_path / "bad.toml"
    path.write_text(decoder.replace("[decoder]", "[lm_head]\ntied = true\n\n[decoder]", 1),
                    encoding="utf-8")
    assert main(["derive", str(path)]) == 2
    assert "cannot be combined with a [decoder] table" in capsys.readouterr().err
