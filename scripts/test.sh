#!/usr/bin/env bash
# The project's test command: installs what it needs, then lint, format check and the tests.
# `scripts/test.sh --slow` also runs the checks marked slow.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
if [ "${1:-}" = "--slow" ]; then shift; exec .venv/bin/pytest -q -m "" "$@"; fi
exec .venv/bin/pytest -q "$@"
