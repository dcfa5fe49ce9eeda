"""Streaming per-layer summaries: examples are folded in one at a time, never stored."""

from __future__ import annotations

import torch


class RunningStat:
    """Mean and spread of a per-layer vector over examples (Welford's algorithm, float64)."""

    def __init__(self) -> None:
        self.count = 0
        self.mean: torch.Tensor | None = None  # (L,)
        self._m2: torch.Tensor | None = None  # (L,)

    def add(self, x: torch.Tensor) -> None:
        x = x.detach().double().cpu()
        if self.mean is None:
            self.mean, self._m2 = torch.zeros_like(x), torch.zeros_like(x)
        self.count += 1
        delta = x - self.mean
        self.mean += delta / self.count
        self._m2 += delta * (x - self.mean)

    @property
    def std(self) -> torch.Tensor:
        """Sample standard deviation (0 with fewer than two examples)."""
        if self.mean is None:
            raise ValueError("no examples were added")
        return (self._m2 / max(self.count - 1, 1)).sqrt()

    def to_dict(self) -> dict[str, list[float]]:
        if self.mean is None:
            raise ValueError("no examples were added")
        return {"mean": _floats(self.mean), "std": _floats(self.std)}


def _floats(x: torch.Tensor) -> list[float]:
    return [round(float(v), 6) for v in x]
