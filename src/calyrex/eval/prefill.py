"""One prefill per prompt: the greedy reply *and* the log-probabilities of fixed replies.

Legend: B batch, T prompt tokens (left-padded), L target tokens, V vocabulary.

An attack suite wants two things of each prompt: what the model says (greedy, a few tokens: the
0/1 verdicts read it) and how likely a fixed reply is ("Access Granted", "Hacked!", the probe's
witness: the continuous, paired scores). Both start from the same prompt, so the prompt is run
once (``use_cache=True``) and both branch off its cache:

* each target is teacher-forced on a copy of the cache (:func:`calyrex.core.cal_cache
  .batch_select_indices` keeps a CAL model's span keys/values with it): ``log P(target)`` is the
  sum over its tokens of the log-softmax at the position before each;
* the reply is decoded greedily from the cache, one token a step, until every row has ended its
  turn or ``max_new_tokens`` are out (the same tokens as ``generate(do_sample=False)``).

Prompts are sorted by reply and prompt length and batched by a budget of padded tokens (left
padding, explicit ``position_ids``, so a padded row computes what it computes alone); a prompt
longer than the context window is a :class:`Skip`.

Prompts of one ``group`` (a Tensor Trust defence's attack and right code, a many-shot sample's
k = 4 and k = 16 prompts, whose 16 shots begin with the 4) share their common token prefix: it
is prefilled once per group, its cache repeated for the group's rows, and each row's remaining
tokens run after it (padding between the two parts is masked; positions count real tokens only,
so a row computes what it computes alone — tested against the one-call path).
A target's tokens are the chat template's own for that reply (``encode_one`` of the conversation
with the assistant turn, the prompt cut off, the end of turn dropped: the verdicts read how a reply
*opens*, and a model that says "Access Granted." with a period grants as much as one that stops).
"""

from __future__ import annotations

import copy
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ..core import hf
from ..core.cal_cache import batch_select_indices
from ..span.chat import ChatTemplateError, encode_one
from .generate import Generator, Message, Skip

# a batch holds at most batch_size × ROW_TOKENS padded prompt tokens and MAX_ROWS_FACTOR ×
# batch_size prompts (Reader._batches)
ROW_TOKENS = 256
MAX_ROWS_FACTOR = 4


@dataclass(frozen=True)
class Ask:
    """A prompt, the fixed replies to score on it (name → text) and the greedy reply's length."""

    conversation: Sequence[Message]
    targets: dict[str, str] = field(default_factory=dict)
    max_new_tokens: int = 0
    group: Hashable | None = None  # prompts of one group share their common prefix's prefill


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
        self.stats = {"prompts": 0, "prompt_tokens": 0, "target_tokens": 0, "new_tokens": 0}
        ends = {self.tok.eos_token_id, self.tok.convert_tokens_to_ids("<|im_end|>")}
        self.ends = {e for e in ends if isinstance(e, int) and e >= 0}

    def read(self, asks: Sequence[Ask]) -> list[Answer | Skip]:
        encs, targets = [], []
        for ask in asks:
            encs.append(encode_one(self.tok, ask.conversation, add_generation_prompt=True))
            targets.append(
                {k: target_ids(self.tok, ask.conversation, t) for k, t in ask.targets.items()}
            )
        new = [ask.max_new_tokens for ask in asks]
        return self.read_encoded(encs, targets, new, [ask.group for ask in asks])

    def read_encoded(
        self,
        encs: Sequence[dict[str, list[int]]],
        targets: Sequence[dict[str, list[int]]],
        new: Sequence[int],
        groups: Sequence[Hashable | None] | None = None,
    ) -> list[Answer | Skip]:
        """:meth:`read` on prompts already encoded (``input_ids``, ``system_mask``) and targets
        already tokenised (name → ids); ``new``: each prompt's greedy reply length; ``groups``:
        each prompt's group (None: a group of its own), whose common prefix is prefilled once."""
        out: list[Answer | Skip] = [Skip("not run")] * len(encs)
        members: dict[Hashable, list[int]] = {}
        for i, (enc, tgt) in enumerate(zip(encs, targets, strict=True)):
            longest = max([new[i], *(len(t) for t in tgt.values())], default=0)
            if len(enc["input_ids"]) + longest > self.gen.window:
                out[i] = Skip(
                    f"prompt of {len(enc['input_ids'])} tokens + {longest} more exceeds the "
                    f"model's context window of {self.gen.window}"
                )
            else:
                key = ("row", i) if groups is None or groups[i] is None else ("group", groups[i])
                members.setdefault(key, []).append(i)
        # similar reply and prompt lengths together: little decoding and padding
        units = sorted(
            (max(new[i] for i in m), max(len(encs[i]["input_ids"]) for i in m), m)
            for m in members.values()
        )
        for chunk in self._batches(units):
            rows = [i for unit in chunk for i in unit]
            owner = [g for g, unit in enumerate(chunk) for _ in unit]  # row → its group
            answers = self._batch(
                [encs[i] for i in rows],
                [targets[i] for i in rows],
                [new[i] for i in rows],
                owner,
            )
            for i, answer in zip(rows, answers, strict=True):
                out[i] = answer
        return out

    def _batches(self, units: list[tuple[int, int, list[int]]]) -> list[list[list[int]]]:
        """Sorted (reply length, prompt length, rows) groups cut into batches of at most
        ``batch_size`` × :data:`ROW_TOKENS` padded prompt tokens and ``MAX_ROWS_FACTOR`` ×
        ``batch_size`` rows: short prompts share a batch (fewer decode steps), long ones do not
        pad each other out (the prefill is most of the cost on a CPU). A group is never split."""
        budget = self.gen.batch_size * ROW_TOKENS
        most = MAX_ROWS_FACTOR * self.gen.batch_size
        out: list[list[list[int]]] = []
        chunk: list[list[int]] = []
        rows = width = 0
        for _, n, unit in units:
            wider = max(width, n)
            if chunk and (rows + len(unit) > most or wider * (rows + len(unit)) > budget):
                out.append(chunk)
                chunk, rows, wider = [], 0, n
            chunk.append(unit)
            rows, width = rows + len(unit), wider
        return [*out, chunk] if chunk else out

    @property
    def device(self) -> torch.device:
        return self.gen.device

    @torch.no_grad()
    def _batch(
        self,
        encs: list[dict[str, list[int]]],
        targets: list[dict[str, list[int]]],
        new: list[int],
        owner: list[int],
    ) -> list[Answer]:
        """One batch; ``owner``: each row's group (rows of a group adjacent)."""
        cache, last, mask = self._prefill(encs, owner)
        self.stats["prompts"] += len(encs)
        answers = [Answer(None, {}, {}) for _ in encs]
        for name in sorted({k for t in targets for k in t}):
            rows = [b for b, t in enumerate(targets) if name in t]
            scores = self._score(cache, last, mask, rows, [targets[b][name] for b in rows])
            for b, (score, greedy) in zip(rows, scores, strict=True):
                answers[b].logprobs[name] = score
                answers[b].tokens[name] = len(targets[b][name])
                answers[b].greedy[name] = greedy
        if max(new):
            for b, text in enumerate(self._greedy(cache, last, mask, new)):
                answers[b].reply = text if new[b] else None
        return answers

    def _prefill(
        self, encs: list[dict[str, list[int]]], owner: list[int]
    ) -> tuple[Any, torch.Tensor, torch.Tensor]:
        """The prompts' cache, last logits (B, V) and attention mask (B, T'): in one call, or,
        where rows share a group, its common prefix once and then each row's rest."""
        cut = _shared_prefix(encs, owner)
        if cut is None:
            ids, mask, span = self._padded(encs)
            out = self._forward(ids, mask, span, None)  # the prompt, once
            self.stats["prompt_tokens"] += int(mask.sum())
            return hf.output_cache(out), out.logits[:, -1].float(), mask
        firsts = [owner.index(g) for g in range(owner[-1] + 1)]  # a row of each group
        heads = [{k: v[: cut[b]] for k, v in encs[b].items()} for b in firsts]
        ids, head_mask, span = self._padded(heads)
        cache = hf.output_cache(self._forward(ids, head_mask, span, None))  # (G, P) once
        index = torch.tensor(owner, device=self.device)
        cache, head_mask = batch_select_indices(cache, index), head_mask[index]  # (B, P)
        tails = [{k: v[cut[b] :] for k, v in e.items()} for b, e in enumerate(encs)]
        ids, tail_mask, span = self._padded(tails)
        mask = torch.cat([head_mask, tail_mask], 1)  # (B, P + S): padding between the parts
        out = self._forward(ids, mask, span, cache)
        self.stats["prompt_tokens"] += int(head_mask[firsts].sum() + tail_mask.sum())
        return hf.output_cache(out), out.logits[:, -1].float(), mask

    def _padded(
        self, encs: list[dict[str, list[int]]]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Left-padded ids, attention mask and span, each (B, T) for the longest T."""
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
        return ids.to(self.device), mask.to(self.device), span.to(self.device)

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


def _common(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _shared_prefix(encs: list[dict[str, list[int]]], owner: list[int]) -> list[int] | None:
    """Per row, how many of its first tokens its group shares (every row keeps at least one
    token after it, so its last logits come from its own call); None when no group shares any
    (or a row would have an empty prefix): one call is then cheaper."""
    cut = [0] * len(encs)
    for g in set(owner):
        rows = [b for b, o in enumerate(owner) if o == g]
        ids = [encs[b]["input_ids"] for b in rows]
        n = min(_common(ids[0], x) for x in ids) if len(rows) > 1 else len(ids[0]) - 1
        n = min(n, min(len(x) for x in ids) - 1)
        for b in rows:
            cut[b] = n
    if min(cut) < 1 or all(owner.count(o) == 1 for o in owner):
        return None
    return cut
