"""The checks of the exercises: one function per exercise, named like its file without the number.

Each runs with the learner's function already swapped in (miniinductor/tools/exercises.py),
compiles real functions with miniinductor, compares with eager on fresh random inputs, and
inspects the compiler's decisions; a problem is raised as `Failure` in plain words.
They match structure (how many kernels, which buffers), never kernel names or exact source.
"""
from __future__ import annotations

import importlib

import torch

from miniinductor.tools.exercises import Failure, compile_and_run, expect_close, externs


def _target(dotted: str):
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def _run(what, fn, *inputs, hint="", **options):
    """Compile, compare every output with eager, return the compiled graphs."""
    expected = fn(*inputs)
    got, graphs = compile_and_run(fn, *inputs, **options)
    for k, (g, e) in enumerate(zip(*[x if isinstance(x, (list, tuple)) else [x] for x in (got, expected)])):
        try:
            expect_close(f"{what} (output {k})", g, e)
        except Failure as exc:
            raise Failure(f"{exc}{hint}") from None
    return graphs


# --------------------------------------------------------------------------- 01 decomposition
def decomposition_foreach():
    xs = [torch.randn(8, 4), torch.randn(16)]
    ys = [torch.randn(8, 4), torch.randn(16)]

    def step(xs, ys):
        out = torch._foreach_mul(xs, ys)
        return torch._foreach_add(out, xs, alpha=0.5) + torch._foreach_add(ys, 2.0)
    graphs = _run("_foreach_mul / _foreach_add over [8x4, 16] tensors", step, xs, ys)
    left = [str(e.op) for e in externs(graphs) if "_foreach" in str(e.op)]
    if left:
        raise Failure(f"{left} still ran as ATen calls: the foreach ops were not decomposed")


# --------------------------------------------------------------------------- 02 lowering
def lowering_where():
    x, y = torch.randn(4, 8), torch.randn(4, 1)

    def f(x, y):
        return torch.where(y > 0, x * 2, 0), torch.where(x > 0.5, 1, y.to(torch.float64))
    graphs = _run("torch.where(y > 0, x * 2, 0) and torch.where(x > 0.5, 1, y.double()) with "
                  "x [4, 8], y [4, 1]", f, x, y)
    fallen = [e for e in externs(graphs) if "where" in str(e.op)]
    if fallen:
        raise Failure(f"aten.where ran as an ATen fallback, not as loop IR: {fallen[0].reason}")
    if len(graphs[0].kernels) != 1:
        raise Failure(f"expected one fused kernel for both wheres (and the x * 2 inside), got "
                      f"{len(graphs[0].kernels)}: is your Pointwise's size the broadcast shape?")


# --------------------------------------------------------------------------- 03 view
def view_slice():
    x = torch.randn(6, 10)

    def f(x):
        return x[:, 2:9:3] * 1.0, x[1::2, -3:] + 1.0, x[:, 1:].sum(-1)
    graphs = _run("x[:, 2:9:3], x[1::2, -3:] and x[:, 1:].sum(-1) for x [6, 10]", f, x,
                  hint="\n  the slice read the wrong elements of x: element i along dim must come from "
                       "x's element start + i * step")
    fallen = [e for e in externs(graphs) if "slice" in str(e.op)]
    if fallen:
        raise Failure(f"aten.slice ran as an ATen fallback: {fallen[0].reason}")


# --------------------------------------------------------------------------- 04 fusion legality
def _check_groups(graphs, what):
    for g in graphs:
        # a combo kernel (ext/combo/schedule.py) runs independent groups side by side: each part has its own loops
        groups = [part for group in g.fused_groups() for part in getattr(group, "parts", [group])]
        for group in groups:
            for node in group.nodes:
                ranges, red = list(node.outer), list(node.inner)
                if node.is_reduction and (ranges, red) != (group.R, group.Q):
                    raise Failure(f"{what}: your rule put a reduction over {ranges}x{red} into a kernel "
                                  f"whose loops are {group.R}x{group.Q}")
                if not node.is_reduction and ranges not in (group.R, group.R + group.Q):
                    raise Failure(f"{what}: your rule fused a pointwise node over {ranges} into a kernel "
                                  f"over {group.R}x{group.Q}: "
                                  + ("a reduction with a pointwise node over a different range" if group.Q
                                     else "two pointwise nodes over different ranges"))


def fusion_legality():
    """The groups are checked before the compiled code first runs: a kernel whose loops do
    not fit its nodes reads and writes outside its buffers (and may crash the process)."""
    x, z = torch.randn(32, 64), torch.randn(16)
    graphs = _run("softmax of x [32, 64]", lambda x: torch.softmax(x, -1), x,
                  on_compiled=lambda cg: _check_groups([cg], "softmax"))
    if len(graphs[0].kernels) != 1:
        decisions = "; ".join(str(d) for d in graphs[0].scheduler.decisions if not d.fused)
        raise Failure(f"softmax of a [32, 64] tensor should be one kernel (amax, exp, sum and the division "
                      f"share the row loop), got {len(graphs[0].kernels)}; refused: {decisions}")

    def g(x, z):
        s = x.sum(-1)
        return s * 2, z.sin(), x.t().cos()
    _run("x.sum(-1) * 2, z.sin(), x.t().cos() for x [32, 64], z [16]", g, x, z,
         on_compiled=lambda cg: _check_groups([cg], "sum with unrelated pointwise ops"))


# --------------------------------------------------------------------------- 05 fusion score
def fusion_score():
    score = _target("miniinductor.scheduler.fusion.shared_bytes")
    x = torch.randn(32, 64)

    def f(x):
        return x.sum(-1), x.amax(-1), x / x.sum(-1, keepdim=True)
    graphs = _run("x.sum(-1), x.amax(-1), x / x.sum(-1, keepdim=True) (fusion off)", f, x, fusion=False)
    sched = graphs[0].scheduler
    nbytes = lambda name: sched.nbytes.get(name, 0)  # noqa: E731
    groups = graphs[0].fused_groups()
    for i, a in enumerate(groups):
        for b in groups[i + 1:]:
            touched = {d.name for n in a.nodes for d in n.reads + n.writes}
            shared = sorted(touched & {d.name for n in b.nodes for d in n.reads})
            expected = sum(nbytes(n) for n in shared)
            got = score(a, b, nbytes)
            if got != expected:
                writes = {d.name for n in a.nodes for d in n.writes}
                detail = ", ".join(f"{n} ({nbytes(n)} bytes, " + ("written by the first, read by the second)"
                                   if n in writes else "read by both)") for n in shared) or "nothing"
                raise Failure(f"for the pair {a.get_name()} + {b.get_name()} your score is {got}; fusing them "
                              f"saves {expected} bytes: they share {detail}")
    graphs = _run("the same with fusion on", f, x)
    if len(graphs[0].kernels) != 1:
        raise Failure(f"with a correct score the three reductions and the division share one kernel; "
                      f"got {len(graphs[0].kernels)}")


# --------------------------------------------------------------------------- 06 C++ reductions
def cpp_reduction_init():
    x = torch.randn(8, 32) - 3.0          # mostly negative: a max that starts at 0 is wrong
    n = torch.randint(1, 100, (8, 32))

    def f(x, n):
        return (x.amax(-1), (x + 6.0).amin(-1), (x.abs() + 0.5).prod(-1), x.sum(-1), x.argmax(-1),
                (-x).argmin(-1), n.amax(-1), (x > -2.0).any(-1), n.amin(-1))
    X, N = "x ~ randn(8, 32) - 3", "n ~ randint(1, 100, (8, 32)), int64"   # what each output reduces
    names = [("x.amax(-1)", X), ("(x + 6).amin(-1)", X), ("(|x| + 0.5).prod(-1)", X), ("x.sum(-1)", X),
             ("x.argmax(-1)", X), ("(-x).argmin(-1)", X), ("n.amax(-1)", N), ("(x > -2).any(-1)", X),
             ("n.amin(-1)", N)]
    expected = f(x, n)
    got, _ = compile_and_run(f, x, n)
    for (name, data), g, e in zip(names, got, expected):
        expect_close(f"{name} for {data}", g, e)


# --------------------------------------------------------------------------- 07 memory reuse
def memory_reuse():
    x, w1, w2 = torch.randn(32, 32), torch.randn(32, 16), torch.randn(32, 16)

    def f(x, w1, w2):
        m = x.sin() @ w1                  # [32, 16]; x.sin() [32, 32] dies in the mm
        t = torch.cat([m, m], 1).cos()    # [32, 32]: may take x.sin()'s memory
        u = t @ w2                        # [32, 16]
        return torch.tanh(u).sum(0)       # [16]: no dead buffer has this size
    reuses = []

    def inspect(cg):
        buf = cg.graph.get_buffer
        for new, old in cg.plan.reuse.items():
            ln, lo = buf(new).layout, buf(old).layout
            kn, ko = (ln.device, ln.dtype, ln.storage_numel()), (lo.device, lo.dtype, lo.storage_numel())
            if kn != ko:
                raise Failure(f"your rule let {new} ({ln.dtype}, {ln.storage_numel()} elements) take the memory "
                              f"of {old} ({lo.dtype}, {lo.storage_numel()} elements): a bigger buffer writes "
                              f"past the end, a smaller one wastes memory the plan counts as free")
            reuses.append((new, old))
    _run("matmuls with pointwise ops between them", f, x, w1, w2, on_compiled=inspect)
    if not reuses:
        raise Failure("no buffer reused another's memory, though x.sin() [32, 32] dies before "
                      "cat([m, m], 1).cos() [32, 32] is allocated: is your key too strict?")


# --------------------------------------------------------------------------- 08 Triton block sizes
def triton_block_sizes():
    from miniinductor.triton.policy import MAX_BLOCK_NUMEL
    block_sizes = _target("miniinductor.triton.policy.block_sizes")
    cases = [(1000, None, False, False), (7, None, False, False), (1 << 20, None, False, False),
             (64, 100, True, False), (3, 4096, True, False), (1, 10000, False, False),
             (4096, 512, False, True), (100, 9000, False, False)]
    for xnumel, rnumel, persistent, outer in cases:
        call = f"block_sizes({xnumel}, {rnumel}, persistent={persistent}, outer={outer})"
        got = block_sizes(xnumel, rnumel, persistent, outer)
        keys = {"XBLOCK", "num_warps"} | ({"RBLOCK"} if rnumel is not None else set())
        if set(got) != keys:
            raise Failure(f"{call} returned the keys {sorted(got)}; expected {sorted(keys)}")
        for key, value in got.items():
            if not isinstance(value, int) or value < 1 or value & (value - 1):
                raise Failure(f"{call}: {key}={value!r} is not a power of 2")
        if got["num_warps"] > 16:
            raise Failure(f"{call}: num_warps={got['num_warps']}; a GPU program has at most 16 (here) warps")
        if rnumel is None:
            least = min(128, 1 << (xnumel - 1).bit_length())
            if not least <= got["XBLOCK"] <= max(4096, least):
                raise Failure(f"{call}: XBLOCK={got['XBLOCK']}; a pointwise program should take at least "
                              f"{least} elements (one each means {xnumel} programs doing almost nothing) "
                              f"and at most 4096")
            continue
        area = got["XBLOCK"] * got["RBLOCK"]
        if persistent and got["RBLOCK"] < rnumel:
            raise Failure(f"{call}: RBLOCK={got['RBLOCK']}, but a persistent reduction loads its whole row "
                          f"of {rnumel} elements in one block: RBLOCK must be at least {rnumel}")
        if area > max(MAX_BLOCK_NUMEL, got["RBLOCK"] if persistent else 0):
            raise Failure(f"{call}: XBLOCK * RBLOCK = {area} elements a program, more than MAX_BLOCK_NUMEL="
                          f"{MAX_BLOCK_NUMEL} (registers run out)")
        if not persistent and got["RBLOCK"] < 64:
            raise Failure(f"{call}: RBLOCK={got['RBLOCK']}: a looped reduction over {rnumel} elements would take "
                          f"{-(-rnumel // got['RBLOCK'])} steps a row; take at least 64 at a time")
    try:
        import triton  # noqa: F401
    except ImportError:   # no Triton here: the rules above are the whole check
        return
    x = torch.randn(8, 100)
    _run("softmax of x [8, 100] and x * 2 + 1 through Triton (interpreted)",
         lambda x: (torch.softmax(x, -1), x * 2 + 1), x, cpu_backend="triton")
