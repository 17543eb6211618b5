"""Probe: cuDNN attention on q/k/v that are views of one projection, compiled by several backends."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

import miniinductor  # noqa: E402


def fn(x, w):
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        q, k, v = [p.view(2, 16, 4, 64).transpose(1, 2) for p in (x @ w).split(256, -1)]
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


torch.manual_seed(0)
x = torch.randn(2, 16, 256, device="cuda", dtype=torch.bfloat16)
w = torch.randn(256, 768, device="cuda", dtype=torch.bfloat16)
GO = {"contiguous": torch.randn(2, 4, 16, 64, device="cuda", dtype=torch.bfloat16),
      "like_out": torch.randn(2, 16, 4, 64, device="cuda", dtype=torch.bfloat16).transpose(1, 2)}
go = None


def run(f):
    xi, wi = x.clone().requires_grad_(), w.clone().requires_grad_()
    out = f(xi, wi)
    out.backward(go)
    return out, xi.grad, wi.grad, out.stride()


for go_name, go in GO.items():
    ref = run(fn)
    for name in ["eager", "aot_eager", "inductor", "miniinductor"]:
        torch._dynamo.reset()
        backend = miniinductor.backend if name == "miniinductor" else name
        got = run(torch.compile(fn, backend=backend))
        errs = [((a.float() - b.float()).norm() / b.float().norm()).item() for a, b in zip(got[:3], ref[:3])]
        print(f"grad_out {go_name:10} {name:13} out/dx/dw relative errors {errs}")
