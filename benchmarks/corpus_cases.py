"""The cases of benchmarks/corpus.py: torchvision and timm classifiers, transformers models and
a seeded set of generated fusion patterns, each built at a GPU size or a CPU size.

A case is a `Case(name, kind, build, tol)`: `build(device, size)` returns `(module, inputs)`,
`inputs` a tuple of positional arguments or a dict of keyword arguments, the module on
`device` in eval mode (benchmarks/corpus.py switches it to train mode for `--train`); `size`
is "gpu" (the sizes a GPU benchmark uses: batch 32 at 224x224, KernelBench level-2 shapes)
or "cpu" (batch 1-2 at 64-112 pixels, a few channels: seconds on a CPU). `tol` is the
comparison tolerance, relative to each output's scale (benchmarks/corpus.py's docstring says
why these numbers). `all_cases(size)` lists them all, in a fixed order, the same in every process
(the parent and its per-case children look cases up by name); the generated patterns'
chains depend on the size (ops are drawn among those that fit the shapes), so their names do too.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

MODEL_TOL = 1e-3          # deep models: relative to each output's max |value|
PATTERN_TOL = 1e-4        # one leading op and a short chain
BF16_TOL = 1.6e-2         # two bfloat16 ulps (2^-7 relative) of the scale: one rounding each side


@dataclass
class Case:
    name: str
    kind: str                                  # models | timm | hf | patterns
    build: Callable[[str, str], tuple]         # (device, size) -> (module, inputs)
    tol: float = MODEL_TOL
    note: str = ""


def _seed(name: str) -> torch.Generator:
    torch.manual_seed(sum(map(ord, name)))
    return torch.Generator().manual_seed(sum(map(ord, name)) + 1)


def _no_dropout(model: nn.Module) -> nn.Module:
    """Every dropout / stochastic-depth probability to 0, so that --train is deterministic."""
    for m in model.modules():
        kind = type(m).__name__
        if ("Dropout" in kind or "StochasticDepth" in kind or "DropPath" in kind) and isinstance(getattr(m, "p", None), float):
            m.p = 0.0
        if "DropPath" in kind and isinstance(getattr(m, "drop_prob", None), float):
            m.drop_prob = 0.0
    return model


# ------------------------------------------------------------------------------ torchvision
TORCHVISION = ["resnet18", "resnet50", "resnet101", "mobilenet_v2", "mobilenet_v3_large", "efficientnet_b0",
               "efficientnet_b1", "efficientnet_b2", "densenet121", "squeezenet1_1", "googlenet", "vgg16",
               "regnet_y_400mf", "shufflenet_v2_x1_0", "convnext_tiny", "vit_b_16", "swin_t"]
GPU_BATCH_SMALLER = {"vit_b_16": 16, "swin_t": 16, "vgg16": 16}


def _torchvision(name: str):
    def build(device: str, size: str):
        from miniinductor.tools.real_models import import_torchvision
        tv = import_torchvision()
        gen = _seed(name)
        res = 224 if size == "gpu" else 64
        batch = GPU_BATCH_SMALLER.get(name, 32) if size == "gpu" else 2
        kwargs = {"weights": None}
        if name == "googlenet":
            kwargs.update(aux_logits=False, init_weights=True)
        if name == "vit_b_16":
            kwargs.update(image_size=res)
        model = _no_dropout(getattr(tv.models, name)(**kwargs)).eval().to(device)
        return model, (torch.randn(batch, 3, res, res, generator=gen).to(device),)
    return build


# ------------------------------------------------------------------------------------- timm
# name -> the CPU-size resolution (the models with a fixed input size keep 224 at batch 1)
TIMM = {"resnet26d": 96, "efficientnet_lite0": 96, "ghostnet_100": 96, "mixnet_s": 96, "regnetx_002": 96,
        "dla34": 96, "cspresnet50": 96, "rexnet_100": 96, "hrnet_w18_small": 96, "deit_tiny_patch16_224": 224,
        "levit_128s": 224, "poolformer_s12": 96, "resnest14d": 96, "mobilevitv2_050": 128}


def _timm(name: str):
    def build(device: str, size: str):
        from miniinductor.tools.real_models import import_torchvision
        import_torchvision()           # timm imports torchvision: its operator stubs first
        import timm
        gen = _seed(name)
        model = _no_dropout(timm.create_model(name, pretrained=False)).eval().to(device)
        if size == "gpu":
            batch, res = 32, model.pretrained_cfg["input_size"][-1]
        else:
            batch, res = 1, TIMM[name]
        return model, (torch.randn(batch, 3, res, res, generator=gen).to(device),)
    return build


# ----------------------------------------------------------------------------- transformers
HF = ["gpt2", "opt", "llama", "mistral", "qwen2", "bert", "distilbert", "roberta", "t5", "bart", "vit", "whisper"]
_WIDE = dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=4, num_attention_heads=12,
             max_position_embeddings=1024)
_LLAMA = dict(_WIDE, intermediate_size=2048)
_SEQ2SEQ = dict(d_model=768, encoder_ffn_dim=3072, decoder_ffn_dim=3072, encoder_layers=4, decoder_layers=4,
                encoder_attention_heads=12, decoder_attention_heads=12)
HF_GPU = {          # the GPU size: the small configs of real_models widened to GPT-2-small width, 4 layers
    "gpt2": dict(n_embd=768, n_layer=4, n_head=12, n_positions=1024),
    "opt": dict(hidden_size=768, ffn_dim=3072, num_hidden_layers=4, num_attention_heads=12, word_embed_proj_dim=768,
                max_position_embeddings=1024),
    "llama": dict(_LLAMA, num_key_value_heads=4),
    "mistral": dict(_LLAMA, num_key_value_heads=4, sliding_window=256),
    "qwen2": dict(_LLAMA, num_key_value_heads=2),
    "bert": _WIDE, "roberta": _WIDE,
    "distilbert": dict(dim=768, hidden_dim=3072, n_layers=4, n_heads=12, max_position_embeddings=1024),
    "t5": dict(d_model=768, d_kv=64, d_ff=3072, num_layers=4, num_decoder_layers=4, num_heads=12,
               relative_attention_num_buckets=32, relative_attention_max_distance=128),
    "bart": dict(_SEQ2SEQ, max_position_embeddings=1024),
    "vit": dict(_WIDE, image_size=224, patch_size=16),
    "whisper": dict(_SEQ2SEQ, num_mel_bins=80, max_source_positions=750, max_target_positions=448),
}
HF_GPU_BATCH, HF_GPU_SEQ, HF_GPU_VOCAB = 8, 512, 32000


def _hf_gpu_batch(name: str, gen: torch.Generator, config) -> dict:
    b, t, v = HF_GPU_BATCH, HF_GPU_SEQ, HF_GPU_VOCAB
    ids = torch.randint(4, v, (b, t), generator=gen)
    mask = torch.ones(b, t, dtype=torch.long)
    mask[1, t - t // 4:] = 0                                    # right padding in row 1
    labels = ids.masked_fill(mask == 0, -100)
    if name in ("gpt2", "mistral"):
        return dict(input_ids=ids, labels=ids)
    if name in ("opt", "llama", "qwen2", "distilbert", "roberta"):
        return dict(input_ids=ids, attention_mask=mask, labels=labels)
    if name == "bert":
        return dict(input_ids=ids, attention_mask=mask, token_type_ids=(torch.arange(t) >= t // 2).long().expand(b, t),
                    labels=torch.randint(0, 3, (b,), generator=gen))
    if name in ("t5", "bart"):
        return dict(input_ids=ids, attention_mask=mask, labels=torch.randint(4, v, (b, t // 2), generator=gen))
    if name == "vit":
        return dict(pixel_values=torch.randn(32, 3, 224, 224, generator=gen), labels=torch.randint(0, 10, (32,), generator=gen))
    if name == "whisper":
        return dict(input_features=torch.randn(b, 80, 1500, generator=gen), labels=torch.randint(4, v, (b, 128), generator=gen))
    raise KeyError(name)


def _hf(name: str):
    def build(device: str, size: str):
        from miniinductor.tools import real_models
        gen = _seed(name)
        model = real_models.make_model(f"{name}-sdpa")       # the small config, default (SDPA) attention
        if size == "gpu":
            cfg = model.config.to_dict()
            for derived in ("head_dim", "layer_types"):         # derived from the width and depth: recomputed
                cfg.pop(derived, None)
            cfg.update(HF_GPU[name])
            if "vocab_size" in cfg:
                cfg["vocab_size"] = HF_GPU_VOCAB
            config = type(model.config)(**cfg)
            config._attn_implementation = "sdpa"
            torch.manual_seed(0)
            model = type(model)(config)
            inputs = _hf_gpu_batch(name, gen, config)
        else:
            inputs, _ = real_models.make_batch(f"{name}-sdpa", gen)
        model.config.use_cache = False
        model = _no_dropout(model).float().eval().to(device)
        return model, {k: v.to(device) for k, v in inputs.items()}
    return build


# ---------------------------------------------------------------------------------- patterns
class Fn(nn.Module):
    """A function as a module (its name printed), optionally given the lead op's output."""

    def __init__(self, name: str, fn, residual: bool = False, params: dict | None = None):
        super().__init__()
        self.name, self.fn, self.residual = name, fn, residual
        for k, v in (params or {}).items():
            setattr(self, k, nn.Parameter(v))

    def forward(self, x, lead):
        return self.fn(self, x, lead) if self.residual else self.fn(self, x)

    def extra_repr(self):
        return self.name


class Pattern(nn.Module):
    """lead(x [, y]) -> chain[0] -> chain[1] -> ...; `inputs` holds the lead's second operand (bmm)."""

    def __init__(self, lead: nn.Module | None, chain: list[nn.Module], bmm: bool = False):
        super().__init__()
        self.lead, self.chain, self.bmm = lead, nn.ModuleList(chain), bmm

    def forward(self, x, y=None):
        x = torch.bmm(x, y) if self.bmm else self.lead(x) if self.lead is not None else x
        lead = x
        for op in self.chain:
            x = op(x, lead) if isinstance(op, Fn) else op(x)
        return x


def _randomize_norm(m: nn.Module, rng: random.Random) -> nn.Module:
    """Random affine parameters and running statistics (eval-mode BatchNorm not the identity)."""
    with torch.no_grad():
        for name in ("weight", "bias"):
            p = getattr(m, name, None)
            if isinstance(p, torch.Tensor):
                p.copy_(torch.randn(p.shape) * 0.2 + (1.0 if name == "weight" else 0.0))
        if getattr(m, "running_mean", None) is not None:
            m.running_mean.copy_(torch.randn(m.running_mean.shape) * 0.1)
            m.running_var.copy_(torch.rand(m.running_var.shape) + 0.5)
    return m


ACTIVATIONS = {
    "relu": nn.ReLU, "relu6": nn.ReLU6, "hardtanh": lambda: nn.Hardtanh(-1.0, 1.0), "gelu": nn.GELU,
    "silu": nn.SiLU, "mish": nn.Mish, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid, "hardswish": nn.Hardswish,
    "leaky_relu": lambda: nn.LeakyReLU(0.1), "elu": nn.ELU, "softplus": nn.Softplus,
}
_NORM_1D = {1: nn.BatchNorm1d, 2: nn.BatchNorm1d, 3: nn.BatchNorm2d, 4: nn.BatchNorm3d}
_INST = {1: nn.InstanceNorm1d, 2: nn.InstanceNorm2d, 3: nn.InstanceNorm3d}
_POOL = {"max": {1: nn.MaxPool1d, 2: nn.MaxPool2d, 3: nn.MaxPool3d}, "avg": {1: nn.AvgPool1d, 2: nn.AvgPool2d, 3: nn.AvgPool3d}}


def _chain_op(shape: list[int], lead_shape: list[int], rng: random.Random):
    """One op applicable to `shape`, drawn by category: (module, name, new shape)."""
    rank, channels = len(shape), shape[1]
    spatial = shape[2:] if rank >= 3 else []
    free_dims = [d for d in range(1, rank) if shape[d] > 1]
    options = ["act"] * 4 + ["arith"] * 2 + ["clamp"]
    if channels > 1 and math.prod(shape) // channels > 1:
        options += ["batchnorm"]
    if channels >= 4 and math.prod(shape[2:] or [1]) > 1:
        options += ["groupnorm"]
    if shape[-1] > 1:
        options += ["layernorm"]
    if spatial and math.prod(spatial) > 1:
        options += ["instancenorm"]
    if spatial and min(spatial) >= 2:
        options += ["pool"] * 2
    if free_dims:
        options += ["reduce"] * 2 + ["softmax"]
    if shape == lead_shape:
        options += ["residual"]
    kind = rng.choice(options)
    if kind == "act":
        name = rng.choice(sorted(ACTIVATIONS))
        return ACTIVATIONS[name](), name, shape
    if kind == "clamp":
        return Fn("clamp", lambda s, x: x.clamp(-0.5, 0.5)), "clamp", shape
    if kind == "arith":
        which = rng.choice(["scale", "bias"])
        if which == "scale":
            k = rng.choice([0.5, 2.0, -1.5])
            return Fn(f"mul{k}", lambda s, x: x * k), "scale", shape
        bshape = [channels] + [1] * (rank - 2)
        return Fn("add_bias", lambda s, x: x + s.bias, params={"bias": torch.randn(bshape) * 0.1}), "bias", shape
    if kind == "residual":
        return Fn("add_residual", lambda s, x, lead: x + lead, residual=True), "residual", shape
    if kind == "batchnorm":
        return _randomize_norm(_NORM_1D[rank - 1](channels), rng), "batchnorm", shape
    if kind == "groupnorm":
        groups = rng.choice([g for g in (2, 4, 8, 16, 32) if channels % g == 0] or [1])
        return _randomize_norm(nn.GroupNorm(groups, channels), rng), f"groupnorm{groups}", shape
    if kind == "layernorm":
        return _randomize_norm(nn.LayerNorm(shape[-1]), rng), "layernorm", shape
    if kind == "instancenorm":
        return _randomize_norm(_INST[rank - 2](channels, affine=True), rng), "instancenorm", shape
    if kind == "pool":
        which = rng.choice(["max", "avg"])
        return _POOL[which][rank - 2](2), f"{which}pool", shape[:2] + [s // 2 for s in spatial]
    if kind == "softmax":
        d = rng.choice(free_dims)
        return Fn(f"softmax{d}", lambda s, x: torch.softmax(x, d)), "softmax", shape
    op = rng.choice(["sum", "mean", "amin", "amax", "logsumexp"])
    d = rng.choice(free_dims)
    new = list(shape)
    new[d] = 1
    return Fn(f"{op}{d}", lambda s, x: getattr(torch, op)(x, d, keepdim=True)), op, new


def _fit(shape: list[int], budget: int) -> list[int]:
    """Halve the batch (dim 0) until the tensor has at most `budget` elements."""
    shape = list(shape)
    while math.prod(shape) > budget and shape[0] > 1:
        shape[0] //= 2
    return shape


def _lead(kind: str, size: str, rng: random.Random):
    """(lead module's constructor or None, input shapes, output shape) for lead op `kind`."""
    gpu = size == "gpu"
    n = rng.choice([16, 32, 64, 128]) if gpu else 2
    cin = rng.choice([3, 8, 16, 32]) if gpu else rng.choice([3, 4, 8])
    cout = rng.choice([32, 64, 128]) if gpu else rng.choice([8, 16])
    budget = 1 << 25 if gpu else 1 << 15          # output elements: 128 MiB in float32 on a GPU
    if kind in ("conv1d", "conv2d", "conv3d"):
        dims = int(kind[-2])
        extent = {1: rng.choice([256, 512, 1024]), 2: rng.choice([32, 64, 128, 256]), 3: rng.choice([16, 32])}[dims] if gpu \
            else {1: 32, 2: rng.choice([8, 12, 16]), 3: 6}[dims]
        pad = rng.choice([0, 1])
        out = _fit([n, cout] + [extent - 2 + 2 * pad] * dims, budget)
        cls = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}[dims]
        return lambda: cls(cin, cout, 3, padding=pad), [[out[0], cin] + [extent] * dims], out
    if kind in ("convT2d", "convT3d"):
        dims = int(kind[-2])
        extent = (rng.choice([16, 32, 64]) if dims == 2 else rng.choice([8, 16])) if gpu else (8 if dims == 2 else 4)
        out = _fit([n, cout] + [2 * extent] * dims, budget)
        cls = nn.ConvTranspose2d if dims == 2 else nn.ConvTranspose3d
        return lambda: cls(cin, cout, 3, stride=2, padding=1, output_padding=1), [[out[0], cin] + [extent] * dims], out
    if kind == "linear":
        fin, fout = (rng.choice([512, 1024, 2048, 4096]), rng.choice([512, 1024, 2048, 4096])) if gpu \
            else (rng.choice([32, 64]), rng.choice([16, 48]))
        batch = rng.choice([128, 512, 1024]) if gpu else 8
        return lambda: nn.Linear(fin, fout), [[batch, fin]], [batch, fout]
    b, m, k, nn_ = (rng.choice([32, 64, 128]), rng.choice([128, 256, 512]), rng.choice([64, 128, 256]),
                    rng.choice([128, 256, 512])) if gpu else (2, 16, 12, 16)
    return None, [[b, m, k], [b, k, nn_]], [b, m, nn_]


LEADS = ["conv1d", "conv2d", "conv3d", "convT2d", "convT3d", "linear", "bmm"]
N_GENERATED = 112
PATTERN_SEED = 2026


def _generated(index: int, size: str):
    """Pattern `index` of the seeded set at `size`: its name and builder. The chain is drawn
    among the ops that fit the shapes, so the two sizes can draw different chains: a name
    is that of one size's pattern."""
    def draw(size: str, modules: bool):
        rng = random.Random(PATTERN_SEED * 1000 + index)
        lead_kind = LEADS[index % len(LEADS)]
        torch.manual_seed(index)
        lead, in_shapes, shape = _lead(lead_kind, size, rng)
        lead = lead() if lead is not None and modules else None
        chain, names, lead_shape = [], [lead_kind], list(shape)
        for _ in range(rng.choice([2, 3, 3, 4])):
            op, name, shape = _chain_op(list(shape), lead_shape, rng)
            chain.append(op)
            names.append(name)
        return Pattern(lead, chain, bmm=lead_kind == "bmm"), in_shapes, names

    def build(device: str, size: str):
        module, in_shapes, _ = draw(size, True)
        gen = torch.Generator().manual_seed(index)
        return module.eval().to(device), tuple(torch.randn(s, generator=gen).to(device) for s in in_shapes)

    names = draw(size, False)[2]
    return f"p{index:03d}-" + "-".join(names), build


class _Seq(nn.Module):
    def __init__(self, *ops):
        super().__init__()
        self.ops = nn.ModuleList(ops)

    def forward(self, *xs):
        x = self.ops[0](*xs)
        for op in self.ops[1:]:
            x = op(x)
        return x


class _F(nn.Module):
    def __init__(self, fn, **params):
        super().__init__()
        self.fn = fn
        for k, v in params.items():
            setattr(self, k, nn.Parameter(v))

    def forward(self, x):
        return self.fn(self, x)


def _explicit():
    """The issue's named patterns: (name, builder, tol)."""
    def fixed(make, shapes_gpu, shapes_cpu, dtype=torch.float32, ints=None):
        def build(device, size):
            gen = torch.Generator().manual_seed(7)
            torch.manual_seed(7)
            module = make(size).eval().to(device=device)
            shapes = shapes_gpu if size == "gpu" else shapes_cpu
            if ints:
                return module.to(device), tuple(torch.randint(0, ints[size], s, generator=gen).to(device) for s in shapes)
            module = module.to(dtype)
            return module, tuple(torch.randn(s, generator=gen).to(device=device, dtype=dtype) for s in shapes)
        return build

    def gpu(size, a, b):
        return a if size == "gpu" else b

    return [
        ("kb-conv2d-avgpool4-sigmoid-sum", fixed(
            lambda s: _Seq(nn.Conv2d(8, 64, 3), nn.AvgPool2d(4), nn.Sigmoid(), _F(lambda m, x: x.sum(dim=[1, 2, 3]))),
            [[128, 8, 384, 384]], [[2, 8, 32, 32]]), PATTERN_TOL),
        ("kb-convT2d-min-sum-gelu-add", fixed(
            lambda s: _Seq(nn.ConvTranspose2d(gpu(s, 64, 4), gpu(s, 128, 8), 3, stride=2, padding=1, output_padding=1),
                           _F(lambda m, x: torch.min(x, dim=1, keepdim=True)[0]), _F(lambda m, x: x.sum(dim=2, keepdim=True)),
                           nn.GELU(), _F(lambda m, x: x + m.bias, bias=torch.randn(1, 1, 1, 1))),
            [[128, 64, 64, 64]], [[2, 4, 8, 8]]), PATTERN_TOL),
        ("kb-conv2d-min-tanh-tanh", fixed(
            lambda s: _Seq(nn.Conv2d(gpu(s, 16, 3), gpu(s, 64, 8), 3), _F(lambda m, x: torch.min(x, dim=1, keepdim=True)[0]),
                           nn.Tanh(), nn.Tanh()),
            [[128, 16, 256, 256]], [[2, 3, 16, 16]]), PATTERN_TOL),
        ("kb-convT2d-mish-add-hardtanh", fixed(
            lambda s: _Seq(nn.ConvTranspose2d(gpu(s, 32, 4), gpu(s, 64, 8), 4, stride=2, padding=1), nn.Mish(),
                           _F(lambda m, x: x + 0.5), nn.Hardtanh(-1.0, 1.0)),
            [[128, 32, 64, 64]], [[2, 4, 8, 8]]), PATTERN_TOL),
        ("groupnorm32-silu-residual", fixed(
            lambda s: _GNRes(gpu(s, 128, 32)),
            [[16, 128, 64, 64]], [[2, 32, 8, 8]]), PATTERN_TOL),
        ("softmax-cumsum", fixed(lambda s: _Seq(_F(lambda m, x: torch.softmax(x, -1)), _F(lambda m, x: torch.cumsum(x, -1))),
                                 [[8192, 4096]], [[64, 256]]), PATTERN_TOL),
        ("embedding-layernorm", fixed(lambda s: _Seq(nn.Embedding(gpu(s, 32000, 1000), gpu(s, 768, 64)),
                                                     _randomize_norm(nn.LayerNorm(gpu(s, 768, 64)), None)),
                                      [[32, 512]], [[2, 16]], ints={"gpu": 32000, "cpu": 1000}), PATTERN_TOL),
        ("layernorm-bf16", fixed(lambda s: _randomize_norm(nn.LayerNorm(gpu(s, 4096, 256)), None),
                                 [[8192, 4096]], [[64, 256]], dtype=torch.bfloat16), BF16_TOL),
        # the CPU rows, at their CPU sizes: a small conv-BN-ReLU block, the token
        # embedding + layer norm and a GPT-2 block (run with --train for the training step)
        ("conv-bn-relu-small", fixed(lambda s: _Seq(nn.Conv2d(32, 32, 3, padding=1), _randomize_norm(nn.BatchNorm2d(32), None),
                                                    nn.ReLU()), [[32, 32, 28, 28]], [[4, 32, 28, 28]]), PATTERN_TOL),
        ("embedding-layernorm-cpu-row", fixed(lambda s: _Seq(nn.Embedding(8000, 256), _randomize_norm(nn.LayerNorm(256), None)),
                                              [[32, 512]], [[8, 128]], ints={"gpu": 8000, "cpu": 8000}), PATTERN_TOL),
        ("gpt2-block", fixed(lambda s: _gpt2_block(), [[8, 128, 256]], [[4, 128, 256]]), PATTERN_TOL),
    ]


def _gpt2_block() -> nn.Module:
    from miniinductor.tools.models import GPT2Block
    return GPT2Block(d_model=256, n_head=8, max_seq=128)


class _GNRes(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.gn = _randomize_norm(nn.GroupNorm(32, channels), None)

    def forward(self, x):
        return x + F.silu(self.gn(x))


def all_cases(size: str) -> list[Case]:
    cases = [Case(n, "models", _torchvision(n)) for n in TORCHVISION]
    cases += [Case(n, "timm", _timm(n)) for n in TIMM]
    cases += [Case(n, "hf", _hf(n)) for n in HF]
    cases += [Case(n, "patterns", b, tol) for n, b, tol in _explicit()]
    for i in range(N_GENERATED):
        name, build = _generated(i, size)
        cases.append(Case(name, "patterns", build, PATTERN_TOL))
    return cases
