#!/usr/bin/env bash
# The project's main job: installs what it needs, then runs the end-to-end demo.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python examples/quickstart.py "$@"
