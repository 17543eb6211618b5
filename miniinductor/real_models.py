"""Real models: the library classes users train, small and random, compiled vs eager.

miniinductor/zoo.py writes its architectures by hand, attention included, so it never
meets what a user's model calls: Hugging Face ``transformers`` models attend through
``F.scaled_dot_product_attention`` by default (``attn_implementation="sdpa"``), which
AOTAutograd captures as ``aten._scaled_dot_product_flash_attention_for_cpu`` (a wrong
decomposition of it once gave wrong gradients while every zoo model passed). This module
builds the library classes themselves from configs -- random initialisation, no downloads,
2 layers, width 32-48, a vocabulary of 96 -- and trains them compiled and eagerly side
by side (tests/test_real_models.py, benchmarks/real_models_gpu.py).

``build(name)`` returns ``(model, inputs, loss_fn)``: the module (float32, every dropout
probability 0 so that training mode is deterministic), the keyword arguments of one call,
and ``loss_fn(output) -> scalar`` (``make_model`` and ``make_batch`` give them apart: a new
batch per step). ``compare_training(name)`` runs ``torch.compile(model,
backend="miniinductor")`` and an eager deepcopy for a few SGD steps (the optimizer runs
eagerly, as users run it) and reports every step's loss, output and parameter gradient
errors. ``MODELS`` lists the names:

    transformers (each twice: NAME-sdpa, the default attention, and NAME-eager, the
    explicit matmul/softmax path of attn_implementation="eager"):
      gpt2        causal LM, no attention mask (SDPA's is_causal path), tied embeddings
      opt         causal LM, a right-padding attention mask, learned offset positions
      llama       causal LM, RMSNorm, rotary, SwiGLU, grouped-query attention (4 q / 2 kv
                  heads), a right-padding mask
      mistral     llama-like, a sliding window (8) shorter than the sequence (16), GQA 4/2
      qwen2       llama-like with q/k/v biases, multi-query attention (4 q / 1 kv head)
      bert        sequence classification (pooler), token types, a padding mask
      distilbert  masked LM, a padding mask
      roberta     masked LM, padding-offset positions, a padding mask
      t5          encoder-decoder, relative position bias, cross-attention, its own loss
      bart        encoder-decoder, learned positions, cross-attention, a padding mask
      vit         image classification, patch convolution, class token
      whisper     Conv1d front end on log-mel features, encoder-decoder
    torch.nn:
      nn-encoder           nn.TransformerEncoder of 2 batch_first post-LN layers, no mask
      nn-encoder-padding   the same with a src_key_padding_mask
      nn-encoder-causal    pre-LN (norm_first), GELU, a causal mask with is_causal=True
      nn-mha               nn.MultiheadAttention self-attention, key_padding_mask,
                           need_weights=False (the SDPA path)
      nn-mha-weights       cross-attention with kdim/vdim != embed_dim, an attn_mask,
                           need_weights=True (the explicit softmax path; the weights are
                           in the loss too)
    torchvision (when it can be imported, see `import_torchvision`):
      resnet18, mobilenet_v3_small   BatchNorm in training mode, 2 x 3 x 64 x 64 images

The losses: the model's own (labels passed in: cross entropy) for every transformers model,
cross entropy for the CNNs, and the mean squared error to random targets for the nn modules
(bounded below: ``sum(output * random weights)`` made the causal encoder's loss run off to
-8e5 in 3 steps, and its gradients with it).

Neither ``transformers`` nor ``torchvision`` is imported until a builder needs it:
``import miniinductor`` never needs them.
"""
from __future__ import annotations

import copy
import math
import sys
import time
from typing import Callable

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


# -------------------------------------------------------------------------- comparing
#: the denominator of a gradient's relative error is floored at this fraction of the
#: step's largest gradient norm: see `compare_training`
GRAD_FLOOR = 1e-3


def _norm(t: torch.Tensor) -> float:
    return float(t.detach().double().norm())


def _rel(actual: torch.Tensor, expected: torch.Tensor, floor: float = 0.0) -> float:
    """||actual - expected|| / max(||expected||, floor, tiny) (Frobenius norms, in float64)."""
    if actual.shape != expected.shape:
        return math.inf
    return _norm(actual.double() - expected.double()) / max(_norm(expected), floor, 1e-30)


def _relative_errors(compiled: dict, eager: dict, floor_fraction: float) -> dict:
    """{name: _rel(compiled[name], eager[name], floor)}, the floor `floor_fraction` x the
    largest eager norm; a None on one side only: inf; on both: left out."""
    norms = [_norm(t) for t in eager.values() if t is not None]
    floor = floor_fraction * max(norms, default=0.0)
    errors = {}
    for n, e in eager.items():
        c = compiled[n]
        if e is None and c is None:
            continue
        errors[n] = math.inf if e is None or c is None else _rel(c, e, floor)
    return errors


def _floating_buffers(model: nn.Module) -> dict:
    return {n: b for n, b in model.named_buffers() if b.is_floating_point() or n.endswith("num_batches_tracked")}


def _miniinductor_backend():
    """"miniinductor", the name users write, where the installed entry point registers it;
    else (a checkout on sys.path, not pip-installed) the same backend function."""
    from torch._dynamo.backends.registry import lookup_backend

    import miniinductor
    try:
        lookup_backend("miniinductor")
        return "miniinductor"
    except Exception:
        return miniinductor.backend


def compare_training(name: str, *, device: str = "cpu", steps: int = 3, lr: float = 0.05, seed: int = 0,
                     sync: bool = True, compile: Callable | None = None) -> dict:
    """Train a compiled model and an eager deepcopy of it side by side for `steps` SGD steps
    (momentum 0.9; the optimizers run eagerly, as users run them), each step on a new batch
    (`make_batch`, the same for both), and return a JSON-able dict:

    * ``losses``: [[eager, compiled]] per step;
    * ``outputs``: per step, the relative error of the main output (logits);
    * ``grads``: per step, {parameter: relative error of its gradient}, where the relative
      error is ||g_compiled - g_eager|| / max(||g_eager||, GRAD_FLOOR x the step's largest
      ||g_eager||) (a missing gradient on either side: inf). The floor is for gradients
      that are mathematically zero -- the attention key bias, since softmax ignores the
      per-row constant q . b_k -- which hold rounding noise on both sides (||g|| ~ 1e-9);
      any other gradient is far above it, and its error is relative to its own norm;
    * ``params`` and ``buffers``: {name: the largest relative error after an optimizer
      step}, the norms floored likewise at GRAD_FLOOR x the largest parameter (buffer)
      norm: a key bias starts at zero and moves by the rounding noise of its gradient, and
      a BatchNorm whose input is a 1x1 convolution of a BatchNorm's output has a running
      mean of ~1e-9;
    * ``max_grad_rel`` / ``worst_grad`` (the largest gradient error, [step, parameter]),
      ``seconds`` (wall time, compiling included).

    With `sync` (the default), after each step's comparisons the compiled side's
    parameters, buffers and momentum are set to the eager side's (in place, as an
    optimizer writes them), so every step measures the compiled forward and backward from
    the same state, and errors do not compound. Without it the two train apart, and
    where training is chaotic the errors measure the model more than the compiler: on
    ResNet-18 (BatchNorm over 2 images, ReLU) a 1e-6 difference in the parameters after
    step 0 gives gradients 4e-3 apart at step 1 and 0.15 at step 2 -- in float64 too --
    while each step's compiled gradient is as close to the float64 gradient at its own
    parameters as eager's is (1e-5). (Inductor, free-running on an H200: 0.39 at step 2.)

    `compile(model)` defaults to ``torch.compile(model, backend="miniinductor")``."""
    start = time.perf_counter()
    if compile is None:
        compile = lambda m: torch.compile(m, backend=_miniinductor_backend())
    model = make_model(name, seed).to(device)
    gen = torch.Generator().manual_seed(seed + 1)
    eager = copy.deepcopy(model)
    compiled = compile(model)
    opt_c, opt_e = [torch.optim.SGD(m.parameters(), lr=lr, momentum=0.9) for m in (model, eager)]
    params_c, params_e = dict(model.named_parameters()), dict(eager.named_parameters())
    result = {"model": name, "device": device, "steps": steps, "sync": sync, "losses": [], "outputs": [],
              "grads": [], "params": {}, "buffers": {}}

    def worst(kind, errors):
        for n, e in errors.items():
            result[kind][n] = max(result[kind].get(n, 0.0), e)

    for _ in range(steps):
        inputs, loss_fn = make_batch(name, gen)
        inputs = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
        out_e = eager(**inputs)
        loss_e = loss_fn(out_e)
        loss_e.backward()
        out_c = compiled(**inputs)
        loss_c = loss_fn(out_c)
        loss_c.backward()
        result["losses"].append([loss_e.item(), loss_c.item()])
        result["outputs"].append(_rel(main_output(out_c), main_output(out_e)))
        grads_e = {n: p.grad for n, p in params_e.items() if p.requires_grad}
        assert any(g is not None for g in grads_e.values()), f"{name}: no parameter got a gradient"
        result["grads"].append(_relative_errors({n: params_c[n].grad for n in grads_e}, grads_e, GRAD_FLOOR))
        for opt in (opt_c, opt_e):
            opt.step()
            opt.zero_grad()
        worst("params", _relative_errors(params_c, params_e, GRAD_FLOOR))
        buffers_c, buffers_e = _floating_buffers(model), _floating_buffers(eager)
        worst("buffers", _relative_errors({n: b.double() for n, b in buffers_c.items()},
                                          {n: b.double() for n, b in buffers_e.items()}, GRAD_FLOOR))
        if sync:
            with torch.no_grad():
                for n, p in params_e.items():
                    params_c[n].copy_(p)
                    momentum = opt_e.state.get(p, {}).get("momentum_buffer")
                    if momentum is not None:
                        opt_c.state[params_c[n]]["momentum_buffer"].copy_(momentum)
                for n, b in buffers_e.items():
                    buffers_c[n].copy_(b)
    rows = [(rel, k, n) for k, grads in enumerate(result["grads"]) for n, rel in grads.items()]
    top = max(rows, default=(0.0, 0, ""))
    result["max_grad_rel"], result["worst_grad"] = top[0], [top[1], top[2]]
    result["seconds"] = time.perf_counter() - start
    return result


def summarize(result: dict) -> dict:
    """The worst of each kind of error over all steps: loss (relative), output, gradient,
    parameter and buffer (relative norms, see `compare_training`)."""
    return {
        "loss": max(abs(c - e) / max(abs(e), 1e-30) for e, c in result["losses"]),
        "output": max(result["outputs"]),
        "grad": result["max_grad_rel"],
        "param": max(result["params"].values(), default=0.0),
        "buffer": max(result["buffers"].values(), default=0.0),
    }
