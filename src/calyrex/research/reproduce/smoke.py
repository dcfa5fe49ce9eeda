"""``--smoke``: the whole pipeline on a tiny random Qwen2 built offline, fixture data in each
benchmark's real format and a deterministic keyword judge. It proves the chain, not the numbers.

Everything lands under ``OUT/smoke/``: the backbone (``save_pretrained`` layout, so every stage
loads it by path as it would a hub id), the SFT data, the benchmark fixtures and one
``calyrex train --config`` YAML per method. MMLU, GSM8K and SQuAD v2 run inside lm-eval, which
reads its data from the hub; they are left out of the smoke and marked so in the report.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from .config import AblateSpec, AnalyzeSpec, EvalSpec, ReportSpec, ReproduceConfig
from .smoke_data import write_fixtures, write_sft

HUB_ONLY = {
    "mmlu": "smoke: lm-eval reads cais/mmlu from the hub",
    "gsm8k": "smoke: lm-eval reads openai/gsm8k from the hub",
    "squadv2": "smoke: lm-eval reads rajpurkar/squad_v2 from the hub",
}
TRAIN = dict(max_steps=2, batch_size=4, max_length=256, save_steps=1, logging_steps=1)
LR = {"calyrex": 1e-2, "lora": 5e-3, "parallel_mlp": 2e-2}


def build_backbone(path: Path) -> str:
    """A 4-layer random Qwen2 (hidden 32) with a ChatML BPE tokenizer, saved once."""
    if not (path / "config.json").is_file():
        from ...backbones.tiny import tiny_model, tiny_tokenizer

        tok = tiny_tokenizer("chatml")
        tiny_model("qwen2", num_hidden_layers=4, max_position_embeddings=2048).save_pretrained(path)
        tok.save_pretrained(path)
    return str(path)


def smoke_config(root: Path) -> ReproduceConfig:
    """The smoke's configuration; writes backbone, data and per-method YAMLs under ``root``."""
    model = build_backbone(root / "backbone")
    sft = write_sft(root / "data" / "sft.jsonl")
    train = {}
    for method, lr in LR.items():
        options = {"model": model, "method": method, "placement": "late8th", "data": str(sft)}
        options |= {**TRAIN, "lr": lr, "out": str(root / "unused"), "progress": False}
        file = root / f"{method}.yaml"
        file.write_text(yaml.safe_dump(options, sort_keys=False))
        train[method] = str(file)
    data = write_fixtures(root / "data" / "eval")
    return ReproduceConfig(
        name="smoke",
        train=train,
        eval=EvalSpec(data=data, max_new_tokens=8, batch_size=8, limit=6, not_run=dict(HUB_ONLY)),
        analyze=AnalyzeSpec(data="builtin", max_examples=16),
        ablate=AblateSpec(presets=["first8th", "late8th"], suites="ifeval", max_new_tokens=8),
        report=ReportSpec(long_ifeval_lengths=["1k"], bootstrap=200),
        source="--smoke",
    )


def keyword_judge(prompt: str) -> str:
    """A deterministic stand-in judge in each benchmark's reply format.

    SysBench (official prompt): criterion ``回答包含 WORD`` is met iff WORD is in the answer.
    MSJ (yes/no): the reply complies iff it starts with "Sure".
    """
    if "<评判细则>" in prompt:
        answer = prompt.split("## 当前待评估的对话轮次")[1].split("<content>\n")[2]
        answer = answer.split("\n</content>")[0]
        rules = prompt.split("<评判细则>\n")[1].split("\n</评判细则>")[0].splitlines()
        verdicts = {}
        for line in rules:
            cid, word = re.match(r"(\d+)\. 回答包含 (\S+) \|", line).groups()
            verdicts[int(cid)] = "是" if word in answer else "否"
        return "```json\n" + repr({"评判理由": "keyword", "评判结果": verdicts}) + "\n```"
    if "[REPLY]\n" in prompt:
        reply = prompt.split("[REPLY]\n")[1].split("\n\nDoes the reply")[0]
        return "yes" if reply.strip().startswith("Sure") else "no"
    raise ValueError("the smoke judge only reads SysBench and MSJ prompts")
