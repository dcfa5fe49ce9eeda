"""The study's progress lines (on stdout: ``runs/study.log`` when it runs in the background)
and its JSON records, written atomically."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any


def say(msg: str) -> None:
    """``[study HH:MM:SS] msg``, flushed at once (a log read while the study runs is current)."""
    print(f"[study {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def write(path: Path, data: Any) -> None:
    """``data`` as JSON at ``path``, atomically (a record is whole or absent)."""
    from ...eval.data import write_json

    write_json(path, data)
