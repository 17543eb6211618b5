"""Data-parallel training under torch.compile: DDP and FSDP2, eager vs miniinductor vs Inductor.

    python benchmarks/ddp_gpu.py --json ddp.json                         # 2 GPUs, NCCL
    torchrun --nproc_per_node 2 benchmarks/ddp_gpu.py --json ddp.json    # the same
    python benchmarks/ddp_gpu.py --device cpu --backend gloo --json ddp.json

Each strategy (`ddp`: DistributedDataParallel; `fsdp2`: `fully_shard` on every layer and
the root) trains the same MLP from the same initial weights, every rank on its own batches,
once per mode: `eager`, `miniinductor` (torch.compile(backend="miniinductor")) and
`inductor`. The first `--steps` steps are the check: each rank's losses and the final
parameters (FSDP2's shards gathered into full tensors) must equal eager's within `--tol`
(PASS/FAIL). Then `--warmup` more steps and `--iters` timed ones: the median step time
(forward, backward with its all-reduces / reduce-scatters, SGD step; synchronized).

DDP's graph splitting (Dynamo's DDPOptimizer, on by default) cuts the compiled forward at
DDP's gradient buckets, so that each bucket's all-reduce can start while the backward of the
earlier layers still runs. `--bucket-cap-mb` (at least 1: DDPOptimizer requires DDP's 1 MB
first bucket not to exceed it) and the layer size choose how many pieces there are; the
JSON's `graphs` is how many graphs the backend compiled (one per piece; Inductor and
miniinductor alike).

Tolerance (1e-4; losses relative, parameters absolute; float32): a compiled step computes
the same products and sums as eager, in another order (fused GELU, reductions split
differently), so values differ by a few float32 ulps (~1e-7 relative); three SGD steps
(lr 0.02, momentum 0.9) on a loss of ~400 (squared error summed over the features, averaged
over the batch) carry that to ~1e-8 in parameters of ~0.05 (measured on the CPU: losses
equal, parameters within 1.1e-8). Eager's own updates move the parameters by ~0.04
(`update` in the JSON), so a lost, doubled or one-rank gradient is far above the tolerance.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402

MODES = ("eager", "miniinductor", "inductor")
STRATEGIES = ("ddp", "fsdp2")


class Block(torch.nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.linear = torch.nn.Linear(dim, dim)

    def forward(self, x):
        return F.gelu(self.linear(x))


class MLP(torch.nn.Module):
    """`layers` Blocks (Linear(dim, dim) + GELU): a DDP bucket or an FSDP2 unit per Block.

    torch.compile(FSDP2 model): Dynamo does not trace FSDP2's hooks (skip_fsdp_hooks), so
    the loop over the Blocks breaks the graph and each Block's forward is compiled on its
    own, between the hooks' all-gathers (Blocks share one graph: parameters are inputs).
    DDP's forward compiles whole, then DDPOptimizer splits it at the buckets."""

    def __init__(self, dim: int, layers: int):
        super().__init__()
        self.layers = torch.nn.ModuleList(Block(dim) for _ in range(layers))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def fully_shard():
    try:
        from torch.distributed.fsdp import fully_shard as shard
    except ImportError:   # torch < 2.6
        from torch.distributed._composable.fsdp import fully_shard as shard
    return shard


def wrap(model, strategy, args, device):
    if strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP
        return DDP(model, device_ids=[device] if device.type == "cuda" else None,
                   bucket_cap_mb=args.bucket_cap_mb)
    shard = fully_shard()
    for layer in model.layers:
        shard(layer)
    return shard(model)


class CountingBackend:
    """The mode's torch.compile backend, counting the graphs it is handed."""

    def __init__(self, mode):
        if mode == "miniinductor":
            import miniinductor
            self.inner = miniinductor.backend
        else:
            from torch._inductor.compile_fx import compile_fx
            self.inner = compile_fx
        self.graphs = 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        return self.inner(gm, example_inputs)


def batch(step, rank, args, device):
    """Rank `rank`'s batch for step `step`: fresh normal inputs and targets, the same in
    every mode."""
    g = torch.Generator().manual_seed(args.seed * 7919 + 1000 * step + rank)
    x = torch.randn(args.batch, args.dim, generator=g)
    y = torch.randn(args.batch, args.dim, generator=g)
    return x.to(device), y.to(device)


def full_params(model):
    """{name: full parameter on the CPU} (FSDP2's DTensor shards are gathered)."""
    out = {}
    for name, p in model.named_parameters():
        t = p.detach()
        if hasattr(t, "full_tensor"):
            t = t.full_tensor()
        out[name.replace("module.", "").replace("_orig_mod.", "")] = t.float().cpu().clone()
    return out


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_mode(strategy, mode, args, rank, device):
    torch._dynamo.reset()
    torch.manual_seed(args.seed)
    model = MLP(args.dim, args.layers).to(device)
    init = full_params(model)
    model = wrap(model, strategy, args, device)
    backend = None
    fn = model
    if mode != "eager":
        backend = CountingBackend(mode)
        fn = torch.compile(model, backend=backend)
    opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)

    def step(i):
        x, y = batch(i, rank, args, device)
        loss = (fn(x) - y).pow(2).sum(-1).mean()   # squared error per sample
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    losses = [step(i).item() for i in range(args.steps)]
    params = full_params(model)
    for i in range(args.steps, args.steps + args.warmup):
        step(i)
    times = []
    for i in range(args.steps + args.warmup, args.steps + args.warmup + args.iters):
        synchronize(device)
        t0 = time.perf_counter()
        step(i)
        synchronize(device)
        times.append(time.perf_counter() - t0)
    return {"losses": losses, "params": params, "init": init,
            "graphs": backend.graphs if backend else 0,
            "step_ms": statistics.median(times) * 1e3 if times else None}


def compare(result, reference, tol):
    loss_err = max(abs(a - b) / abs(b) for a, b in zip(result["losses"], reference["losses"]))
    param_err = max((result["params"][k] - v).abs().max().item()
                    for k, v in reference["params"].items())
    return loss_err, param_err, loss_err <= tol and param_err <= tol


def worker(rank, world, args) -> int:
    """One rank: every strategy and mode; rank 0 reports all ranks' rows. Exit status."""
    device = torch.device(f"cuda:{rank}" if args.device == "cuda" else "cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(args.backend, rank=rank, world_size=world)
    rows = []
    try:
        for strategy in args.strategies:
            results = {}
            for mode in args.modes:
                try:
                    results[mode] = run_mode(strategy, mode, args, rank, device)
                except Exception as exc:   # a mode that fails is a FAIL row, not a lost run
                    if args.fail_fast:
                        raise
                    results[mode] = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
                dist.barrier()
            rows += _rows(strategy, results, args, rank, world)
        gathered = [None] * world
        dist.all_gather_object(gathered, rows)
    finally:
        dist.destroy_process_group()
    if rank == 0:
        return report([r for rows in gathered for r in rows], args, world)
    return 0


def _rows(strategy, results, args, rank, world):
    """This rank's result rows; rank 0 prints them."""
    ref = results.get("eager")
    rows = []
    for mode, res in results.items():
        row = {"strategy": strategy, "mode": mode, "rank": rank, "world": world}
        if "error" in res:
            row.update(status="FAIL", error=res["error"])
        else:
            row.update(losses=res["losses"], graphs=res["graphs"], step_ms=res["step_ms"])
            if ref is not None and "error" not in ref:
                loss_err, param_err, ok = compare(res, ref, args.tol)
                update = max((ref["params"][k] - v).abs().max().item() for k, v in ref["init"].items())
                row.update(max_loss_err=loss_err, max_param_err=param_err, update=update,
                           status="PASS" if ok else "FAIL")
            else:
                row.update(status="FAIL", error="no eager reference")
        rows.append(row)
        if rank == 0:
            extra = row.get("error") or (f"loss err {row['max_loss_err']:.2e}  param err "
                                         f"{row['max_param_err']:.2e}  graphs {row['graphs']}  "
                                         f"step {row['step_ms'] if row['step_ms'] is None else round(row['step_ms'], 3)} ms")
            print(f"{strategy:6} {mode:13} {row['status']}  {extra}", flush=True)
    return rows


def _spawned(rank, world, args, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    status = worker(rank, world, args)
    if status:
        sys.exit(status)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--backend", default=None, help="process group backend (nccl on cuda, gloo on cpu)")
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--strategies", default=",".join(STRATEGIES))
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--dim", type=int, default=1024)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--bucket-cap-mb", type=float, default=4.0)
    p.add_argument("--steps", type=int, default=3, help="steps checked against eager")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=50, help="timed steps (median reported)")
    p.add_argument("--tol", type=float, default=1e-4)
    p.add_argument("--seed", type=int, default=0, help="initial weights and batches")
    p.add_argument("--fail-fast", action="store_true")
    p.add_argument("--json", default=None, help="write the results here")
    args = p.parse_args(argv)
    args.backend = args.backend or ("nccl" if args.device == "cuda" else "gloo")
    args.strategies = args.strategies.split(",")
    args.modes = args.modes.split(",")
    if "eager" not in args.modes:
        args.modes.insert(0, "eager")   # the reference
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if "RANK" in os.environ:   # under torchrun: this process is one rank
        return worker(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args)
    if args.nproc == 1:        # one rank: this process
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
        return worker(0, 1, args)
    try:
        torch.multiprocessing.spawn(_spawned, args=(args.nproc, args, free_port()), nprocs=args.nproc)
    except torch.multiprocessing.ProcessExitedException as exc:   # rank 0 reported a FAIL
        return exc.exit_code or 1
    return 0


def report(rows, args, world) -> int:
    ok = all(r["status"] == "PASS" for r in rows)
    print("ALL PASS" if ok else "SOME FAIL", flush=True)
    if args.json:
        meta = {"torch": torch.__version__, "device": args.device, "backend": args.backend,
                "world": world,
                "dim": args.dim, "layers": args.layers, "batch": args.batch,
                "bucket_cap_mb": args.bucket_cap_mb, "steps": args.steps, "warmup": args.warmup,
                "iters": args.iters, "tol": args.tol, "seed": args.seed}
        if args.device == "cuda":
            meta["gpu"] = torch.cuda.get_device_name(0)
        Path(args.json).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
