"""Training mixes from real public data (issues 27 and 28): the system-prompt SFT mix and the
preference mix, written by ``calyrex mix``; every benchmark's test items kept out."""

from __future__ import annotations

from .leaks import find_leaks
from .preference import build_preference, preference_config
from .rules import RULES, Rule
from .sft import MixConfig, build_sft

__all__ = [
    "RULES",
    "MixConfig",
    "Rule",
    "build_preference",
    "build_sft",
    "find_leaks",
    "preference_config",
]
