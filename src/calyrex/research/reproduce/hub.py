"""Sizes from Hugging Face hub metadata for the dry-run, without downloading anything.

One request per repository with a short timeout and no retries; the first network failure
marks the hub unreachable and every later lookup answers at once. ``HF_HUB_OFFLINE=1`` skips
the hub entirely.
"""

from __future__ import annotations

import os
from pathlib import Path


def human(size: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if size < 1000 or unit == "TB":
            return f"{size:.1f} {unit}" if unit != "B" else f"{int(size)} B"
        size /= 1000
    return ""


def local_size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


class Hub:
    def __init__(self, timeout: float = 5.0) -> None:
        self.timeout = timeout
        offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes")
        self.unreachable: str | None = "HF_HUB_OFFLINE is set" if offline else None

    def size(self, repo: str, kind: str = "model") -> str:
        """``"3.1 GB (hub)"`` or why the size is unknown."""
        if self.unreachable:
            return "size unknown (hub unreachable)"
        from huggingface_hub import HfApi
        from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

        api = HfApi()
        lookup = api.model_info if kind == "model" else api.dataset_info
        try:
            info = lookup(repo, files_metadata=True, timeout=self.timeout)
        except GatedRepoError:
            return "size unknown (gated: accept the licence on the hub and log in)"
        except RepositoryNotFoundError:
            return "not found on the hub"
        except Exception as err:  # noqa: BLE001 — any network failure: stop asking
            self.unreachable = f"{type(err).__name__}: {str(err)[:80]}"
            return "size unknown (hub unreachable)"
        files = [s for s in info.siblings or [] if s.size]
        weights = [s for s in files if s.rfilename.endswith(".safetensors")]
        total = sum(s.size for s in (weights if kind == "model" and weights else files))
        return f"{human(total)} (hub)"
