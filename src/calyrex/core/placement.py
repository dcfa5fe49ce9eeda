"""Placement presets: after which decoder layers CAL blocks go (architecture.md, "Placement").

A block "after layer i" sits between decoder layers i and i+1 (0-indexed). ``k = ceil(L/8) + 1``
is the width of an eighth-of-depth band.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence


def _band(num_layers: int) -> int:
    return math.ceil(num_layers / 8) + 1


def _mid8th(n: int) -> list[int]:
    start = n // 2 - _band(n) // 2
    return list(range(start, start + _band(n)))


PRESETS: dict[str, Callable[[int], list[int]]] = {
    "all": lambda n: list(range(n)),
    "every4": lambda n: [i for i in range(n) if i % 4 == 3],
    "first8th": lambda n: list(range(_band(n))),
    "mid8th": _mid8th,
    "late_half": lambda n: list(range(n // 2, n)),
    "late_quarter": lambda n: list(range(n - (math.ceil(n / 4) + 1), n)),
    "late8th": lambda n: list(range(n - _band(n), n)),
    "last": lambda n: [n - 1],
}


def placement_layers(placement: str | Sequence[int], num_layers: int) -> list[int]:
    """Resolve a preset name or an explicit list of layer indices to sorted layer indices.

    >>> placement_layers("late8th", num_layers=28)
    [23, 24, 25, 26, 27]
    """
    if isinstance(placement, str):
        if placement not in PRESETS:
            raise ValueError(
                f"unknown placement preset {placement!r}; choose one of {sorted(PRESETS)} "
                "or give an explicit list of layer indices"
            )
        layers = PRESETS[placement](num_layers)
    else:
        layers = [int(i) for i in placement]
    bad = [i for i in layers if not 0 <= i < num_layers]
    if bad:
        raise ValueError(f"layer indices {bad} are outside 0..{num_layers - 1} for this model")
    if not layers:
        raise ValueError("a placement must name at least one layer")
    return sorted(set(layers))
