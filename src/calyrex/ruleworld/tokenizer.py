"""RuleWorld's tokenizer: a byte-level BPE trained on the world's text, with ChatML.

It is a real ``PreTrainedTokenizerFast`` with Qwen2.5's ChatML chat template and special tokens
(``<|im_start|>``, ``<|im_end|>``, ``<|endoftext|>``), so calyrex finds the system span with
the same code that runs on Qwen, and it round-trips through ``save_pretrained``.
"""

from __future__ import annotations

import itertools
from typing import Any

from ..testing import tiny_tokenizer
from .corpus import general_corpus, sft_corpus
from .world import World


def training_text(world: World, n: int = 4000) -> list[str]:
    """Rendered conversations of both corpora, a quarter of them in capitals."""
    convs = itertools.chain(
        general_corpus(world, n, "tokenizer"), sft_corpus(world, n, "tokenizer")
    )
    texts = []
    for i, messages in enumerate(convs):
        text = "\n".join(m["content"] for m in messages)
        texts.append(text.upper() if i % 4 == 0 else text)
    return texts


def build_tokenizer(world: World, vocab_size: int = 1024, n: int = 4000) -> Any:
    """A ``PreTrainedTokenizerFast`` for ``world`` (deterministic: BPE training is)."""
    tok = tiny_tokenizer("chatml", vocab_size=vocab_size, corpus=training_text(world, n))
    tok.model_max_length = 8192
    return tok
