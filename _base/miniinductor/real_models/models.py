"""The model builders of miniinductor.real_models (the package docstring lists them): small
random-init library models from configs, with their batches and losses."""
from __future__ import annotations

import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

B, T = 2, 16                 # batch and sequence length of the text models
VOCAB = 96

# -------------------------------------------------------------------------- torchvision
_TORCHVISION_STUBS = None    # the torch.library.Library that holds them, kept alive


def import_torchvision():
    """``import torchvision``, or None if it is not installed, working around a torchvision
    whose compiled extension cannot load.

    PyPI's torchvision wheel (0.28.0 for torch 2.13) is built against PyPI's CUDA torch;
    beside the CPU torch wheel its ``_C.so`` fails to load, torchvision then skips
    registering its operators (``_has_ops()`` is False), but ``_meta_registrations.py``
    still registers fake kernels for ``torchvision::nms`` and ``torchvision::qnms``
    unconditionally, and that raises ``RuntimeError: operator torchvision::nms does not
    exist``: ``import torchvision`` fails, and so does every ``transformers`` model class
    (transformers imports torchvision whenever it is installed). The classification models
    are pure Python and need none of the compiled operators. So: if the import fails that
    way, define the schemas of those two operators (from torchvision's C++ registration),
    with kernels that raise if ever called, and import again. Nothing else changes; with a
    torchvision whose ``_C`` loads, the first import succeeds and no stub is defined."""
    global _TORCHVISION_STUBS
    if "torchvision" in sys.modules and hasattr(sys.modules["torchvision"], "models"):
        return sys.modules["torchvision"]
    try:
        import torchvision
        return torchvision
    except ImportError:
        return None
    except RuntimeError as error:
        if "torchvision::" not in str(error) or _TORCHVISION_STUBS is not None:
            raise
    for module in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
        del sys.modules[module]          # the half-imported package, to import it again
    lib = torch.library.Library("torchvision", "DEF")

    def unavailable(*args, **kwargs):
        raise RuntimeError("torchvision's compiled operators could not be loaded (its _C does not "
                           "match this torch); miniinductor.real_models defined this stub")

    for name in ("nms", "qnms"):
        lib.define(f"{name}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        lib.impl(name, unavailable, "CompositeExplicitAutograd")
    _TORCHVISION_STUBS = lib
    import torchvision
    return torchvision


def _transformers():
    import_torchvision()     # first: if torchvision is installed, transformers imports it
    import transformers
    return transformers


# ------------------------------------------------------------------------------ helpers
def _no_dropout(config):
    """Every dropout probability of a transformers config to 0 (names differ per model:
    dropout, attention_dropout, resid_pdrop, hidden_dropout_prob, encoder_layerdrop...)."""
    for key, value in config.to_dict().items():
        if isinstance(value, float) and ("drop" in key or "pdrop" in key):
            setattr(config, key, 0.0)
    return config


def _check_no_dropout(model: nn.Module, name: str):
    live = [n for n, m in model.named_modules() if isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0]
    assert not live, f"{name}: dropout left on in {live[:5]} (training would not be deterministic)"


def _tokens(gen, low=4, high=VOCAB, shape=(B, T)):
    return torch.randint(low, high, shape, generator=gen)


def _padding_mask(pad: int = 5):
    """[B, T] ones, the last `pad` positions of row 1 zero (right padding)."""
    mask = torch.ones(B, T, dtype=torch.long)
    mask[1, T - pad:] = 0
    return mask


def _masked_labels(ids, mask):
    return ids.masked_fill(mask == 0, -100)


def _own_loss(output):
    return output.loss


def main_output(output) -> torch.Tensor:
    """The tensor compared between compiled and eager: logits, or the first tensor."""
    if isinstance(output, torch.Tensor):
        return output
    logits = getattr(output, "logits", None)
    if isinstance(logits, torch.Tensor):
        return logits
    if isinstance(output, (tuple, list)):
        return main_output(output[0])
    raise TypeError(f"no tensor in {type(output).__name__}")


def _mse(targets):
    """loss = the sum over the outputs of mean((output_i - target_i)^2), fixed random targets."""
    def loss_fn(output):
        outputs = output if isinstance(output, (tuple, list)) else (output,)
        return sum(F.mse_loss(o, t.to(o.device)) for o, t in zip(outputs, targets, strict=True))
    return loss_fn


# ------------------------------------------------------------------------- transformers
HF_MODELS = ["gpt2", "opt", "llama", "mistral", "qwen2", "bert", "distilbert", "roberta", "t5", "bart",
             "vit", "whisper"]
HF_ATTENTION = ["sdpa", "eager"]


def _hf_model(name: str, attn: str):
    """transformers model `name` from a small config, attention `attn`, dropout off."""
    tf = _transformers()
    common = dict(vocab_size=VOCAB, pad_token_id=0, bos_token_id=1, eos_token_id=2, attn_implementation=attn)
    decoder_lm = dict(hidden_size=48, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                      max_position_embeddings=64, **common)
    encoder = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                   max_position_embeddings=64, **common)
    seq2seq = dict(encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
                   encoder_ffn_dim=64, decoder_ffn_dim=64, d_model=32)
    if name == "gpt2":
        cls, cfg = tf.GPT2LMHeadModel, tf.GPT2Config(n_positions=64, n_embd=32, n_layer=2, n_head=4, **common)
    elif name == "opt":
        cls, cfg = tf.OPTForCausalLM, tf.OPTConfig(hidden_size=32, ffn_dim=64, num_hidden_layers=2, num_attention_heads=4,
                                                   max_position_embeddings=64, word_embed_proj_dim=32, **common)
    elif name == "llama":          # grouped-query attention: 4 query heads share 2 key/value heads
        cls, cfg = tf.LlamaForCausalLM, tf.LlamaConfig(num_key_value_heads=2, **decoder_lm)
    elif name == "mistral":        # and a sliding window shorter than the sequence
        cls, cfg = tf.MistralForCausalLM, tf.MistralConfig(num_key_value_heads=2, sliding_window=8, **decoder_lm)
    elif name == "qwen2":          # multi-query: 1 key/value head
        cls, cfg = tf.Qwen2ForCausalLM, tf.Qwen2Config(num_key_value_heads=1, **decoder_lm)
    elif name == "bert":
        cls, cfg = tf.BertForSequenceClassification, tf.BertConfig(type_vocab_size=2, num_labels=3, **encoder)
    elif name == "roberta":        # positions count from pad_token_id + 1: max_position_embeddings >= T + 2
        cls, cfg = tf.RobertaForMaskedLM, tf.RobertaConfig(type_vocab_size=1, **dict(encoder, pad_token_id=1, bos_token_id=0))
    elif name == "distilbert":
        cls, cfg = tf.DistilBertForMaskedLM, tf.DistilBertConfig(dim=32, hidden_dim=64, n_layers=2, n_heads=4,
                                                                 max_position_embeddings=64, **common)
    elif name == "t5":
        cls, cfg = tf.T5ForConditionalGeneration, tf.T5Config(
            d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4, relative_attention_num_buckets=8,
            relative_attention_max_distance=16, decoder_start_token_id=0, **common)
    elif name == "bart":
        cls, cfg = tf.BartForConditionalGeneration, tf.BartConfig(
            max_position_embeddings=64, decoder_start_token_id=2, **seq2seq, **dict(common, pad_token_id=1, bos_token_id=0))
    elif name == "vit":
        cls, cfg = tf.ViTForImageClassification, tf.ViTConfig(
            image_size=16, patch_size=4, num_channels=3, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=64, num_labels=10, attn_implementation=attn)
    elif name == "whisper":        # the encoder takes 2 * max_source_positions frames (a stride-2 conv)
        cls, cfg = tf.WhisperForConditionalGeneration, tf.WhisperConfig(
            num_mel_bins=16, max_source_positions=16, max_target_positions=32, decoder_start_token_id=3,
            suppress_tokens=[], begin_suppress_tokens=[], **seq2seq, **common)
    else:
        raise KeyError(name)
    model = cls(_no_dropout(cfg))
    assert model.config._attn_implementation == attn, (name, model.config._attn_implementation)
    return model


def _hf_batch(name: str, gen):
    """One batch of model `name`'s inputs, labels included (the model computes its loss)."""
    ids, mask = _tokens(gen), _padding_mask()
    if name == "gpt2" or name == "mistral":       # no attention mask: SDPA's is_causal path (gpt2)
        return dict(input_ids=ids, labels=ids)
    if name in ("opt", "llama", "qwen2", "distilbert"):
        return dict(input_ids=ids, attention_mask=mask, labels=_masked_labels(ids, mask))
    if name == "roberta":
        ids = ids.masked_fill(mask == 0, 1)       # its pad_token_id
        return dict(input_ids=ids, attention_mask=mask, labels=_masked_labels(ids, mask))
    if name == "bert":
        token_types = torch.zeros(B, T, dtype=torch.long)
        token_types[:, T // 2:] = 1
        return dict(input_ids=ids, attention_mask=mask, token_type_ids=token_types,
                    labels=torch.randint(0, 3, (B,), generator=gen))
    if name in ("t5", "bart"):
        ids = ids.masked_fill(mask == 0, 0 if name == "t5" else 1)
        return dict(input_ids=ids, attention_mask=mask, labels=_tokens(gen, shape=(B, T // 2)))
    if name == "vit":
        return dict(pixel_values=torch.randn(B, 3, 16, 16, generator=gen), labels=torch.randint(0, 10, (B,), generator=gen))
    if name == "whisper":
        return dict(input_features=torch.randn(B, 16, 32, generator=gen), labels=_tokens(gen, shape=(B, T // 2)))
    raise KeyError(name)


# ---------------------------------------------------------------------------- torch.nn
class _Encoder(nn.Module):
    """A linear input projection, then nn.TransformerEncoder (2 batch_first layers)."""

    def __init__(self, d=32, heads=4, **layer):
        super().__init__()
        self.proj = nn.Linear(24, d)
        self.encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(d, heads, dim_feedforward=64, dropout=0.0, batch_first=True, **layer),
            num_layers=2, enable_nested_tensor=False)

    def forward(self, x, mask=None, src_key_padding_mask=None, is_causal=None):
        return self.encoder(self.proj(x), mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=is_causal)


class _SelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(32, 4, batch_first=True)

    def forward(self, x, key_padding_mask):
        out, weights = self.attn(x, x, x, key_padding_mask=key_padding_mask, need_weights=False)
        assert weights is None
        return out


class _CrossAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(32, 4, batch_first=True, kdim=24, vdim=20)

    def forward(self, x, key, value, attn_mask):
        return self.attn(x, key, value, attn_mask=attn_mask, need_weights=True)   # (out, mean weights)


NN_MODELS = ["nn-encoder", "nn-encoder-padding", "nn-encoder-causal", "nn-mha", "nn-mha-weights"]
S = 12                       # nn-mha-weights' key length


def _nn_model(name: str) -> nn.Module:
    if name in ("nn-encoder", "nn-encoder-padding"):
        return _Encoder()
    if name == "nn-encoder-causal":
        return _Encoder(norm_first=True, activation="gelu")
    if name == "nn-mha":
        return _SelfAttention()
    if name == "nn-mha-weights":
        return _CrossAttention()
    raise KeyError(name)


def _nn_batch(name: str, gen):
    """(inputs, loss_fn): the loss is the mean squared error to random targets."""
    x, target = torch.randn(B, T, 24, generator=gen), torch.randn(B, T, 32, generator=gen)
    pad = _padding_mask().eq(0)                                   # True = ignore
    if name == "nn-encoder":
        inputs = dict(x=x)
    elif name == "nn-encoder-padding":
        inputs = dict(x=x, src_key_padding_mask=pad)
    elif name == "nn-encoder-causal":
        inputs = dict(x=x, mask=nn.Transformer.generate_square_subsequent_mask(T), is_causal=True)
    elif name == "nn-mha":
        inputs = dict(x=torch.randn(B, T, 32, generator=gen), key_padding_mask=pad)
    elif name == "nn-mha-weights":
        inputs = dict(x=torch.randn(B, T, 32, generator=gen), key=torch.randn(B, S, 24, generator=gen),
                      value=torch.randn(B, S, 20, generator=gen), attn_mask=torch.randn(T, S, generator=gen))
        return inputs, _mse([target, torch.randn(B, T, S, generator=gen).softmax(-1)])
    else:
        raise KeyError(name)
    return inputs, _mse([target])


# ------------------------------------------------------------------------- torchvision
TORCHVISION_MODELS = ["resnet18", "mobilenet_v3_small"]


def _torchvision_model(name: str) -> nn.Module:
    tv = import_torchvision()
    if tv is None:
        raise ModuleNotFoundError("torchvision is not installed")
    extra = {"dropout": 0.0} if name.startswith("mobilenet") else {}
    return getattr(tv.models, name)(weights=None, num_classes=10, **extra)


def _torchvision_batch(name: str, gen):
    target = torch.randint(0, 10, (B,), generator=gen)
    return dict(x=torch.randn(B, 3, 64, 64, generator=gen)), lambda out: F.cross_entropy(out, target.to(out.device))


# ----------------------------------------------------------------------------- the list
MODELS = [f"{m}-{a}" for m in HF_MODELS for a in HF_ATTENTION] + NN_MODELS + TORCHVISION_MODELS


def needs(name: str) -> str | None:
    """The optional package model `name` needs: "transformers", "torchvision" or None."""
    if name in TORCHVISION_MODELS:
        return "torchvision"
    return None if name in NN_MODELS else "transformers"


def available(name: str) -> bool:
    """Can model `name` be built here (its optional package importable)?"""
    package = needs(name)
    if package == "torchvision":
        return import_torchvision() is not None
    if package == "transformers":
        try:
            _transformers()
        except ImportError:
            return False
    return True


def _split(name: str):
    """(family, base name, attention) of model `name`."""
    if name in NN_MODELS:
        return "nn", name, None
    if name in TORCHVISION_MODELS:
        return "torchvision", name, None
    base, _, attn = name.rpartition("-")
    if base not in HF_MODELS or attn not in HF_ATTENTION:
        raise KeyError(f"unknown model {name!r}; known: {', '.join(MODELS)}")
    return "transformers", base, attn


def make_model(name: str, seed: int = 0) -> nn.Module:
    """Model `name` (see MODELS), random weights from `seed`: float32, on the CPU, in
    training mode, with every dropout off."""
    family, base, attn = _split(name)
    torch.manual_seed(seed)
    model = (_nn_model(base) if family == "nn" else _torchvision_model(base) if family == "torchvision"
             else _hf_model(base, attn))
    model = model.float().train()
    _check_no_dropout(model, name)
    return model


def make_batch(name: str, gen: torch.Generator):
    """(inputs, loss_fn): the keyword arguments of one call of model `name` (a new batch
    from `gen` each time) and the loss of its output."""
    family, base, _ = _split(name)
    if family == "nn":
        return _nn_batch(base, gen)
    if family == "torchvision":
        return _torchvision_batch(base, gen)
    return _hf_batch(base, gen), _own_loss


def build(name: str, seed: int = 0):
    """(model, example inputs, loss_fn) of model `name`, from `seed`: `make_model`, and
    the first batch `compare_training` trains it on."""
    return (make_model(name, seed), *make_batch(name, torch.Generator().manual_seed(seed + 1)))
