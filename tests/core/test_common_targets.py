"""The common test template on the other targets: Triton kernels on the CPU (through
Triton's interpreter, so CI checks the Triton code generator without a GPU) and, when a
GPU is present, Triton kernels on CUDA with inputs moved there. Same cases, same checks
(`conftest.check`), against eager on the same device."""
import pytest
import torch
from conftest import USING_MINIINDUCTOR, check, compile_fn
from test_common import CASES
from torch.utils._pytree import tree_map

TARGETS = [("cpu", {"cpu_backend": "triton"})]
if torch.cuda.is_available():
    TARGETS.append(("cuda", {}))

pytestmark = pytest.mark.skipif(not USING_MINIINDUCTOR, reason="targets are miniinductor options")


def to_device(args, device):
    return tree_map(lambda x: x.to(device) if isinstance(x, torch.Tensor) else x, args)


#: (case, device) pairs too slow for the quick suite under Triton's interpreter (~20 s): sweeps
SLOW_UNDER_INTERPRETER = {("reduce_long_rows", "cpu")}


def _params():
    for c in CASES:
        for device, options in TARGETS:
            marks = [pytest.mark.sweep] if (c.name, device) in SLOW_UNDER_INTERPRETER else []
            yield pytest.param(c, (device, options), id=f"{c.name}-{device}-triton", marks=marks)


@pytest.mark.parametrize("c, target", list(_params()))
def test_case_on_target(c, target):
    device, options = target
    args = to_device(c.make_inputs(), device)
    if device != "cpu":
        try:
            c.fn(*to_device(args, device))
        except RuntimeError as exc:  # e.g. the case builds a CPU tensor inside (torch.arange(n))
            pytest.skip(f"case is written for the CPU: eager fails on {device}: {str(exc).splitlines()[0]}")
    check(c.fn, *args, rtol=c.rtol, atol=c.atol, compiled=compile_fn(c.fn, **options))
