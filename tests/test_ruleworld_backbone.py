"""RuleWorld's tokenizer, backbone (shipped and rebuilt) and evaluation on real models."""

import json
import math

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

import calyrex
from calyrex.backbones.tiny import tiny_model
from calyrex.research.ruleworld import World
from calyrex.research.ruleworld.evaluate import EvalConfig, evaluate, generate
from calyrex.research.ruleworld.pretrain import (
    ASSET_DIR,
    PretrainConfig,
    check_backbone,
    save_backbone,
    train_backbone,
)
from calyrex.research.ruleworld.tasks import list_task
from calyrex.research.ruleworld.tokenizer import build_tokenizer
from calyrex.research.ruleworld.world import reply
from calyrex.span.chat import encode_one

shipped = pytest.mark.skipif(not (ASSET_DIR / "config.json").exists(), reason="no shipped backbone")


@pytest.fixture(scope="module")
def world():
    return World(0)


def test_tokenizer_is_chatml_and_deterministic(world):
    tok = build_tokenizer(world, n=300)
    assert tok.get_vocab() == build_tokenizer(World(0), n=300).get_vocab()
    assert calyrex.span_markers(tok) is not None
    conv = [
        {"role": "system", "content": "Always answer in capital letters."},
        {"role": "user", "content": "hi"},
    ]
    batch = calyrex.encode_chat(tok, [conv], add_generation_prompt=True)
    assert tok.decode(batch["input_ids"][0][batch["system_mask"][0].bool()]) == conv[0]["content"]


def test_answer_words_are_the_tokens_the_prompt_showed(world):
    tok = build_tokenizer(world, n=300)
    task = list_task(world.rng("test"), "copy", ["castle", "forest", "river"], "places")
    row = encode_one(
        tok,
        [{"role": "user", "content": task.prompt}]
        + [{"role": "assistant", "content": reply(task.answer)}],
    )
    answer = [i for i in row["labels"] if i != -100][:-1]  # without the end-of-turn token
    prompt = row["input_ids"][: row["labels"].index(answer[0])]
    assert any(prompt[i : i + len(answer)] == answer for i in range(len(prompt)))


@shipped
def test_shipped_backbone_loads_like_a_hub_model():
    model = AutoModelForCausalLM.from_pretrained(ASSET_DIR)
    tok = AutoTokenizer.from_pretrained(ASSET_DIR)
    assert model.config.model_type == "qwen2" and model.config.num_hidden_layers >= 12
    assert 3e6 <= sum(p.numel() for p in model.parameters()) <= 13e6
    assert calyrex.span_markers(tok) is not None
    record = json.loads((ASSET_DIR / "ruleworld.json").read_text())
    assert record["command"].startswith("calyrex ruleworld-pretrain --seed") and "seed" in record
    conv = [{"role": "user", "content": "Count the words: cat dog fox"}]
    assert generate(model.eval(), tok, [conv], max_new_tokens=4) == ["3"]


def test_pretrain_saves_a_loadable_backbone(tmp_path):
    cfg = PretrainConfig(
        conversations=300,
        steps=3,
        batch_tokens=512,
        hidden_size=32,
        intermediate_size=64,
        num_layers=2,
        vocab_size=512,
    )
    model, tok, stats = train_backbone(cfg, progress=False)
    assert math.isfinite(stats["final_loss"]) and stats["tokens"] > 0
    save_backbone(model, tok, cfg, stats, tmp_path, "calyrex ruleworld-pretrain --seed 0")
    again, tok2 = calyrex.load_model(str(tmp_path), dtype="float32", device="cpu")
    assert again.dtype == torch.float32
    ids = torch.tensor([[1, 5, 7]])
    stored = model.to(torch.bfloat16).float()  # the weights are stored in bf16
    assert torch.allclose(stored(ids).logits, again(ids).logits, atol=1e-6)
    assert tok2.chat_template == tok.chat_template
    weights = tmp_path / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-3] ^= 0xFF  # one flipped bit pattern in the last tensor
    weights.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="does not match the sha256 in ruleworld.json"):
        check_backbone(tmp_path)


def test_evaluate_runs_on_plain_and_wrapped_models(world):
    tok = build_tokenizer(world, vocab_size=512, n=300)
    cfg = EvalConfig(
        n=2, shots=(1, 2), context_tokens=(0, 64), turns=2, max_new_tokens=4, progress=False
    )
    plain = tiny_model("qwen2", vocab_size=len(tok), num_hidden_layers=8)
    wrapped = calyrex.wrap(
        tiny_model("qwen2", vocab_size=len(tok), num_hidden_layers=8), tokenizer=tok
    )
    a, b = evaluate(plain, tok, world, cfg), evaluate(wrapped, tok, world, cfg)
    assert a == b  # a freshly wrapped model is the base model exactly
    for key in (
        "rule_adherence_heldout",
        "injection_success",
        "session_stability",
        "task_accuracy",
        "extraction_success",
        "hijack_success",
        "longctx_adherence",
    ):
        assert 0.0 <= a[key]["rate"] <= 1.0 and a[key]["n"] > 0
    assert set(a["manyshot_success_by_shots"]) == {"1", "2"}
    assert set(a["multiturn_adherence_by_turn"]) == {"1", "2"}
    assert set(a["longctx_adherence_by_tokens"]) == {"0", "64"}


@pytest.mark.parametrize("budget", [None, 40, 400])
def test_batches_hold_every_row_once_within_their_budget(budget):
    from calyrex.research.ruleworld.evaluate import batches

    lengths = [7, 300, 12, 12, 90, 1, 45, 45, 45, 500, 33, 2]
    out = batches(lengths, batch_size=3, batch_tokens=budget)
    assert sorted(i for b in out for i in b) == list(range(len(lengths)))
    flat = [lengths[i] for b in out for i in b]
    assert flat == sorted(lengths)  # shortest first, similar lengths together
    for b in out:
        assert len(b) <= 3
        if budget is not None and len(b) > 1:
            assert len(b) * max(lengths[i] for i in b) <= budget
    if budget == 40:  # rows longer than the budget run alone
        assert [b for b in out if max(lengths[i] for i in b) > 40] == [[6], [7], [8], [4], [1], [9]]


@shipped
def test_generate_by_token_budget_gives_the_same_replies(world):
    """``batch_tokens`` only regroups rows: the replies are those of fixed-size batches."""
    from calyrex.research.ruleworld import attacks

    model, tok = calyrex.load_model("ruleworld", dtype="float32", device="cpu")
    short = [e.messages for e in attacks.rule_examples(world, 6, [("brackets",)], "t-short")]
    long = [e.messages for e in attacks.longctx_examples(world, 3, 120)]
    convs = short + long
    fixed = generate(model, tok, convs, batch_size=4, max_new_tokens=8)
    budget = generate(model, tok, convs, batch_size=4, max_new_tokens=8, batch_tokens=200)
    assert budget == fixed
