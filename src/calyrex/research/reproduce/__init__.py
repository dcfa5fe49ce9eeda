"""``calyrex reproduce``: the paper's tables for one backbone in one resumable command.

- :mod:`.config` — the per-backbone YAML as dataclasses (it points to the per-method training YAMLs)
- :mod:`.stages` — train, eval, analyze, ablate, report; each resumable, each writing where its
  standalone command would
- :mod:`.table`, :mod:`.bootstrap`, :mod:`.render`, :mod:`.extras` — the paper-layout report
- :mod:`.plan`, :mod:`.estimate`, :mod:`.hub` — the dry-run: commands, sizes, GPU-hours
- :mod:`.smoke`, :mod:`.smoke_data` — the CI-sized run on a tiny offline model
"""

from .command import reproduce
from .config import ReproduceConfig, load_config

__all__ = ["ReproduceConfig", "load_config", "reproduce"]
