#!/usr/bin/env bash
# Create .venv and install calyrex with everything it needs (CPU torch pinned: an unpinned
# torch pulls a multi-GB CUDA build). Re-runs only when pyproject.toml changes.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
stamp=.venv/.calyrex-installed
want=$(sha256sum pyproject.toml | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv/bin/pip install -q --upgrade pip >/dev/null
  .venv/bin/pip install -q "torch==2.13.0" -e ".[all]"
  echo "$want" > "$stamp"
fi
