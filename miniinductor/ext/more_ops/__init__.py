"""Extension `more_ops`: lowerings past the core's, for ops the core alone runs as ATen calls.

Most ops here are decompositions into ops the core lowers (decompositions.py), taken into
the table through `capture/decompositions.EXTRA_DECOMPOSITIONS` while this extension is on:
the activations tagged core and pointwise (hardtanh -- ReLU6 --, ELU and SELU, leaky ReLU),
fmax/fmin, round with decimals, ldexp, RReLU out of training, erfinv (ATen's own formula),
min/max along a dim with their indices, group norm forward and backward, 3-d max pooling and
repeat; `flip` is a lowering (lowering.py). With it off they run as ATen calls (correct, slower).
"""
from ...capture.decompositions import EXTRA_DECOMPOSITIONS
from ...config import declare_extension
from . import decompositions, lowering  # noqa: F401  (lowering: registers flip)

EXTRA_DECOMPOSITIONS.append(("more_ops", decompositions.table))
declare_extension("more_ops", "lowerings past the core's: ops the core alone runs as ATen calls "
                  "(activations, erfinv, flip, min/max.dim, group norm, 3-d max pooling)")
