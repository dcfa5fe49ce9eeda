"""Per-request token choice and the text a client sees (stop strings, partial characters).

Legend: V vocab.
"""

from __future__ import annotations

import random
from typing import Any

import torch

from .request import SamplingParams


class Sampler:
    """Greedy (temperature 0) or temperature + top-p sampling from one request's own generator."""

    def __init__(self, params: SamplingParams) -> None:
        self.params = params
        seed = params.seed if params.seed is not None else random.getrandbits(63)
        self.generator = torch.Generator().manual_seed(seed % 2**63)

    def __call__(self, logits: torch.Tensor) -> int:
        """The next token from one row's logits (V,) in float32."""
        if self.params.greedy:
            return int(logits.argmax())
        probs = torch.softmax(logits.cpu() / self.params.temperature, dim=-1)  # (V,)
        if self.params.top_p < 1.0:
            sorted_p, order = probs.sort(descending=True)
            drop = sorted_p.cumsum(0) - sorted_p > self.params.top_p  # keeps at least one token
            probs = torch.zeros_like(probs).scatter(0, order, sorted_p.masked_fill(drop, 0.0))
        return int(torch.multinomial(probs, 1, generator=self.generator))


class TextStream:
    """Generated ids → text deltas, cut at the first stop string, never splitting a character.

    Text is re-decoded from all generated ids (byte-level BPE merges across tokens) and released
    up to the last complete character, holding back a tail that could still become a stop string.
    """

    def __init__(self, tokenizer: Any, stop: list[str]) -> None:
        self.tokenizer, self.stop = tokenizer, stop
        self.ids: list[int] = []
        self.sent = 0  # characters released so far
        self.stopped = False  # a stop string was reached

    def push(self, token: int) -> str:
        """Add one token; the text now safe to release."""
        self.ids.append(token)
        text = self.tokenizer.decode(self.ids, skip_special_tokens=True)
        hits = [i for i in (text.find(s) for s in self.stop) if i != -1]
        if hits:
            self.stopped = True
            return self._release(text, min(hits))
        safe = len(text.rstrip("\ufffd"))  # an incomplete UTF-8 sequence decodes to U+FFFD
        held = max((_overlap(text[:safe], s) for s in self.stop), default=0)
        return self._release(text, safe - held)

    def flush(self) -> str:
        """The rest of the text at the end of the generation (no stop string was reached)."""
        text = self.tokenizer.decode(self.ids, skip_special_tokens=True)
        return self._release(text, len(text))

    def _release(self, text: str, upto: int) -> str:
        upto = max(upto, self.sent)
        out, self.sent = text[self.sent : upto], upto
        return out


def _overlap(text: str, stop: str) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of ``stop``."""
    for n in range(min(len(stop) - 1, len(text)), 0, -1):
        if text.endswith(stop[:n]):
            return n
    return 0
