"""Extensions: the performance features, each registered through passes.py and config.py.

Every folder here declares its options (`config.declare_extension`), adds its passes to a
stage (`passes.register`), and, where it changes how kernels are written, a kernel kind
(`passes.kernel_kind`) or a change to the backend policy (`passes.POLICY_PATCHES`). The
core never imports this package: `miniinductor/__init__.py` does, so every extension is
registered before the first compile. `options={"extensions": []}` (the `core` preset)
turns them all off; the core path alone compiles every model correctly.

The order of the imports below is the order of their passes within a stage (so the
import sorter leaves this file alone; tests/core/test_passes.py checks the order).
"""
# isort: skip_file
from . import scan  # noqa: F401  (first: its fusion rule and kernel kinds before the others')
from . import gemm  # noqa: F401
from . import cpu_conv  # noqa: F401
from . import layout  # noqa: F401
from . import mix_order  # noqa: F401
from . import combo  # noqa: F401
from . import cpp_wrapper  # noqa: F401
from . import cudagraphs  # noqa: F401
from . import freezing  # noqa: F401
from . import joint_graph  # noqa: F401
from . import scatter  # noqa: F401  (before cpu_fast: its kernel kind goes first)
from . import cpu_fast  # noqa: F401
from . import pool_grad  # noqa: F401
from . import more_ops  # noqa: F401
from . import cost_model  # noqa: F401  (its fusion rule is asked last: the others' pairs are theirs)
from . import fx_graph_cache  # noqa: F401  (last: its wrapper of compile_graph is the outermost, looking graphs up first)
