"""Real models: the library classes users train, small and random, compiled vs eager.

miniinductor/tools/zoo/ writes its architectures by hand, attention included, so it never
meets what a user's model calls: Hugging Face ``transformers`` models attend through
``F.scaled_dot_product_attention`` by default (``attn_implementation="sdpa"``), which
AOTAutograd captures as ``aten._scaled_dot_product_flash_attention_for_cpu`` (a wrong
decomposition of it once gave wrong gradients while every zoo model passed). This package
builds the library classes themselves from configs -- random initialisation, no downloads,
2 layers, width 32-48, a vocabulary of 96 -- and trains them compiled and eagerly side
by side (tests/core/test_real_models.py, benchmarks/real_models_gpu.py).

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
from .compare import GRAD_FLOOR, compare_training, summarize  # noqa: F401
from .models import MODELS, available, build, import_torchvision, main_output, make_batch, make_model, needs  # noqa: F401
