#!/usr/bin/env bash
# The project's main job: installs what it needs, then runs the RuleWorld demo (`calyrex demo`):
# base vs CALYREX vs parameter-matched LoRA and ParallelMLP, trained and evaluated on this machine.
# Extra arguments go to `calyrex demo` (e.g. --quick, --out DIR, --backbone DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/calyrex demo "$@"
