"""Extension `pool_grad`: the backwards of 2-d pooling lowered as gathers (lowering.py),
as Inductor lowers them; with it off they run as ATen calls (correct, slower)."""
from ...config import declare_extension
from . import lowering  # noqa: F401  (registers the lowerings, owned by this extension)

declare_extension("pool_grad", "the backwards of max, average and adaptive average pooling as loop IR gathers")
