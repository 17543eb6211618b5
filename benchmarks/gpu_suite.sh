#!/usr/bin/env bash
# Everything that needs a GPU, in one go: the Triton tests on CUDA, the common template on
# CUDA, the GPU-only tests (models, modes), then the GPU benchmark and the model zoo
# (ours and Inductor vs eager). Run from the repo root:
#     bash benchmarks/gpu_suite.sh [OUTDIR]
set -uo pipefail
out=${1:-gpu_results}
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
python -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())"
# the `miniinductor` backend name comes from the package's entry point: install it (no deps)
python -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -2
python -m pytest -q -p no:cacheprovider tests/triton/test_triton.py tests/triton/test_gpu.py tests/core/test_dynamic.py \
    tests/ext/freezing/test_freezing.py tests/core/test_autocast.py tests/core/test_integers.py "tests/core/test_common_targets.py" -k "not cpu-triton" 2>&1 | tee "$out/gpu_tests.log" | tail -25
cp docs/benchmarks_gpu.md "$out/" 2>/dev/null   # its hand-written notes are kept
python benchmarks/bench_gpu.py --out "$out/bench_gpu.json" --markdown "$out/benchmarks_gpu.md" 2>&1 | tee "$out/bench_gpu.log" | tail -30
python benchmarks/compile_time.py --out "$out/compile_time.json" 2>&1 | tee "$out/compile_time.log" | tail -10
python benchmarks/zoo_gpu.py --json "$out/zoo_gpu.json" 2>&1 | tee "$out/zoo_gpu.log" | grep -v "falling back" | tail -20
python benchmarks/zoo_gpu.py --config t5-large-ish --worst 8 2>&1 | tee "$out/zoo_t5_large.log" | grep -v "falling back" | tail -12
# real transformers / torch.nn / torchvision models (SDPA and eager attention), compiled vs eager gradients
python benchmarks/real_models_gpu.py --out "$out/real_models_gpu.json" 2>&1 | tee "$out/real_models_gpu.log" | tail -36
python benchmarks/sdpa_backends_gpu.py 2>&1 | tee "$out/sdpa_backends_gpu.log" | grep -E " ok|FAIL|supported|failed"
# the accuracy debugger on CUDA, and the T5 gap's control (GELU: no mask to flip)
python benchmarks/zoo_accuracy.py --model gpt2 --step 1 --device cuda 2>&1 | tee "$out/zoo_accuracy_cuda.log" | tail -15
python benchmarks/t5_gap_float64.py --gelu 2>&1 | tee "$out/t5_gap_gelu.log" | tail -12
# data parallel, when there are 2 GPUs: DDP and FSDP2 with eager / miniinductor / Inductor
if [ "$(python -c 'import torch; print(torch.cuda.device_count())')" -ge 2 ]; then
    python benchmarks/ddp_gpu.py --json "$out/ddp_gpu.json" 2>&1 | tee "$out/ddp_gpu.log" | grep -v '^\[rank' | tail -10
fi
