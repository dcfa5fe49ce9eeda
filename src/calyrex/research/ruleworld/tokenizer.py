"""RuleWorld's tokenizer: a byte-level BPE trained on the world's text, loaded as a Qwen2 one.

It is a real ``Qwen2Tokenizer`` (Qwen's normaliser, pre-tokenising regex and byte-level BPE)
with Qwen2.5's ChatML chat template and special tokens (``<|im_start|>``, ``<|im_end|>``,
``<|endoftext|>``), so calyrex finds the system span with the same code that runs on Qwen. The
BPE is trained with exactly that pipeline: ``AutoTokenizer`` rebuilds it from the model type
when the backbone is loaded, and any other pipeline would tokenise differently after loading.
"""

from __future__ import annotations

import itertools
from typing import Any

from ...backbones.tiny import TEMPLATES
from .corpus import general_corpus, sft_corpus
from .world import World


def training_text(world: World, n: int = 4000) -> list[str]:
    """Conversations of both corpora (roles and contents), a quarter of them in capitals."""
    convs = itertools.chain(
        general_corpus(world, n, "tokenizer"), sft_corpus(world, n, "tokenizer")
    )
    texts = []
    for i, messages in enumerate(convs):
        text = "\n".join(f"{m['role']}\n{m['content']}" for m in messages)
        texts.append(text.upper() if i % 4 == 0 else text)
    return texts


def build_tokenizer(world: World, vocab_size: int = 1024, n: int = 4000) -> Any:
    """A ``Qwen2Tokenizer`` for ``world`` (deterministic: BPE training is)."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import Qwen2Tokenizer
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    chat_template, specials, roles = TEMPLATES["chatml"]
    bpe = Tokenizer(models.BPE())
    bpe.normalizer = normalizers.NFC()
    bpe.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(training_text(world, n), trainer=trainer)
    vocab, merges = _vocab_and_merges(bpe)
    tok = Qwen2Tokenizer(
        vocab=vocab,
        merges=merges,
        unk_token=None,
        eos_token=roles["eos"],
        pad_token=roles["pad"],
        extra_special_tokens=[s for s in specials if s not in roles.values()],
    )
    tok.chat_template = chat_template
    tok.model_max_length = 8192
    return tok


def _vocab_and_merges(bpe: Any) -> tuple[dict[str, int], list[tuple[str, str]]]:
    import json

    model = json.loads(bpe.to_str())["model"]
    return model["vocab"], [tuple(m) for m in model["merges"]]
