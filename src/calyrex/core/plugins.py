"""What the library reaches only by name: the entry points other packages declare.

The library never imports the research wing (:mod:`calyrex.research`); where it offers a place
for more — a named model, a subcommand, a data source of ``calyrex analyze`` — a package fills it
by declaring an entry point in its ``pyproject.toml`` (``[project.entry-points."GROUP"]``, as
vLLM's plugins are found), read here with :mod:`importlib.metadata`. Groups: :data:`MODELS`,
:data:`COMMANDS`, :data:`ANALYSIS_DATA`.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any

MODELS = "calyrex_models"  # name → function returning a model directory
COMMANDS = "calyrex_commands"  # subcommand → its function
ANALYSIS_DATA = "calyrex_analysis_data"  # data name → function(seed) returning rule conversations


def table(group: str) -> dict[str, str]:
    """``name → "module:attribute"`` of every entry point declared in ``group``."""
    return {ep.name: ep.value for ep in entry_points(group=group)}


def load(target: str) -> Any:
    """The object a ``"module:attribute"`` string names (its module imported now)."""
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)
