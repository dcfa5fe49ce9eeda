#!/usr/bin/env bash
# Build the documentation site strictly (mkdocs.yml): a broken link or anchor, a page missing from
# the nav, or a `:::` reference to a module that no longer exists fails it. The site goes to a
# temporary folder; `.venv/bin/mkdocs serve` previews it. Part of scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
export NO_MKDOCS_2_WARNING=1  # mkdocs-material's banner about MkDocs 2.0 (pinned below 2)
.venv/bin/mkdocs build --strict --site-dir "${TMPDIR:-/tmp}/calyrex-site"
