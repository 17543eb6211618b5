import sys, pathlib
root = pathlib.Path(sys.argv[1]).resolve(); out = pathlib.Path(sys.argv[2])
sys.path.insert(0, str(root))
import torch, miniinductor
print(miniinductor.__file__)
from miniinductor.compile_fx import collect_compiled
def colsum_rowmax(x):
    return x.sum(0), x.amax(1)
def layer_norm(x, w, b):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b)
cases = {}
for dt in (torch.float32, torch.bfloat16):
    x = torch.randn(16384, 4096, device="cuda", dtype=dt)
    cases[f"colsum_{dt}"] = (colsum_rowmax, (x,))
    y = torch.randn(8192, 4096, device="cuda", dtype=dt); w = torch.randn(4096, device="cuda", dtype=dt); b = torch.randn(4096, device="cuda", dtype=dt)
    cases[f"layernorm_{dt}"] = (layer_norm, (y, w, b))
    cases[f"softmax_{dt}"] = (lambda z: torch.softmax(z, -1), (y,))
for name, (fn, args) in cases.items():
    torch._dynamo.reset()
    with collect_compiled() as graphs:
        miniinductor.compile(fn)(*args)
    for k, g in enumerate(graphs):
        (out / f"{name}_{k}.py").write_text(g.wrapper_source)
print("done")
