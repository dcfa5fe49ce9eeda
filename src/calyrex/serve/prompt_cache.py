"""The system-prompt cache: prefilled backbone K/V and CAL K/V of a system turn, reused.

Key: sha256 of (adapter checksum, dtype, salt, token ids through the end of the system turn and
their span bits). The K/V of a prefix are a function of exactly these — the backbone's of the
tokens and the weights, the CAL blocks' of the span tokens and the adapter — so a hit is exact,
and a different adapter, dtype or salt never hits (a timing side channel on secret system
prompts is a known CVE class for shared prefix caches: CVE-2025-46570, vLLM's ``cache_salt``).

An LRU bounded in bytes; pinned entries (the operator's ``--system-prompt``, pre-warmed at start)
are never evicted. Entries are copied out (``copy.deepcopy``: the CAL cache is an attribute of
the HF cache and is copied with it), so a request never writes into a cached prefix.
"""

from __future__ import annotations

import copy
import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import torch

from ..core import hf
from ..core.cal_cache import cal_cache


def prefix_key(adapter: str, dtype: str, salt: str, ids: list[int], system_mask: list[int]) -> str:
    """The cache key of a prefix (module doc); the salt is length-prefixed so fields never blur."""
    h = hashlib.sha256()
    for part in (adapter, dtype, salt):
        data = part.encode()
        h.update(len(data).to_bytes(8, "little") + data)
    h.update(torch.tensor(ids, dtype=torch.int64).numpy().tobytes())
    h.update(bytes(int(bool(s)) for s in system_mask))
    return h.hexdigest()


def cache_bytes(cache: Any) -> int:
    """Bytes held by an HF cache and the CAL keys/values on it."""
    tensors = [t for kv in hf.cache_kv(cache) for t in kv]
    store = cal_cache(cache)
    if store is not None:
        tensors += [store.key_pos, store.key_valid, *(t for kv in store.kv.values() for t in kv)]
    return sum(t.numel() * t.element_size() for t in tensors)


@dataclass
class Entry:
    cache: Any
    tokens: int
    nbytes: int
    pinned: bool


class PromptCache:
    """Thread-safe LRU of prefilled prefixes, bounded by ``capacity`` bytes (0: off)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[str, Entry] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = self.evictions = 0

    @property
    def enabled(self) -> bool:
        return self.capacity > 0

    @property
    def nbytes(self) -> int:
        return sum(e.nbytes for e in self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> Any | None:
        """A private copy of the cached prefix, or None."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
        return copy.deepcopy(entry.cache)

    def put(self, key: str, cache: Any, tokens: int, pinned: bool = False) -> bool:
        """Store a copy of ``cache``; False when it cannot fit (larger than the whole bound)."""
        if not self.enabled:
            return False
        stored = copy.deepcopy(cache)
        nbytes = cache_bytes(stored)
        with self._lock:
            pinned_bytes = sum(e.nbytes for e in self._entries.values() if e.pinned)
            if nbytes + (0 if pinned else pinned_bytes) > self.capacity and not pinned:
                return False
            self._entries[key] = Entry(stored, tokens, nbytes, pinned)
            self._entries.move_to_end(key)
            while self.nbytes > self.capacity:
                victim = next((k for k, e in self._entries.items() if not e.pinned), None)
                if victim is None:
                    break
                del self._entries[victim]
                self.evictions += 1
        return True
