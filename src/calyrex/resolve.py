"""The one model resolver of every subcommand: ``ruleworld``, a directory, or a hub id.

A name that is none of these fails at once with a message that says why, instead of HF's
download retries with backoff when the hub cannot be reached.
"""

from __future__ import annotations

import os
from pathlib import Path

RULEWORLD = "ruleworld"  # the packaged RuleWorld backbone


class ModelNotFoundError(ValueError):
    """A model name that is neither a directory, ``ruleworld``, nor a reachable hub id."""


def resolve_model(name: str | os.PathLike, revision: str | None = None) -> str:
    """What ``from_pretrained`` should load for ``name``: a local path or a reachable hub id."""
    name = str(name)
    if name == RULEWORLD:
        from .ruleworld.pretrain import ASSET_DIR

        return str(ASSET_DIR)
    if Path(name).is_dir():
        return name
    if Path(name).exists():
        raise ModelNotFoundError(f"{name} is a file; give a model directory or a hub id")
    if name.count("/") > 1 or name.startswith((".", "/", "~")):
        raise ModelNotFoundError(f"no model directory {name}")
    import huggingface_hub

    if huggingface_hub.try_to_load_from_cache(name, "config.json", revision=revision):
        return name  # in the local hub cache: loads offline
    if huggingface_hub.constants.HF_HUB_OFFLINE:
        raise ModelNotFoundError(
            f"{name!r} is not a directory and is not in the local hub cache (HF_HUB_OFFLINE is set)"
        )
    try:
        huggingface_hub.model_info(name, revision=revision, timeout=10)
    except huggingface_hub.errors.RepositoryNotFoundError as err:
        raise ModelNotFoundError(f"{name!r} is not a directory nor a model on the hub") from err
    except huggingface_hub.errors.HfHubHTTPError as err:
        raise ModelNotFoundError(f"the hub refused {name!r}: {err}") from err
    except Exception as err:  # noqa: BLE001 — no network: say so instead of retrying
        raise ModelNotFoundError(
            f"{name!r} is not a directory, not in the local hub cache, and the hub cannot be "
            f"reached ({type(err).__name__}: {err}); use a local directory or 'ruleworld'"
        ) from err
    return name
