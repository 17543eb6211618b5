"""Extension `scan`: cumsum, cumprod and logcumsumexp as kernels of ours, not ATen calls.

lowering.py lowers them to a `Scan` (ir.py, Inductor's `ir.Scan`), stored at once as a
`ScanBuffer` whose scheduler node (`ScanSchedulerNode`, passes.NODE_KINDS) is computed by a
kernel of its own kind: cpp.py (a loop carrying the running value, the outer dims in
parallel) or triton.py (`tl.associative_scan` over a block of rows). Pointwise producers
are inlined into the scan (a softmax stays its own kernel; the scan reads its buffer);
consumers are not fused into it (`scan_fusion`). It also lowers flip, as a view, so that
cumsum's backward (flip, cumsum, flip) is one scan kernel. With the extension off, the ops
run as ATen calls.

Simplified: no cummax/cummin (their index output needs a scan of pairs), no consumers fused
into the scan's kernel, static sizes only.
"""
from ...config import declare_extension
from ...passes import FUSION_RULES, NODE_KINDS, kernel_kind
from . import lowering  # noqa: F401  (registers the lowerings, owned by this extension)
from .cpp import ScanCppKernel
from .ir import ScanBuffer, ScanSchedulerNode
from .triton import ScanTritonKernel

declare_extension("scan", "cumsum, cumprod and logcumsumexp as scan kernels (and flip as a view)")


def _scan_node(group):
    nodes = getattr(group, "nodes", ())
    return nodes[0] if len(nodes) == 1 and getattr(nodes[0], "is_scan", False) else None


def scan_fusion(a, b):
    """The rule of passes.FUSION_RULES: a group holding a scan shares its kernel with nothing."""
    if any(getattr(n, "is_scan", False) for n in a.nodes + b.nodes):
        return "a scan is a kernel of its own", "scan"
    return None


def _kernel(kind):
    def make(group, ctx):
        node = _scan_node(group)
        return None if node is None else kind(group.kernel_name, node.scan, ctx.config)
    return make


NODE_KINDS[ScanBuffer] = ScanSchedulerNode
FUSION_RULES.append(("scan", scan_fusion))
kernel_kind("cpp", "scan", _kernel(ScanCppKernel), "scan", first=True)
kernel_kind("triton", "scan", _kernel(ScanTritonKernel), "scan", first=True)
