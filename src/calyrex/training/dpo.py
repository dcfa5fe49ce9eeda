"""DPO on the adapters, with a free reference model: the same model, as training starts.

Rafailov et al. (2023) take as reference a frozen copy of the model DPO starts from (the SFT
model). Here the reference is the policy itself, called with other adapter weights, so it holds
no copy of the base and costs one extra no-grad forward a step:

- ``reference="start"`` (the default): the adapter weights as training starts, kept as a
  snapshot (only the trainable tensors: 71 MB for the study's 17.7 M) and swapped in for the
  reference's call only (``torch.func.functional_call``). With ``--init-adapter`` that is the
  SFT model; with a fresh adapter it is the base, and then no snapshot is needed: the policy
  with every adapter switched off (``disable_adapter()``, :mod:`calyrex.adapters.contract`) is
  the frozen base bit for bit.
- ``reference="base"``: always the base, adapters off, also after ``--init-adapter`` (what
  calyrex did before; DPO then starts from the SFT adapter's own margin over the base, not 0).

The loss, its metrics and the training loop are TRL's ``DPOTrainer``; what this module adds:

- :class:`FreeReference`, the ``ref_model`` it is given: a module without parameters that
  calls the policy under its ``disable_adapter()``, or with the starting snapshot swapped in;
- calyrex's own tokens and span (:func:`encode_pair`): ``encode_one``'s ids (chat-template ids,
  special-token strings in contents kept plain text) and the prompt's ``system_mask``, which
  :class:`PreferenceCollator` hands to the model with every chosen and rejected row;
- calyrex's adapter-only, atomic checkpoints (:class:`~calyrex.training.trainer.AdapterTrainer`);
- the fused LM head scores only the completion's positions on the CPU too
  (:func:`completion_positions_only`): TRL does so where Triton runs it and scores every
  position elsewhere, and on the CPU that was half of a DPO step.

Data: JSONL in TRL's conversational preference format, one pair a line::

    {"prompt": [{"role": "system", ...}, {"role": "user", ...}],
     "chosen": [{"role": "assistant", "content": ...}],
     "rejected": [{"role": "assistant", "content": ...}]}
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from unittest import mock

import torch
from torch import nn

try:
    import trl.trainer.utils as fused_head
    from trl import DPOConfig, DPOTrainer
    from trl.trainer.dpo_trainer import DataCollatorForPreference
    from trl.trainer.utils import add_fused_lm_head
except ImportError as err:  # an optional dependency: pip install 'calyrex[dpo]'
    raise ImportError("objective 'dpo' needs TRL: pip install 'calyrex[dpo]'") from err

from ..adapters.methods import accept_system_mask
from ..span.chat import SystemPromptTruncatedError, encode_one
from .config import TrainConfig
from .data import DataError, EncodeStats, read_rows
from .trainer import AdapterTrainer

# the per-token outputs DPOTrainer asks of its fused LM head (trl 1.16, DPOTrainer.__init__)
FUSED_OUTPUTS = ("log_probs", "entropy", "mean_logits", "is_top1")
REWARDS = ("rewards/chosen", "rewards/rejected", "rewards/accuracies", "rewards/margins")


# -- data ---------------------------------------------------------------------------------------
def _messages(value: Any, where: str, key: str) -> list[dict[str, str]]:
    ok = isinstance(value, list) and all(
        isinstance(m, dict) and {"role", "content"} <= set(m) for m in value
    )
    if not ok or not value:
        raise DataError(
            f"{where}: {key!r} must be a non-empty list of {{'role', 'content'}} objects"
        )
    return [{"role": str(m["role"]), "content": str(m["content"])} for m in value]


def normalise_pair(row: Any, where: str) -> dict[str, list[dict[str, str]]]:
    """One row of TRL's conversational preference format, checked; ``where`` names it in errors."""
    if not isinstance(row, dict) or not {"prompt", "chosen", "rejected"} <= set(row):
        keys = sorted(row) if isinstance(row, dict) else type(row).__name__
        raise DataError(
            f"{where}: a preference pair needs 'prompt', 'chosen' and 'rejected' (TRL's "
            f"conversational format), got {keys}"
        )
    pair = {key: _messages(row[key], where, key) for key in ("prompt", "chosen", "rejected")}
    for key in ("chosen", "rejected"):
        if any(m["role"] != "assistant" for m in pair[key]):
            raise DataError(f"{where}: every message of {key!r} must be an assistant turn")
    if pair["prompt"][-1]["role"] == "assistant":
        raise DataError(
            f"{where}: the prompt ends with an assistant turn; the reply goes in chosen"
        )
    return pair


def load_pairs(
    sources: str | Sequence[str],
    system_pool: Sequence[str] | None,
    seed: int = 0,
    skip_invalid: bool = False,
    stats: EncodeStats | None = None,
) -> list[dict[str, list[dict[str, str]]]]:
    """Read and check every pair before any compute; a prompt without a system turn gets one
    from ``system_pool`` (seeded), as SFT conversations do."""
    sources = [s.strip() for s in sources.split(",")] if isinstance(sources, str) else list(sources)
    rng, stats = random.Random(seed), stats or EncodeStats()
    out = []
    for source in sources:
        for row, where in read_rows(source):
            try:
                pair = normalise_pair(row, where)
            except DataError:
                if not skip_invalid:
                    raise
                stats.skipped["invalid_pair"] += 1
                continue
            if pair["prompt"][0]["role"] != "system" and system_pool:
                system = {"role": "system", "content": rng.choice(list(system_pool))}
                pair["prompt"] = [system, *pair["prompt"]]
            out.append(pair)
    if not out:
        raise DataError(f"no usable preference pairs in {sources}")
    return out


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def encode_pair(tokenizer: Any, pair: dict[str, list[dict[str, str]]]) -> dict[str, list[int]]:
    """``prompt_ids``, ``chosen_ids``, ``rejected_ids`` (TRL's columns) and the prompt's
    ``system_mask``, in calyrex's tokens (``encode_one``).

    As in TRL, a reply starts where the prompt (with its generation prompt) and prompt + reply
    stop agreeing; the system span lies in the prompt, the same for both replies.
    """
    head = encode_one(tokenizer, pair["prompt"], add_generation_prompt=True)
    chosen = encode_one(tokenizer, [*pair["prompt"], *pair["chosen"]])["input_ids"]
    rejected = encode_one(tokenizer, [*pair["prompt"], *pair["rejected"]])["input_ids"]
    ids = head["input_ids"]
    n = min(_common_prefix(ids, chosen), _common_prefix(ids, rejected))
    if any(head["system_mask"][n:]):
        raise DataError("the system prompt does not lie in the prompt both replies share")
    return {
        "prompt_ids": ids[:n],
        "chosen_ids": chosen[n:],
        "rejected_ids": rejected[n:],
        "system_mask": head["system_mask"][:n],
    }


def encode_pairs(
    tokenizer: Any,
    pairs: Sequence[dict[str, list[dict[str, str]]]],
    max_length: int,
    on_truncate: str = "drop",
    stats: EncodeStats | None = None,
) -> list[dict[str, Any]]:
    """Encode every pair; replies longer than ``max_length`` are cut at the end (TRL's
    ``keep_start``), a pair whose system prompt would be cut is dropped and counted, or an
    error (``on_truncate``), and so is one whose prompt leaves no room for a reply."""
    stats = stats or EncodeStats()
    rows = []
    for i, pair in enumerate(pairs):
        try:
            row = encode_pair(tokenizer, pair)
        except DataError as err:
            raise DataError(f"pair {i}: {err}") from err
        span = row["system_mask"]
        if any(span[max_length:]):
            err = SystemPromptTruncatedError(
                f"the system prompt ends at token {max(j for j, s in enumerate(span) if s) + 1} "
                f"but max_length is {max_length}"
            )
            if on_truncate == "error":
                raise DataError(f"pair {i}: {err} (use on_truncate='drop')") from err
            stats.skipped["system_prompt_truncated"] += 1
            continue
        if len(row["prompt_ids"]) >= max_length:
            stats.skipped["prompt_fills_max_length"] += 1
            continue
        longest = len(row["prompt_ids"]) + max(len(row["chosen_ids"]), len(row["rejected_ids"]))
        rows.append({**row, "length": min(longest, max_length)})  # for group_by_length
    stats.kept = len(rows)
    if not rows:
        raise DataError(f"every preference pair was skipped: {stats.summary()}")
    return rows


# -- the free reference -------------------------------------------------------------------------
def starting_weights(policy: nn.Module) -> dict[str, torch.Tensor]:
    """A detached copy of ``policy``'s trainable tensors (its adapter), by name."""
    return {n: p.detach().clone() for n, p in policy.named_parameters() if p.requires_grad}


class FreeReference(nn.Module):
    """DPO's reference model: ``policy`` itself, called with its adapters switched off
    (``weights`` None: the base) or with ``weights`` in place of its trainable tensors (the
    policy as it was when they were copied, :func:`starting_weights`).

    ``policy`` is kept out of the module tree, so this module has no parameters: nothing of it
    is saved, moved, sharded or copied, and it adds no memory beyond one no-grad forward (and
    the snapshot, when there is one). ``policy`` answers the adapter contract: its
    ``disable_adapter()`` is the switch.
    """

    def __init__(self, policy: nn.Module, weights: dict[str, torch.Tensor] | None = None) -> None:
        super().__init__()
        object.__setattr__(self, "policy", policy)  # not a submodule
        object.__setattr__(self, "weights", weights)  # not buffers: never saved or moved

    @property
    def config(self) -> Any:
        return self.policy.config

    def _placed(self) -> dict[str, torch.Tensor]:
        """The snapshot on its tensors' device and dtype: the Trainer places the policy (on a
        GPU, say) after the snapshot was taken on the CPU; moved once, when it first differs."""
        params = dict(self.policy.named_parameters())
        if any(not _alike(w, params[n]) for n, w in self.weights.items()):
            moved = {n: w.to(params[n].device, params[n].dtype) for n, w in self.weights.items()}
            object.__setattr__(self, "weights", moved)
        return self.weights

    def forward(self, **kwargs: Any) -> Any:
        if self.weights is not None:  # the snapshot for this call only, even on error
            return torch.func.functional_call(self.policy, self._placed(), (), kwargs, strict=False)
        with self.policy.disable_adapter():
            return self.policy(**kwargs)


def _alike(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.device == b.device and a.dtype == b.dtype


@dataclass
class PreferenceCollator(DataCollatorForPreference):
    """TRL's collator (rows ``[chosen…, rejected…]``, right padding, ``keep_start`` truncation)
    plus ``system_mask`` (2B, T): each row's prompt span, padded with zeros. Every model takes
    it (:func:`~calyrex.adapters.methods.accept_system_mask`): calyrex models read it, the
    base model and PEFT models ignore it."""

    def torch_call(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        out = super().torch_call(examples)
        width = out["input_ids"].shape[1]
        rows = [e["system_mask"][:width] for e in examples]
        rows = [r + [0] * (width - len(r)) for r in rows]
        out["system_mask"] = torch.tensor(rows + rows, dtype=torch.long)  # chosen, rejected
        return out


@contextmanager
def completion_positions_only() -> Iterator[None]:
    """TRL's fused LM head (trl 1.16) scores only the positions with a label, the completion's,
    where Triton runs it (``_use_triton``), and every position elsewhere, so that an XLA or
    Neuron device sees one tile shape for every batch. On the CPU there is nothing to compile:
    here it scores the labelled positions there too. A study batch's prompts and padding are
    over 90 % of its positions (``benchmarks/dpo_fused_head.py`` times both paths); the loss
    and gradients are the same bit for bit: each position's log-probability is its own row's,
    whichever rows go through the head. A TRL without ``_use_triton`` keeps its own path (the
    same figures, slower)."""
    chosen = getattr(fused_head, "_use_triton", None)
    if chosen is None:
        yield
        return
    with mock.patch.object(fused_head, "_use_triton", lambda d: d.type == "cpu" or chosen(d)):
        yield


def preference_args(common: dict[str, Any], cfg: TrainConfig) -> DPOConfig:
    """TRL's ``DPOConfig`` over the options every objective shares and ``cfg``'s DPO options;
    TRL's own defaults that differ from ``TrainingArguments`` (gradient checkpointing on,
    ``bf16``) are overridden by ``common`` or here: checkpointing is the model's
    (``TrainConfig.gradient_checkpointing``)."""
    return DPOConfig(
        **common,
        beta=cfg.beta,
        loss_type=list(cfg.loss_type),
        loss_weights=None if cfg.loss_weights is None else list(cfg.loss_weights),
        max_length=cfg.max_length,
        truncation_mode="keep_start",
        gradient_checkpointing=False,
        precompute_ref_log_probs=False,
    )


class PreferenceTrainer(AdapterTrainer, DPOTrainer):
    """TRL's DPOTrainer with a :class:`FreeReference` (unless ``ref_model`` is given) and
    calyrex's adapter-only checkpoints; ``train_dataset``: rows of :func:`encode_pairs`.

    ``reference_weights``: the adapter tensors the reference uses (:func:`starting_weights` of
    the model before training, or before a resumed run loads its checkpoint); None: the base."""

    def __init__(
        self,
        model: nn.Module,
        args: DPOConfig,
        train_dataset: Any,
        tokenizer: Any,
        ref_model: nn.Module | None = None,
        eval_dataset: Any = None,
        reference_weights: dict[str, torch.Tensor] | None = None,
    ) -> None:
        from datasets import Dataset

        if ref_model is not None and reference_weights is not None:
            raise ValueError("give ref_model or reference_weights, not both")
        # every batch carries system_mask: the policy and a given reference take it (the contract)
        model = accept_system_mask(model)
        ref_model = None if ref_model is None else accept_system_mask(ref_model)
        pad = tokenizer.pad_token_id
        collator = PreferenceCollator(
            pad_token_id=tokenizer.eos_token_id if pad is None else pad,
            max_length=args.max_length,
        )
        if not isinstance(train_dataset, Dataset):
            train_dataset = Dataset.from_list(list(train_dataset))
        if eval_dataset is not None and not isinstance(eval_dataset, Dataset):
            eval_dataset = Dataset.from_list(list(eval_dataset))
        super().__init__(
            model=model,
            ref_model=FreeReference(model, reference_weights) if ref_model is None else ref_model,
            args=args,
            data_collator=collator,
            train_dataset=train_dataset,
            eval_dataset=eval_dataset,
            processing_class=tokenizer,
        )
        if ref_model is None:  # a fresh one: TRL patched and prepared the one it was given
            self.ref_model = FreeReference(model, reference_weights)
        if vars(model).pop("forward", None) is not None:
            # TRL put its fused LM head on a wrapper it does not know (a CalyrexModel), where
            # it would call the host's backbone past the wrapper's forward (no span); it goes
            # on the HF model, under the wrapper's span logic (TRL does the same for PEFT)
            extra = ("log_sum_sq_probs",) if args.use_weighting else ()
            add_fused_lm_head(model.get_base_model(), outputs=FUSED_OUTPUTS + extra)

    def compute_loss(self, *args: Any, **kwargs: Any) -> Any:
        with completion_positions_only():  # training and evaluation both come through here
            return super().compute_loss(*args, **kwargs)

    def _prepare_dataset(self, dataset: Any, *args: Any, **kwargs: Any) -> Any:
        return dataset  # already encoded by encode_pairs: calyrex's tokens and span

    def _send_telemetry(self) -> None:
        return None  # a calyrex run does not report to the hub

    def create_model_card(self, *args: Any, **kwargs: Any) -> None:
        return None  # the adapter carries adapter_config.json; no README in the run directory


def last_rewards(log_history: Sequence[dict[str, Any]]) -> dict[str, float]:
    """The implicit-reward metrics of the last log that has them (empty when none)."""
    for record in reversed(log_history):
        if "rewards/margins" in record:
            return {k: record[k] for k in REWARDS if k in record}
    return {}


def eval_rewards(log_history: Sequence[dict[str, Any]]) -> list[dict[str, float]]:
    """The validation reward metrics of every evaluation, in order, each with its ``step``."""
    return [
        {"step": r["step"]} | {k: r[f"eval_{k}"] for k in REWARDS if f"eval_{k}" in r}
        for r in log_history
        if "eval_rewards/margins" in r
    ]
