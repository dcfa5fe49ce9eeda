"""One prefill per prompt: the greedy reply *and* the log-probabilities of fixed replies.

Legend: B batch, T prompt tokens (left-padded), L target tokens, V vocabulary.

An attack suite wants two things of each prompt: what the model says (greedy, a few tokens: the
0/1 verdicts read it) and how likely a fixed reply is ("Access Granted", "Hacked!", the probe's
witness: the continuous, paired scores). Both start from the same prompt, so the prompt is run
once (``use_cache=True``) and both branch off its cache:

* each target is teacher-forced on a copy of the cache (:func:`calyrex.core.cal_cache
  .batch_select_indices` keeps a CAL model's span keys/values with it): ``log P(target)`` is the
  sum over its tokens of the log-softmax at the position before each. A batch's targets, of
  every name and row, are sorted by length and forced in groups that pad by at most
  :data:`TARGET_SLACK` (piqa at 48 documents: 36 s → 13 s of scoring, the same values);
* the reply is decoded greedily from the cache, one token a step, until every row has ended its
  turn or ``max_new_tokens`` are out (the same tokens as ``generate(do_sample=False)``).

Prompts are sorted by reply and prompt length and batched by a budget of padded tokens (left
padding, explicit ``position_ids``, so a padded row computes what it computes alone); a prompt
longer than the context window is a :class:`Skip`.
A target's tokens are the chat template's own for that reply (``encode_one`` of the conversation
with the assistant turn, the prompt cut off, the end of turn dropped: the verdicts read how a reply
*opens*, and a model that says "Access Granted." with a period grants as much as one that stops).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ..core import hf
from ..core.cal_cache import batch_select_indices
from ..span.chat import ChatTemplateError, encode_one
from .generate import Generator, Message, Skip, end_ids

# a batch holds at most batch_size × ROW_TOKENS padded prompt tokens and MAX_ROWS_FACTOR ×
# batch_size prompts (Reader._cut)
ROW_TOKENS = 256
MAX_ROWS_FACTOR = 4
# targets teacher-forced together pad to the longest of them: a group takes a longer target only
# while its padded tokens stay within (1 + TARGET_SLACK) × its real ones (Reader._cut)
TARGET_SLACK = 0.25


@dataclass(frozen=True)
class Ask:
    """A prompt, the fixed replies to score on it (name → text) and the greedy reply's length."""

    conversation: Sequence[Message]
    targets: dict[str, str] = field(default_factory=dict)
    max_new_tokens: int = 0


@dataclass
class Answer:
    reply: str | None  # None when max_new_tokens is 0
    logprobs: dict[str, float]  # target name → sum of log P over its tokens
    tokens: dict[str, int]  # target name → its token count
    greedy: dict[str, bool] = field(default_factory=dict)  # target name → it is the argmax path


def target_ids(tokenizer: Any, conversation: Sequence[Message], target: str) -> list[int]:
    """The tokens the chat template gives ``target`` as the assistant's reply (module doc)."""
    prompt = encode_one(tokenizer, conversation, add_generation_prompt=True)["input_ids"]
    full = encode_one(tokenizer, [*conversation, {"role": "assistant", "content": target}])
    if full["input_ids"][: len(prompt)] != prompt:
        raise ChatTemplateError("the prompt is not a prefix of the prompt with its reply")
    labelled = [t for t, y in zip(full["input_ids"], full["labels"], strict=True) if y != -100]
    return labelled[:-1]  # the reply's tokens without the end-of-turn token that follows


class Reader:
    """:class:`Ask` → :class:`Answer`, in length-sorted batches, over a :class:`Generator`'s model."""

    def __init__(self, gen: Generator) -> None:
        self.gen, self.model, self.tok = gen, gen.model, gen.tokenizer
        self.stats = gen.stats  # one counter per model (calyrex.eval.generate.COST_KEYS)
        self.ends = end_ids(self.tok, self.model)

    def read(self, asks: Sequence[Ask]) -> list[Answer | Skip]:
        encs, targets = [], []
        for ask in asks:
            encs.append(encode_one(self.tok, ask.conversation, add_generation_prompt=True))
            targets.append(
                {k: target_ids(self.tok, ask.conversation, t) for k, t in ask.targets.items()}
            )
        return self.read_encoded(encs, targets, [ask.max_new_tokens for ask in asks])

    def read_encoded(
        self,
        encs: Sequence[dict[str, list[int]]],
        targets: Sequence[dict[str, list[int]]],
        new: Sequence[int],
    ) -> list[Answer | Skip]:
        """:meth:`read` on prompts already encoded (``input_ids``, ``system_mask``) and targets
        already tokenised (name → ids); ``new``: each prompt's greedy reply length."""
        out: list[Answer | Skip] = [Skip("not run")] * len(encs)
        rows = []
        for i, (enc, tgt) in enumerate(zip(encs, targets, strict=True)):
            longest = max([new[i], *(len(t) for t in tgt.values())], default=0)
            if len(enc["input_ids"]) + longest > self.gen.window:
                out[i] = Skip(
                    f"prompt of {len(enc['input_ids'])} tokens + {longest} more exceeds the "
                    f"model's context window of {self.gen.window}"
                )
            else:
                rows.append((new[i], len(enc["input_ids"]), i))
        rows.sort()  # similar reply and prompt lengths together: little decoding and padding
        for cut in self._cut([n for _, n, _ in rows]):
            chunk = [rows[j][2] for j in cut]
            answers = self._batch(
                [encs[i] for i in chunk], [targets[i] for i in chunk], [new[i] for i in chunk]
            )
            for i, answer in zip(chunk, answers, strict=True):
                out[i] = answer
        return out

    def _cut(self, sizes: Sequence[int], slack: float | None = None) -> list[list[int]]:
        """The positions of ``sizes`` (sequence lengths, in their order) cut into runs that are
        forwarded together, each padded to its longest: at most ``batch_size`` ×
        :data:`ROW_TOKENS` padded tokens and ``MAX_ROWS_FACTOR`` × ``batch_size`` rows, and with
        ``slack``, padded by at most that share of the run's real tokens. Prompts sorted by reply
        and prompt length: short prompts share a batch (fewer decode steps), long ones do not pad
        each other out (the prefill is most of the cost on a CPU). Targets sorted by length, with
        :data:`TARGET_SLACK`: lengths that differ widely (piqa's solutions run 5 to 110 tokens)
        do not pad each other out."""
        budget = self.gen.batch_size * ROW_TOKENS
        most = MAX_ROWS_FACTOR * self.gen.batch_size
        out: list[list[int]] = []
        run: list[int] = []
        width = real = 0
        for j, n in enumerate(sizes):
            wider = max(width, n)
            padded = wider * (len(run) + 1)
            too_padded = slack is not None and padded > (1 + slack) * (real + n)
            if run and (len(run) >= most or padded > budget or too_padded):
                out.append(run)
                run, wider, real = [], n, 0
            run.append(j)
            width, real = wider, real + n
        return [*out, run] if run else out

    @property
    def device(self) -> torch.device:
        return self.gen.device

    @torch.no_grad()
    def _batch(
        self,
        encs: list[dict[str, list[int]]],
        targets: list[dict[str, list[int]]],
        new: list[int],
    ) -> list[Answer]:
        width = max(len(e["input_ids"]) for e in encs)
        pad = self.tok.pad_token_id if self.tok.pad_token_id is not None else min(self.ends)
        ids = torch.full((len(encs), width), pad, dtype=torch.long)  # (B, T) left-padded
        mask = torch.zeros_like(ids)
        span = torch.zeros_like(ids, dtype=torch.bool)
        for b, e in enumerate(encs):
            n = len(e["input_ids"])
            ids[b, width - n :] = torch.tensor(e["input_ids"])
            mask[b, width - n :] = 1
            span[b, width - n :] = torch.tensor(e["system_mask"], dtype=torch.bool)
        ids, mask, span = ids.to(self.device), mask.to(self.device), span.to(self.device)
        out = self._forward(ids, mask, span, None)  # the prompt, once
        cache, last = hf.output_cache(out), out.logits[:, -1].float()  # (B, V)
        self.stats["prompts"] += len(encs)
        self.stats["prompt_tokens"] += int(mask.sum())
        self.stats["padded_tokens"] += mask.numel()
        scored: list[dict[str, tuple[float, bool]]] = [{} for _ in encs]
        pairs = sorted(
            (len(t), b, name) for b, tgt in enumerate(targets) for name, t in tgt.items()
        )
        for cut in self._cut([p[0] for p in pairs], TARGET_SLACK):
            group = [pairs[j] for j in cut]
            rows = [b for _, b, _ in group]
            scores = self._score(cache, last, mask, rows, [targets[b][k] for _, b, k in group])
            for (_, b, name), score in zip(group, scores, strict=True):
                scored[b][name] = score
        answers = [
            Answer(
                None,
                {k: s[k][0] for k in sorted(s)},
                {k: len(t[k]) for k in sorted(t)},
                {k: s[k][1] for k in sorted(s)},
            )
            for s, t in zip(scored, targets, strict=True)
        ]
        if max(new):
            for b, text in enumerate(self._greedy(cache, last, mask, new)):
                answers[b].reply = text if new[b] else None
        return answers

    def _forward(
        self, ids: torch.Tensor, mask: torch.Tensor, span: torch.Tensor, cache: Any
    ) -> Any:
        """One call of ``ids`` (B, n) after ``cache``; ``mask`` (B, past + n) covers both."""
        positions = (mask.cumsum(-1) - 1).clamp(min=0)[:, -ids.shape[1] :]  # (B, n)
        kwargs = {"input_ids": ids, "attention_mask": mask, "position_ids": positions}
        kwargs |= {"system_mask": span, "use_cache": True}
        if cache is not None:
            kwargs |= hf.cache_kwargs(self.model, cache)
        else:
            kwargs["logits_to_keep"] = 1
        return self.model(**kwargs)

    def _score(
        self,
        cache: Any,
        last: torch.Tensor,
        mask: torch.Tensor,
        rows: list[int],
        targets: list[list[int]],
    ) -> list[tuple[float, bool]]:
        """Per row: the sum of log P over its target tokens, teacher-forced on a copy of the
        cache, and whether every target token is the argmax at its position."""
        index = torch.tensor(rows, device=self.device)
        length = max(len(t) for t in targets)
        forced = torch.zeros((len(rows), length), dtype=torch.long, device=self.device)  # (B, L)
        real = torch.zeros_like(forced, dtype=torch.bool)
        for r, t in enumerate(targets):
            forced[r, : len(t)] = torch.tensor(t)
            real[r, : len(t)] = True
        first = torch.log_softmax(last[index], -1)  # (B, V)
        logp = first.gather(1, forced[:, :1])  # (B, 1)
        top = first.argmax(-1, keepdim=True) == forced[:, :1]  # (B, 1)
        if length > 1:
            branch = batch_select_indices(copy.deepcopy(cache), index)
            full = torch.cat([mask[index], real.long()], 1)  # (B, T + L)
            span = torch.zeros_like(forced, dtype=torch.bool)
            out = self._forward(forced[:, :-1], full[:, :-1], span[:, :-1], branch)
            rest = torch.log_softmax(out.logits.float(), -1)  # (B, L - 1, V)
            logp = torch.cat([logp, rest.gather(2, forced[:, 1:, None])[..., 0]], 1)  # (B, L)
            top = torch.cat([top, rest.argmax(-1) == forced[:, 1:]], 1)
        self.stats["target_tokens"] += int(real.sum())
        sums = (logp * real).sum(1).tolist()
        greedy = (top | ~real).all(1).tolist()
        return list(zip(sums, greedy, strict=True))

    def _greedy(
        self, cache: Any, last: torch.Tensor, mask: torch.Tensor, new: list[int]
    ) -> list[str]:
        """Greedy replies of up to ``new[b]`` tokens from the prompt's cache (which it extends);
        a row that has its tokens or ended its turn is carried along until every row has."""
        rows = [[] for _ in range(mask.shape[0])]
        done = [n == 0 for n in new]
        logits = last
        for step in range(max(new)):
            token = logits.argmax(-1)  # (B,)
            for b, t in enumerate(token.tolist()):
                if not done[b]:
                    done[b] = t in self.ends
                    if not done[b]:
                        rows[b].append(t)
                        done[b] = len(rows[b]) >= new[b]
            if all(done) or step == max(new) - 1:
                break
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], 1)
            span = torch.zeros_like(token[:, None], dtype=torch.bool)
            out = self._forward(token[:, None], mask, span, cache)
            cache, logits = hf.output_cache(out), out.logits[:, -1].float()
        self.stats["new_tokens"] += sum(len(r) for r in rows)
        return [self.tok.decode(r, skip_special_tokens=True) for r in rows]
