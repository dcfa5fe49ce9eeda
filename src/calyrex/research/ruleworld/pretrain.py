"""Pretrain RuleWorld's backbone: a 12-layer Qwen2 trained from scratch on the world's general data.

The data (``corpus.general_corpus``) are tasks under ordinary, non-binding system prompts, with
format requests only from the user, so the backbone solves tasks, follows a rule stated in the
system prompt only as far as it generalises from user requests, and yields to a later
instruction. The loss is next-token cross-entropy on every token, as for a base LM, plus the
same on assistant tokens alone (``loss_on="both"``), which weights the answers up: with loss on
all tokens only, the model did not learn to copy words in the CPU budget. Everything is
drawn from ``seed``; the model and tokenizer are saved with ``save_pretrained`` next to a
``ruleworld.json`` recording the seed, the configuration and the exact command. The weights
are stored in bf16 (the packaged copy is 8 MB); RuleWorld loads them in fp32 (``train.DTYPE``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ...core.adapter_io import file_sha256
from ...span.chat import encode_one, pad_batch
from .corpus import general_corpus
from .tokenizer import build_tokenizer
from .world import World

ASSET_DIR = Path(__file__).resolve().parents[2] / "assets" / "ruleworld"


def asset_dir() -> Path:
    """The packaged backbone's directory, checked (the ``ruleworld`` entry of the model
    resolver, an entry point of the group ``calyrex_models`` in pyproject.toml)."""
    return check_backbone(ASSET_DIR)


@dataclass
class PretrainConfig:
    seed: int = 0
    conversations: int = 60000
    steps: int = 1600
    batch_tokens: int = 2048  # tokens per optimiser step (padded), rows of similar length
    max_length: int = 256
    lr: float = 3e-3
    warmup: int = 50
    weight_decay: float = 0.01
    vocab_size: int = 2048
    hidden_size: int = 160
    intermediate_size: int = 448
    num_layers: int = 12
    num_heads: int = 4
    num_kv_heads: int = 2
    max_positions: int = 8192
    threads: int = 2
    loss_on: str = "both"  # "all" tokens (a base LM), "assistant" tokens, or the sum of both


# a CI-sized backbone (seconds): the same depth, narrow, a few steps
QUICK = dict(conversations=600, steps=15, batch_tokens=1024, hidden_size=64, intermediate_size=128)


def model_config(cfg: PretrainConfig, tokenizer: Any) -> Any:
    from transformers import Qwen2Config

    return Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_kv_heads,
        max_position_embeddings=cfg.max_positions,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )


def batches(rows: list[dict], batch_tokens: int, rng: random.Random) -> list[list[dict]]:
    """Rows grouped by length into batches of about ``batch_tokens`` padded tokens, shuffled."""
    rows = sorted(rows, key=lambda r: len(r["input_ids"]))
    out, current = [], []
    for row in rows:
        if current and len(row["input_ids"]) * (len(current) + 1) > batch_tokens:
            out.append(current)
            current = []
        current.append(row)
    out.append(current)
    rng.shuffle(out)
    return out


def _lr(step: int, cfg: PretrainConfig) -> float:
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    progress = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def _loss(model: Any, batch: dict, loss_on: str) -> torch.Tensor:
    """Next-token cross-entropy on every token, on assistant tokens, or the sum ("both")."""
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    logits = logits[:, :-1].flatten(0, 1)  # (B*(T-1), V)
    every = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    targets = {"all": [every], "assistant": [batch["labels"]], "both": [every, batch["labels"]]}
    return sum(
        torch.nn.functional.cross_entropy(logits, t[:, 1:].flatten(), ignore_index=-100)
        for t in targets[loss_on]
    )


def train_backbone(cfg: PretrainConfig, progress: bool = True) -> tuple[Any, Any, dict]:
    """(model, tokenizer, stats) trained from scratch on the general data of ``World(cfg.seed)``."""
    from tqdm.auto import tqdm
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    world = World(cfg.seed)
    tok = build_tokenizer(world, cfg.vocab_size)
    rows = [encode_one(tok, c) for c in general_corpus(world, cfg.conversations)]
    rows = [r for r in rows if len(r["input_ids"]) <= cfg.max_length]
    model = AutoModelForCausalLM.from_config(model_config(cfg, tok), attn_implementation="sdpa")
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    other = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": other, "weight_decay": 0}],
        lr=cfg.lr,
        betas=(0.9, 0.95),
    )
    rng, plan, losses, tokens, start = random.Random(cfg.seed), [], [], 0, time.time()
    model.train()
    bar = tqdm(range(cfg.steps), desc="pretrain", disable=not progress)
    for step in bar:
        if not plan:
            plan = batches(rows, cfg.batch_tokens, rng)
        batch = dict(pad_batch(tok, plan.pop(), with_labels=True))  # system_mask unused
        for group in opt.param_groups:
            group["lr"] = _lr(step, cfg)
        loss = _loss(model, batch, cfg.loss_on)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
        tokens += int(batch["attention_mask"].sum())
        bar.set_postfix(loss=f"{sum(losses[-20:]) / len(losses[-20:]):.3f}")
    stats = {
        "final_loss": sum(losses[-50:]) / len(losses[-50:]),
        "tokens": tokens,
        "train_seconds": round(time.time() - start, 1),
        "parameters": sum(p.numel() for p in model.parameters()),
    }
    return model.eval(), tok, stats


def save_backbone(
    model: Any, tok: Any, cfg: PretrainConfig, stats: dict, out: Path, command: str
) -> None:
    import transformers

    out.mkdir(parents=True, exist_ok=True)
    # weights stored in bf16 (half the bytes; the package ships them), loaded back as fp32
    state = {k: v.to(torch.bfloat16) for k, v in model.state_dict().items()}
    if model.config.tie_word_embeddings:
        state.pop("lm_head.weight")
    model.save_pretrained(out, state_dict=state)
    tok.save_pretrained(out)
    record = {
        "seed": cfg.seed,
        "command": command,
        "stored_dtype": "bfloat16",
        "weights_sha256": file_sha256(out / "model.safetensors"),
        "config": dataclasses.asdict(cfg),
        "stats": stats,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
    }
    (out / "ruleworld.json").write_text(json.dumps(record, indent=2) + "\n")


def pretrain(
    seed: int = 0,
    out: str | None = None,
    quick: bool = False,
    steps: int | None = None,
    overrides: dict | None = None,
) -> dict:
    """Pretrain the RuleWorld backbone and save it (default: the packaged asset directory).

    ``overrides`` sets other :class:`PretrainConfig` fields (recorded in ``ruleworld.json``).
    """
    fields = {"seed": seed, **(QUICK if quick else {}), **(overrides or {})}
    if steps is not None:
        fields["steps"] = steps
    cfg = PretrainConfig(**fields)
    command = ["calyrex", "ruleworld-pretrain", "--seed", str(seed)] + (
        ["--quick"] if quick else []
    )
    command += (["--steps", str(steps)] if steps is not None else []) + (
        ["--out", out] if out else []
    )
    model, tok, stats = train_backbone(cfg)
    save_backbone(model, tok, cfg, stats, Path(out) if out else ASSET_DIR, shlex.join(command))
    print(json.dumps(stats))
    return stats


def check_backbone(path: Path = ASSET_DIR) -> Path:
    """``path``, once it holds a saved backbone whose weights match the sha256 that its
    ``ruleworld.json`` records (when it has one); load it with ``calyrex.adapters.loading.load_model``."""
    path = Path(path)
    if not (path / "config.json").exists():
        raise FileNotFoundError(
            f"no RuleWorld backbone at {path}; build it with `calyrex ruleworld-pretrain`"
        )
    record = path / "ruleworld.json"
    expected = json.loads(record.read_text()).get("weights_sha256") if record.exists() else None
    if expected and file_sha256(path / "model.safetensors") != expected:
        raise ValueError(
            f"{path}/model.safetensors does not match the sha256 in ruleworld.json: the file is "
            "corrupted or was replaced; rebuild it with `calyrex ruleworld-pretrain`"
        )
    return path
