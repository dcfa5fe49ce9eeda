#!/usr/bin/env bash
# The project's test command: installs what it needs, then lint, format check, the strict docs
# build (scripts/docs.sh) and the tests.
# `scripts/test.sh --slow` also runs the checks marked slow; `scripts/test.sh --vllm` runs the
# vLLM lane (its own .venv-vllm with vLLM's CPU build: plugin tests, then the vLLM benchmark).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--vllm" ]; then
  shift
  bash scripts/setup_vllm.sh
  .venv-vllm/bin/python -m pytest -q -p no:cacheprovider tests/vllm_lane "$@"
  exec .venv-vllm/bin/python benchmarks/vllm_bench.py --requests 2 --tokens 32 \
    --out "${TMPDIR:-/tmp}/calyrex-vllm-bench.json"
fi
bash scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
bash scripts/docs.sh
if [ "${1:-}" = "--slow" ]; then shift; exec .venv/bin/pytest -q -m "not timing" "$@"; fi
exec .venv/bin/pytest -q "$@"
