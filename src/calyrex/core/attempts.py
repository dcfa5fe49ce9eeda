"""Wall seconds of work that is interrupted and resumed: the attempts before this one (read back
from what the last one saved) plus this one. Training's checkpoints and evaluation's saved
replies each carry the seconds up to them."""

from __future__ import annotations

import time


class Attempts:
    def __init__(self, before: float = 0.0, started: float | None = None) -> None:
        self.before = before  # the attempts before this one, up to where it resumed
        self.started = time.perf_counter() if started is None else started  # this attempt's

    @property
    def this_attempt(self) -> float:
        return time.perf_counter() - self.started

    @property
    def seconds(self) -> float:
        return self.before + self.this_attempt

    def figures(self, digits: int) -> dict[str, float]:
        """``seconds`` and ``seconds_this_attempt`` from one reading (two readings differ)."""
        attempt = self.this_attempt
        return {
            "seconds": round(self.before + attempt, digits),
            "seconds_this_attempt": round(attempt, digits),
        }
