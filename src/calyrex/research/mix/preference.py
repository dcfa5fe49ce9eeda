"""The preference mix (issue 28, item 2): TRL's conversational preference rows for DPO.

* ``injection``: SecAlign pairs (Chen et al. 2025) from the SFT mix's injection stream — the
  prompt is the injected example, ``chosen`` the reply to the system's task, ``rejected`` the
  reply that obeys the injected instruction (the injected dolly item's own reply). With the same
  seed these are the SFT mix's injection examples, in the same order, then more;
* ``access``: Tensor Trust pairs from the raw defences — ``chosen`` the refusal of a wrong code
  or an attack and ``rejected`` "Access Granted" (an extraction's rejected reply leaks the
  code); the right code's pairs (``granted``) keep the defences helpful: ``chosen`` "Access
  Granted", ``rejected`` the refusal.

Rows: ``{"prompt": [system, user], "chosen": [assistant], "rejected": [assistant], "source",
"kind", "tag"}``, the format ``trl.DPOTrainer`` reads (``trl.data_utils.is_conversational``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .sft import MixConfig, build_examples

PREFERENCE_SHARES = {"injection": 0.5, "access": 0.5}
PREFERENCE_N = 1600


def preference_config(
    n: int = PREFERENCE_N, seed: int = 0, access: str = "default", val: int = 0
) -> MixConfig:
    return MixConfig(n=n, seed=seed, shares=dict(PREFERENCE_SHARES), access=access, val=val)


def check_preference(config: MixConfig) -> None:
    if set(config.shares) - set(PREFERENCE_SHARES):
        raise ValueError(f"preference kinds are {sorted(PREFERENCE_SHARES)}, not {config.shares}")


def build_preference(root: Path, config: MixConfig | None = None) -> list[dict[str, Any]]:
    """The preference mix's rows; ``config.shares`` may name only kinds with a rejected reply."""
    config = config or preference_config()
    check_preference(config)
    return [ex.preference_row() for ex in build_examples(root, config)]
