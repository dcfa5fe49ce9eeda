#!/usr/bin/env bash
# The vLLM lane on a GPU machine, for when one is lent (not run so far: no GPU was lent).
#
#   VLLM_PY=/path/to/venv/bin/python bash scripts/vllm_gpu.sh
#
# Needs a Python environment with vLLM 0.32's CUDA build and calyrex installed
# (`pip install "vllm==0.32.*" && pip install -e .`); nothing is downloaded here. Runs the plugin
# tests (greedy ≡ HF calyrex matrix, zero adapter ≡ stock, the OpenAI server) on CUDA with the V1
# runner and eager forwards — the configuration the plugin supports — then the benchmark, and
# checks that the V2 runner and CUDA graphs are refused rather than silently serving the base.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${VLLM_PY:-python}
OUT=${OUT:-/tmp/calyrex-vllm-gpu}
mkdir -p "$OUT"
"$PY" -c "import torch, vllm; assert torch.cuda.is_available(); print('vLLM', vllm.__version__, torch.cuda.get_device_name())"
export VLLM_USE_V2_MODEL_RUNNER=0
"$PY" -m pytest -q -p no:cacheprovider tests/vllm_lane 2>&1 | tee "$OUT/tests.log"
"$PY" benchmarks/vllm_bench.py --out "$OUT/vllm-bench.json" 2>&1 | tail -8 | tee "$OUT/bench.log"
