"""Hugging Face BERT encoders imported exactly, against BERT's own forward pass.

Tiny random BERT models are built here with a fixed seed (no hub), saved with
``save_pretrained``, imported, derived, and every stage HF's float64 forward reaches
(``output_hidden_states``, ``output_attentions`` and forward hooks) compared with
symformer's certified values.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import symformer  # noqa: E402
from symformer.errors import InputError, NotSupportedError  # noqa: E402
from symformer.frameworks import from_pretrained  # noqa: E402
from symformer.frameworks.torch_out import model_class  # noqa: E402
from test_frameworks import certified, close, hooked  # noqa: E402

WORDS = ["[PAD]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "##s",
         "a", "dog"]
SENTENCE = ["[CLS]", "the", "cat", "[SEP]", "sat", "[SEP]"]
SEGMENTS = [0, 0, 0, 0, 1, 1]


def _tiny_bert(folder, seed: int, layers: int = 2, masked_lm: bool = True):
    """A random BERT (norms and biases random too) saved to ``folder`` with a vocab.txt."""
    torch.manual_seed(seed)
    config = transformers.BertConfig(
        vocab_size=len(WORDS), hidden_size=8, num_hidden_layers=layers,
        num_attention_heads=2, intermediate_size=12, max_position_embeddings=8,
        type_vocab_size=2, attn_implementation="eager")
    kind = transformers.BertForMaskedLM if masked_lm else transformers.BertModel
    model = kind(config).eval()
    with torch.no_grad():  # LayerNorms start at gamma = 1, beta = 0: make them random
        for name, p in model.named_parameters():
            if "LayerNorm" in name:
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
    bert = model.double().bert
    layer = bert.encoder.layer[0]
    seen = hooked(bert, {
        "embeddings": bert.embeddings.word_embeddings,
        "token_type_embeddings": bert.embeddings.token_type_embeddings,
        "layer1.attention.concat": layer.attention.self,
        "layer1.add_norm1": layer.attention.output,
        "layer1.ffn.activation": layer.intermediate,
        "layer1.ffn.output": layer.output.dense,
    })
    ids = torch.tensor([[WORDS.index(t) for t in SENTENCE]])
    with torch.no_grad():
        out = bert(ids, token_type_ids=torch.tensor([SEGMENTS]), output_hidden_states=True,
                   output_attentions=True)
    g = symformer.derive(example)
    assert len(seen) == 6  # every hook ran
    for name, value in seen.items():
        close(certified(g, name), value)
    close(certified(g, "embedding_norm"), out.hidden_states[0])
    for number in (1, 2):
        close(certified(g, f"layer{number}.add_norm2"), out.hidden_states[number])
        for head in (1, 2):
            close(certified(g, f"layer{number}.head{head}.weights"),
                  out.attentions[number - 1][0, head - 1])
    close(certified(g, "output"), out.last_hidden_state)
    # the exported PyTorch module computes the same (token types, embedding norm)
    stages = model_class(example)()()
    np.testing.assert_allclose(stages["output"].numpy(), out.last_hidden_state[0].numpy(),
                               rtol=0, atol=1e-12)


def test_bert_model_ids_default_to_segment_0_and_the_mlm_head_is_named(tmp_path) -> None:
    model = _tiny_bert(tmp_path, seed=7, layers=1, masked_lm=False).double()
    from symformer.frameworks.hf_in import pretrained_text

    text, _ = pretrained_text(tmp_path, [1, 5, 2])
    assert "segments = [0, 0, 0]" in text and "[embedding_norm]" in text
    assert "not imported: pooler" in text
    example = symformer.parse_example(text)
    with torch.no_grad():
        ref = model(torch.tensor([[1, 5, 2]])).last_hidden_state
    close(certified(symformer.derive(example), "output"), ref)


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
