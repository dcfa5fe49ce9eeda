"""The preference mix (issue 28, item 2): TRL's conversational preference rows for DPO.

* ``injection``: SecAlign pairs (Chen et al. 2025) from the SFT mix's injection stream — the
  prompt is the injected example, ``chosen`` the reply to the system's task, ``rejected`` the
  reply that obeys the injected instruction (the injected dolly item's own reply). With the same
  seed these are the SFT mix's injection examples, in the same order, then more;
* ``access``: Tensor Trust pairs from the raw defences — ``chosen`` the refusal of a wrong code
  or an attack and ``rejected`` "Access Granted" (an extraction's rejected reply leaks the
  code); the right code's pairs (``granted``) keep the defences helpful: ``chosen`` "Access
  Granted", ``rejected`` the refusal.

With ``balance_grants`` (``calyrex mix --balance-grants``) the right-code pairs are repeated until
"Access Granted" is the preferred reply about as often as the rejected one (:func:`balanced`).

Rows: ``{"prompt": [system, user], "chosen": [assistant], "rejected": [assistant], "source",
"kind", "tag"}``, the format ``trl.DPOTrainer`` reads (``trl.data_utils.is_conversational``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .access import GRANTED
from .example import Example
from .sft import MixConfig, build_split

PREFERENCE_SHARES = {"injection": 0.5, "access": 0.5}
PREFERENCE_N = 1600


def preference_config(
    n: int = PREFERENCE_N,
    seed: int = 0,
    access: str = "default",
    val: int = 0,
    balance_grants: bool = False,
) -> MixConfig:
    return MixConfig(
        n=n,
        seed=seed,
        shares=dict(PREFERENCE_SHARES),
        access=access,
        val=val,
        balance_grants=balance_grants,
    )


def check_preference(config: MixConfig) -> None:
    if set(config.shares) - set(PREFERENCE_SHARES):
        raise ValueError(f"preference kinds are {sorted(PREFERENCE_SHARES)}, not {config.shares}")


def balanced(examples: list[Example]) -> list[Example]:
    """``examples`` with each pair that prefers "Access Granted" (a right code) repeated
    ``round(rejected / preferred)`` times, the counts of pairs where that reply is rejected (a
    wrong code, a hijack) and preferred: with ``every-outcome`` each defence has two of the first
    and one of the second, so its right code appears twice. Unbalanced, lowering "Access
    Granted" everywhere wins more pairs than it loses, and DPO finds that: the study's first
    CALYREX DPO run (docs/study.md) lost every right-code validation pair and granted nothing.
    A repeat follows its original (the Trainer shuffles)."""
    preferred = sum(ex.reply == GRANTED for ex in examples)
    rejected = sum(ex.rejected == GRANTED for ex in examples)
    times = max(1, round(rejected / preferred)) if preferred else 1
    return [x for ex in examples for x in [ex] * (times if ex.reply == GRANTED else 1)]


def preference_split(root: Path, config: MixConfig) -> dict[str, list[Example]]:
    """The preference mix's ``train`` and ``validation`` examples, each :func:`balanced` when
    ``config.balance_grants``."""
    check_preference(config)
    parts = build_split(root, config)
    if config.balance_grants:
        parts = {name: balanced(examples) for name, examples in parts.items()}
    return parts


def build_preference(root: Path, config: MixConfig | None = None) -> list[dict[str, Any]]:
    """The preference mix's rows; ``config.shares`` may name only kinds with a rejected reply."""
    examples = preference_split(root, config or preference_config())["train"]
    return [ex.preference_row() for ex in examples]
