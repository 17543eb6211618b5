"""Extension `scan`: cumsum, cumprod and logcumsumexp as kernels of ours, not ATen calls.

lowering.py lowers them to a `Scan` (ir.py, Inductor's `ir.Scan`), stored at once as a
`ScanBuffer` whose scheduler node (`ScanSchedulerNode`, passes.NODE_KINDS) is computed by a
kernel of its own kind: cpp.py (a loop carrying the running value, the outer dims in
parallel) or triton.py (`tl.associative_scan` over a block of rows). Pointwise producers
are inlined into the scan (ext/more_ops' flip too, so that cumsum's backward, flip, cumsum,
flip, is one scan kernel); consumers are not fused into it. A scan along the last dim may take
into its kernel the reductions of its rows that come before it (`scan_fusion`): softmax's
max and sum, so that cumsum(softmax(x)) is one kernel reading x once. With the extension off, the ops
run as ATen calls.

Simplified: no cummax/cummin (their index output needs a scan of pairs), no consumers fused
into the scan's kernel (only reductions before it), static sizes only.
"""
from ...config import declare_extension
from ...passes import FUSION_RULES, NODE_KINDS, kernel_kind
from ...scheduler.scheduler import canonical
from ...triton.policy import PERSISTENT_REDUCTION_MAX
from . import lowering  # noqa: F401  (registers the lowerings, owned by this extension)
from .cpp import ScanCppKernel, split_ranges
from .ir import ScanBuffer, ScanSchedulerNode
from .triton import ScanTritonKernel

declare_extension("scan", "cumsum, cumprod and logcumsumexp as scan kernels")


def _scan_node(group):
    """The group's scan node (its last: what it reads comes before it), or None."""
    nodes = getattr(group, "nodes", ())
    scans = [n for n in nodes if getattr(n, "is_scan", False)]
    return scans[0] if len(scans) == 1 and scans[0] is nodes[-1] else None


def scan_fusion(a, b):
    """The rule of passes.FUSION_RULES: None where neither group holds a scan; else the loops
    of a reduction group `a` and a group `b` ending in a scan along the last dim of the same rows, one block
    long at most (softmax's max and sum, then the scan of its output: one kernel that reads
    each row once), or why not."""
    if not any(getattr(n, "is_scan", False) for n in a.nodes + b.nodes):
        return None
    scan = _scan_node(b)
    if scan is None or any(getattr(n, "is_scan", False) for n in a.nodes):
        return "a scan shares its kernel only with the reductions of its rows before it", "scan"
    outer, (n,) = split_ranges(scan.scan)
    if not a.is_reduction or scan.scan.scan_dim != len(scan.scan.ranges) - 1 or n > PERSISTENT_REDUCTION_MAX:
        return "a scan shares its kernel only with reductions of its rows, rows of one block", "scan"
    if (a.R, a.Q) != (canonical(outer), canonical([n])):
        return f"ranges differ: reduction {a.R}x{a.Q} vs scan {outer} along {n}", "scan"
    return (a.R, a.Q), "scan"


def _kernel(kind):
    def make(group, ctx):
        node = _scan_node(group)
        return None if node is None else kind(group.kernel_name, node.scan, ctx.config)
    return make


NODE_KINDS[ScanBuffer] = ScanSchedulerNode
FUSION_RULES.append(("scan", scan_fusion))
kernel_kind("cpp", "scan", _kernel(ScanCppKernel), "scan", first=True)
kernel_kind("triton", "scan", _kernel(ScanTritonKernel), "scan", first=True)
