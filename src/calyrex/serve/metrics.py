"""Counters of a server, rendered as Prometheus text (``GET /metrics``); no client library."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable

HELP = {
    "calyrex_requests_total": ("counter", "Chat completion requests by outcome"),
    "calyrex_requests_rejected_total": ("counter", "Responses with an error status, by reason"),
    "calyrex_requests_running": ("gauge", "Requests decoding now (rows of the decode batch)"),
    "calyrex_queue_depth": ("gauge", "Admitted requests waiting for a row"),
    "calyrex_queue_wait_seconds": ("summary", "Submission to admission into the decode batch"),
    "calyrex_request_body_bytes": ("summary", "Bytes of chat request bodies read"),
    "calyrex_prompt_tokens_total": ("counter", "Prompt tokens of finished requests"),
    "calyrex_completion_tokens_total": ("counter", "Generated tokens"),
    "calyrex_prefill_tokens_forwarded_total": ("counter", "Prompt tokens run through the model"),
    "calyrex_cached_tokens_total": ("counter", "Prompt tokens served from the prompt cache"),
    "calyrex_prompt_cache_hits_total": ("counter", "System-prompt cache hits"),
    "calyrex_prompt_cache_misses_total": ("counter", "System-prompt cache misses"),
    "calyrex_prompt_cache_bytes": ("gauge", "Bytes held by the system-prompt cache"),
    "calyrex_prompt_cache_entries": ("gauge", "Prefixes held by the system-prompt cache"),
    "calyrex_decode_steps_total": ("counter", "Batched decode steps"),
    "calyrex_decode_rows_total": ("counter", "Rows over all decode steps (÷ steps = mean batch)"),
    "calyrex_time_to_first_token_seconds": ("summary", "Submission to first token"),
}
LABELS = {  # the label names of a labelled counter, in the order its values are given
    "calyrex_requests_total": ("outcome",),
    "calyrex_requests_rejected_total": ("status", "reason"),
}
Labels = str | tuple[str, ...]


def _key(labels: Labels) -> tuple[str, ...]:
    return (labels,) if isinstance(labels, str) else tuple(labels)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class Metrics:
    """Thread-safe counters; gauges are read from callables at render time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[tuple[str, tuple[str, ...]]] = Counter()
        self.gauges: dict[str, Callable[[], float]] = {}

    def add(self, name: str, value: float = 1, labels: Labels = ()) -> None:
        with self._lock:
            self._counts[name, _key(labels)] += value

    def get(self, name: str, labels: Labels = ()) -> float:
        with self._lock:
            return self._counts[name, _key(labels)]

    def observe(self, name: str, value: float) -> None:
        with self._lock:
            self._counts[name + "_sum", ()] += value
            self._counts[name + "_count", ()] += 1

    def reject(self, status: int, reason: str) -> None:
        """Count a response with an error status (a 4xx or 5xx, generation or not)."""
        self.add("calyrex_requests_rejected_total", 1, (str(status), reason))

    def render(self) -> str:
        with self._lock:
            counts = dict(self._counts)
        lines = []
        for name, (kind, text) in HELP.items():
            lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
            if name in self.gauges:
                lines.append(f"{name} {float(self.gauges[name]())}")
            elif kind == "summary":
                for part in ("_sum", "_count"):
                    lines.append(f"{name}{part} {float(counts.get((name + part, ()), 0))}")
            else:
                labelled = sorted((lab, v) for (n, lab), v in counts.items() if n == name)
                for lab, v in labelled or [((), 0)]:
                    pairs = zip(LABELS.get(name, ()), lab, strict=False)
                    tag = ",".join(f'{k}="{_escape(x)}"' for k, x in pairs)
                    lines.append(f"{name}{{{tag}}} {float(v)}" if tag else f"{name} {float(v)}")
        return "\n".join(lines) + "\n"
