"""Extension `more_ops`: lowerings past the core's, for ops the core alone runs as ATen calls.

Each op here is a decomposition into ops the core lowers (decompositions.py), taken into the
table through `capture/decompositions.EXTRA_DECOMPOSITIONS` while this extension is on: the
activations tagged core and pointwise (hardtanh -- ReLU6 --, ELU and SELU, leaky ReLU), more
pointwise ops, min/max along a dim with their indices, group norm forward and backward, and
pooling beyond the core's 2-d forms. With it off they run as ATen calls (correct, slower).
"""
from ...capture.decompositions import EXTRA_DECOMPOSITIONS
from ...config import declare_extension
from . import decompositions

EXTRA_DECOMPOSITIONS.append(("more_ops", decompositions.table))
declare_extension("more_ops", "lowerings past the core's: ops the core alone runs as ATen calls "
                  "(activations, min/max.dim, group norm, 3-d pooling)")
