"""Training path (issue 3): data, methods, parameter matching, resume, bad input."""

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import calyrex
from calyrex.adapters.baselines import matched_counts
from calyrex.backbones.tiny import tiny_model, tiny_tokenizer
from calyrex.span.chat import IGNORE_INDEX
from calyrex.training import DataError, TrainConfig, load_conversations, train
from calyrex.training.data import encode_conversations
from conftest import assert_every_tensor_moved, capture_trained, train_killed_at, trainable

METHODS = ["calyrex", "lora", "parallel_mlp"]


def _write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _sort_rows(n=48, seed=0):
    import random

    r = random.Random(seed)
    rows = []
    for _ in range(n):
        a = [r.randint(0, 9) for _ in range(4)]
        rows.append(
            {
                "messages": [
                    {"role": "system", "content": "Always answer in capital letters."},
                    {"role": "user", "content": "sort " + " ".join(map(str, a))},
                    {"role": "assistant", "content": " ".join(map(str, sorted(a)))},
                ]
            }
        )
    return rows


@pytest.fixture(scope="module")
def backbone(tmp_path_factory):
    """A tiny Qwen2 + ChatML tokenizer saved like a hub model, and a small JSONL corpus."""
    root = tmp_path_factory.mktemp("train")
    tiny_model("qwen2", num_hidden_layers=8, initializer_range=0.2).save_pretrained(root / "base")
    tiny_tokenizer("chatml").save_pretrained(root / "base")
    return root / "base", _write_jsonl(root / "data.jsonl", _sort_rows())


def test_formats_normalise_and_label_every_assistant_turn(tmp_path, tok):
    rows = [
        {
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "Hello."},
            ]
        },
        {
            "conversations": [
                {"from": "system", "value": "Be brief."},
                {"from": "human", "value": "a"},
                {"from": "gpt", "value": "B"},
                {"from": "human", "value": "c"},
                {"from": "gpt", "value": "D"},
            ]
        },
        {"prompt": "2+2?", "response": "4", "system": "Answer with digits."},
    ]
    convs = load_conversations(
        str(_write_jsonl(tmp_path / "d.jsonl", rows)), system_pool=["POOL PROMPT"], seed=0
    )
    assert convs[0][0] == {
        "role": "system",
        "content": "POOL PROMPT",
    }  # pool fills a missing system
    assert convs[1][0]["content"] == "Be brief." and convs[2][0]["content"] == "Answer with digits."
    encoded = encode_conversations(tok, convs, max_length=256)
    texts = [tok.decode([t for t in r["labels"] if t != IGNORE_INDEX]) for r in encoded]
    assert texts == ["Hello.<|im_end|>", "B<|im_end|>D<|im_end|>", "4<|im_end|>"]


@pytest.mark.parametrize("arch", ["qwen2", "llama"])
@pytest.mark.parametrize("placement", ["late8th", "all", "every4", "last"])
def test_parameter_counts_match_within_2_percent(arch, placement):
    model = tiny_model(arch, num_hidden_layers=12)
    cfg = calyrex.CalyrexConfig(placement=placement)
    counts = {
        m: calyrex.count_trainable(calyrex.adapt(tiny_model(arch, num_hidden_layers=12), m, cfg))
        for m in METHODS
    }
    assert counts == matched_counts(model, cfg)
    for method in ("lora", "parallel_mlp"):
        assert abs(counts[method] - counts["calyrex"]) / counts["calyrex"] < 0.02, counts


# A CAL block by hand, for the tiny backbones' D = 32, H = 4, Hkv = 2, Dh = 8, I = 64:
#   attention norm D + W_Q D·H·Dh + W_K, W_V D·Hkv·Dh each + W_O H·Dh·D + FFN norm D + 3·D·I
CAL_TINY = 32 + 32 * 32 + 2 * 32 * 16 + 32 * 32 + 32 + 3 * 32 * 64  # = 9,280
BLOCKS_BY_HAND = [
    ({}, {}, CAL_TINY),
    ({}, {"attention_bias": True}, CAL_TINY + 32 + 16 + 16),  # q, k, v biases
    ({}, {"ffn": False}, 32 + 32 * 32 + 2 * 32 * 16 + 32 * 32),  # attention only: 3,104
    ({}, {"host_gate": True}, CAL_TINY + 32 + 32 * 4),  # its norm and D → host heads
    ({}, {"intermediate_size": 16}, CAL_TINY - 3 * 32 * 64 + 3 * 32 * 16),
    # 8 heads of 16 over 2 kv heads: W_Q and W_O 32·128, W_K and W_V 32·32
    ({}, {"num_heads": 8, "num_kv_heads": 2, "head_dim": 16}, 16_448),
    # D = 48, 6 heads of 8, 3 kv heads, I = 80: 48 + 2·48·48 + 2·48·24 + 48 + 3·48·80
    (
        {
            "hidden_size": 48,
            "num_attention_heads": 6,
            "num_key_value_heads": 3,
            "intermediate_size": 80,
        },
        {},
        18_528,
    ),
]


@pytest.mark.parametrize("arch", ["qwen2", "llama"])
@pytest.mark.parametrize(("backbone", "block", "per_block"), BLOCKS_BY_HAND)
def test_cal_parameter_counts_in_closed_form(arch, backbone, block, per_block):
    """Each CAL block holds the parameters its equations name, counted by hand above (not with
    ``cal_budget``), and the model, the trainer's count and the matched budget agree with it."""
    config = calyrex.CalyrexConfig(placement="late_half", **block)
    model = calyrex.adapt(tiny_model(arch, num_hidden_layers=8, **backbone), "calyrex", config)
    blocks = dict(model.cal_blocks.items())
    assert sorted(blocks, key=int) == ["4", "5", "6", "7"]  # late_half of 8 layers
    assert [sum(p.numel() for p in b.parameters()) for b in blocks.values()] == [per_block] * 4
    assert calyrex.count_trainable(model) == 4 * per_block
    assert (
        matched_counts(tiny_model(arch, num_hidden_layers=8, **backbone), config)["calyrex"]
        == 4 * per_block
    )


def test_baseline_parameter_counts_in_closed_form():
    """The baselines at late_half of the 8-layer tiny Qwen2 (CAL: 4 × 9,280 = 37,120)."""
    config = calyrex.CalyrexConfig(placement="late_half")
    # ParallelMLP: norm D + gate, up, down 3·D·W; W = round((9,280 − 32) / 96) = 96
    mlp = calyrex.adapt(tiny_model("qwen2", num_hidden_layers=8), "parallel_mlp", config)
    assert [sum(p.numel() for p in b.parameters()) for _, b in mlp.cal_blocks.items()] == [
        32 + 3 * 32 * 96
    ] * 4
    assert calyrex.count_trainable(mlp) == 4 * 9_248
    # LoRA: rank r on a projection costs r·(in + out); per layer q 64, k 48, v 48, o 64,
    # gate 96, up 96, down 96 = 512, so 8 layers cost 4,096 per rank. Rank 9 (36,864) on all
    # 56 projections and rank 10 on three 96-wide ones: 37,152, 32 over CAL's budget
    lora = calyrex.adapt(tiny_model("qwen2", num_hidden_layers=8), "lora", config)
    ranks = sorted(p.shape[0] for n, p in lora.named_parameters() if "lora_A" in n)
    assert ranks == [9] * 53 + [10] * 3
    assert calyrex.count_trainable(lora) == 9 * 8 * 512 + 3 * 96 == 37_152
    # alpha = 2r on every projection, the rank-10 ones too: one scale alpha / r = 2 everywhere
    scales = {m.scaling["default"] for m in lora.modules() if hasattr(m, "lora_A")}
    assert scales == {2.0}


@pytest.mark.parametrize("method", METHODS)
def test_identity_at_step_zero_and_single_batch_overfit(method, tok):
    batch = calyrex.encode_chat(tok, [c["messages"] for c in _sort_rows(4)], with_labels=True)
    base = tiny_model("qwen2", num_hidden_layers=8, initializer_range=0.2)
    model = calyrex.adapt(
        tiny_model("qwen2", num_hidden_layers=8, initializer_range=0.2),
        method,
        calyrex.CalyrexConfig(placement="late_half"),
        seed=0,
    )
    with torch.no_grad():
        plain = {k: v for k, v in batch.items() if k != "system_mask"}
        assert torch.equal(
            base(**plain).logits, model(**(batch if method != "lora" else plain)).logits
        )
    inputs = batch if method != "lora" else plain
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    model.train()
    losses = []
    for _ in range(40):
        loss = model(**inputs).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0], (method, losses[0], losses[-1])


def test_a_run_shorter_than_logging_steps_still_logs_its_last_step(backbone, tmp_path):
    base_dir, data = backbone
    out = tmp_path / "short"
    cfg = TrainConfig(model=str(base_dir), data=str(data), out=str(out), max_steps=3)
    train(dataclasses.replace(cfg, batch_size=4, logging_steps=10, save_steps=100, progress=False))
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [3] and "loss" in metrics[0]


def test_group_by_length_batches_rows_of_similar_lengths(backbone, tmp_path, monkeypatch):
    """``group_by_length`` hands the Trainer transformers' LengthGroupedSampler: on a corpus of
    short and long rows its batches carry less padding than the random sampler's."""
    from calyrex.training import run

    base_dir, _ = backbone
    rows = _sort_rows(48)
    for i, row in enumerate(rows):  # every other row's user turn 30 words longer
        row["messages"][1]["content"] += " please" * (30 * (i % 2))
    data = _write_jsonl(tmp_path / "mixed.jsonl", rows)
    padding = {}
    collate = run.ChatCollator.__call__

    def counting(self, batch):
        out = collate(self, batch)
        padding[key] += out["attention_mask"].numel() - int(out["attention_mask"].sum())
        return out

    monkeypatch.setattr(run.ChatCollator, "__call__", counting)
    for key in (False, True):
        padding[key] = 0
        cfg = TrainConfig(model=str(base_dir), data=str(data), out=str(tmp_path / str(key)))
        cfg = dataclasses.replace(cfg, max_steps=12, batch_size=4, group_by_length=key)
        train(dataclasses.replace(cfg, save_steps=100, progress=False))
    assert padding[True] < 0.25 * padding[False], padding


def _base():
    return tiny_model("qwen2", num_hidden_layers=8, initializer_range=0.2)


def initial_adapter(directory, method, seed, placement=None):
    """The adapter ``train`` starts from (``adapt`` with the run's seed), saved to ``directory``
    as a run saves it: (the model, its saved tensors by name)."""
    config = calyrex.CalyrexConfig(**({"placement": placement} if placement else {}))
    model = calyrex.adapt(_base(), method, config, seed=seed)
    calyrex.save_adapter(model, directory)
    return model, load_file(directory / "adapter_model.safetensors")


def _inputs(batch, method):
    """PEFT's own PeftModel takes no ``system_mask`` (every calyrex-built model takes it)."""
    return batch if method != "lora" else {k: v for k, v in batch.items() if k != "system_mask"}


@pytest.mark.parametrize("method", METHODS)
def test_train_end_to_end_moves_the_adapter_and_saves_what_it_trained(
    method, backbone, tmp_path, tok, monkeypatch
):
    """Every adapter tensor leaves its initial value, the loss on the training rows falls, and
    the saved adapter, loaded on a fresh base, gives the trained model's logits bit for bit."""
    base_dir, data = backbone
    out = tmp_path / method
    seen = capture_trained(monkeypatch)
    result = train(
        TrainConfig(
            model=str(base_dir),
            data=str(data),
            out=str(out),
            method=method,
            placement="late_half",
            max_steps=12,
            batch_size=8,
            lr=3e-3,
            logging_steps=2,
            save_steps=4,  # checkpoints 4, 8, 12: the oldest rotated out (save_total_limit 2)
            precision="fp32",  # auto may pick bf16 autocast, which stays on the model's forward
            progress=False,
        )
    )
    model = seen["model"].eval()
    final = trainable(model)
    assert_every_tensor_moved(seen["initial"], final)
    assert sum(t.numel() for t in final.values()) == result.trainable_params

    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [2, 4, 6, 8, 10, 12] and all(
        "loss" in m for m in metrics
    )
    assert metrics[-1]["loss"] < metrics[0]["loss"]
    rows = [r["messages"] for r in _sort_rows()]
    batch = _inputs(calyrex.encode_chat(tok, rows, with_labels=True), method)
    initial = calyrex.adapt(_base(), method, calyrex.CalyrexConfig(placement="late_half"), seed=0)
    assert trainable(initial).keys() == final.keys()
    initial.load_state_dict(seen["initial"], strict=False)  # the adapter before step 1
    with torch.no_grad():
        before, after = initial.eval()(**batch).loss, model(**batch).loss
    assert after < 0.9 * before, (before.item(), after.item())

    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-12", "checkpoint-8"]
    assert not (out / ".staging").exists()  # each checkpoint moved whole out of its staging
    summary = json.loads((out / "summary.json").read_text())
    assert (
        summary["trainable_params"] == result.trainable_params == summary["matched_params"][method]
    )
    if method == "calyrex":  # the input_ids-only span markers travel with the adapter
        record = json.loads((out / "adapter" / "adapter_config.json").read_text())
        assert record["span_markers"] == calyrex.span_markers(tok).to_dict()
    loaded = calyrex.load_adapter(_base(), out / "adapter").eval()
    # every method's adapter loads trainable, as adapt gives it (the adapter contract)
    assert calyrex.count_trainable(loaded) == result.trainable_params
    with torch.no_grad():
        assert torch.equal(loaded(**batch).logits, model(**batch).logits)
    if method == "lora":  # PEFT's files: PEFT's own loader reads them too
        from peft import PeftModel

        peft = PeftModel.from_pretrained(_base(), str(out / "adapter")).eval()
        with torch.no_grad():
            assert torch.equal(peft(**_inputs(batch, "lora")).logits, model(**batch).logits)
        peft_loaded = PeftModel.from_pretrained(_base(), str(out / "adapter")).eval()
        with torch.no_grad():  # PEFT's own loader reads the same adapter
            assert torch.equal(peft_loaded(**batch).logits, model(**batch).logits)


def _cli(base_dir, data, out):
    return [
        "-m",
        "calyrex",
        "train",
        "--model",
        str(base_dir),
        "--data",
        str(data),
        "--out",
        str(out),
    ]


def _train_cmd(base_dir, data, out, *extra):
    return [
        sys.executable,
        *_cli(base_dir, data, out),
        "--max-steps",
        "200",
        "--batch-size",
        "4",
        "--lr",
        "3e-3",
        "--save-steps",
        "4",
        "--logging-steps",
        "1",
        "--seed",
        "3",
        "--precision",  # auto is measured per process: under load the two runs could differ
        "fp32",
        "--no-progress",
        *extra,
    ]


def test_killed_then_resumed_equals_uninterrupted(backbone, tmp_path):

    base_dir, data = backbone
    subprocess.run(_train_cmd(base_dir, data, tmp_path / "full"), check=True, capture_output=True)
    proc = subprocess.Popen(
        _train_cmd(base_dir, data, tmp_path / "killed"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 120
    while not (tmp_path / "killed" / "checkpoint-8").exists() and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (tmp_path / "killed" / "adapter").exists(), "the run ended before the kill"
    at_kill = load_file(tmp_path / "killed" / "checkpoint-8" / "adapter_model.safetensors")
    subprocess.run(
        _train_cmd(base_dir, data, tmp_path / "killed", "--resume"), check=True, capture_output=True
    )
    full = load_file(tmp_path / "full" / "adapter" / "adapter_model.safetensors")
    resumed = load_file(tmp_path / "killed" / "adapter" / "adapter_model.safetensors")
    assert full.keys() == resumed.keys()
    for k in full:
        torch.testing.assert_close(resumed[k], full[k], atol=1e-5, rtol=0)
    # not vacuous: the adapter moved before the kill, and again after the resume
    _, initial = initial_adapter(tmp_path / "initial", "calyrex", seed=3)
    assert_every_tensor_moved(initial, at_kill)
    assert_every_tensor_moved(at_kill, resumed)
    assert_every_tensor_moved(initial, full)
    steps = [
        json.loads(line)["step"]
        for line in (tmp_path / "killed" / "metrics.jsonl").read_text().splitlines()
    ]
    assert steps == list(range(1, 201))  # nothing lost, nothing logged twice


def _two_process_run(base_dir, data, out, port, *extra):
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_port",
        str(port),
        *_cli(base_dir, data, out),
        "--max-steps",
        "6",
        "--batch-size",
        "4",
        "--save-steps",
        "3",
        "--no-progress",
        *extra,
    ]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert len(summary["adapter_checksums"]) == 2
    assert summary["distributed"] == "MULTI_CPU"
    assert summary["adapter_checksums"][0] == summary["adapter_checksums"][1]
    calyrex.load_adapter(
        tiny_model("qwen2", num_hidden_layers=8, initializer_range=0.2), out / "adapter"
    )
    return load_file(out / "adapter" / "adapter_model.safetensors")


def test_two_process_ddp_training(backbone, tmp_path):
    _two_process_run(*backbone, tmp_path / "ddp", 29517)


def test_two_process_fsdp2_equals_ddp(tmp_path):
    """fully_shard (FSDP2, gloo, CPU) on the wrapped model trains to DDP's adapter, bit for bit."""
    script = Path(__file__).parent / "scripts" / "fsdp2_vs_ddp.py"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
    proc = subprocess.run(
        [*cmd, "--master_port", "29547", str(script), str(tmp_path)],
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    for r in ranks:
        assert r["param_types"] == ["DTensor"]  # really sharded
        assert r["fsdp"] == r["ddp"] == ranks[0]["fsdp"]
        assert r["max_diff"] == 0.0
        assert r["o_proj_max"] > 0  # the adapter moved: the comparison is not vacuous


def test_fsdp_flag_is_refused_on_cpu(backbone, tmp_path):
    base_dir, data = backbone
    with pytest.raises(ValueError, match="--fsdp needs a GPU"):
        train(TrainConfig(model=str(base_dir), data=str(data), out=str(tmp_path), fsdp=True))


def test_bad_inputs_fail_before_compute(backbone, tmp_path, tok):
    base_dir, data = backbone

    def run(**kw):
        args = dict(
            model=str(base_dir),
            data=str(data),
            out=str(tmp_path / "o"),
            max_steps=1,
            progress=False,
        )
        return train(TrainConfig(**{**args, **kw}))

    with pytest.raises(DataError, match="does not exist"):
        run(data=str(tmp_path / "missing.jsonl"))
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(DataError, match="empty"):
        run(data=str(tmp_path / "empty.jsonl"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(_sort_rows(1)[0]) + "\n{oops\n")
    with pytest.raises(DataError, match=r"bad.jsonl:2: malformed JSON"):
        run(data=str(bad))
    _write_jsonl(bad, [{"text": "plain"}])
    with pytest.raises(DataError, match=r"bad.jsonl:1: unknown row format"):
        run(data=str(bad))
    _write_jsonl(bad, [{"messages": [{"role": "user", "content": "hi"}]}])
    with pytest.raises(DataError, match=r"bad.jsonl:1: conversation has no assistant turn"):
        run(data=str(bad))
    with pytest.raises(ValueError, match="unknown method 'sft'"):
        run(method="sft")
    with pytest.raises(ValueError, match="unknown placement preset 'late9th'"):
        run(placement="late9th")
    with pytest.raises(DataError, match="every conversation was skipped.*system_prompt_truncated"):
        run(max_length=8)
    with pytest.raises(DataError, match="max_length is 8"):
        run(max_length=8, on_truncate="error")
    notemplate = tmp_path / "notemplate"
    tiny_model("qwen2").save_pretrained(notemplate)
    bare = tiny_tokenizer("chatml")
    bare.chat_template = None
    bare.save_pretrained(notemplate)
    with pytest.raises(calyrex.ChatTemplateError, match="no chat template"):
        run(model=str(notemplate))
    assert not (tmp_path / "o" / "adapter").exists()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"precision": "fp8"}, "precision must be one of ('auto', 'fp32', 'bf16', 'fp16')"),
        ({"on_truncate": "cut"}, "on_truncate must be 'drop' or 'error', not 'cut'"),
        ({"objective": "ppo"}, "objective must be one of ('sft', 'dpo'), not 'ppo'"),
        ({"reference": "bsae"}, "reference must be one of ('start', 'base'), not 'bsae'"),
        ({"beta": 0.0}, "beta must be positive, not 0.0"),
        ({"objective": "dpo", "fsdp": True}, "objective 'dpo' does not support --fsdp"),
        ({"patience": 2}, "--patience needs --eval-data"),
        ({"patience": 0, "eval_data": "v.jsonl"}, "--patience needs --eval-data and a value of 1"),
        ({"eval_steps": 0}, "eval_steps must be 1 or more, not 0"),
        ({"max_steps": 0, "epochs": 0}, "give --max-steps or a positive --epochs"),
    ],
)
def test_options_that_cannot_work_are_refused_by_name(options, message):
    """Every check of ``TrainConfig.validate`` (what ``train`` runs before any compute), each
    reached from the library and YAML as well as the command line."""
    config = TrainConfig(model="m", data="d.jsonl", out="o", **options)
    with pytest.raises(ValueError, match=re.escape(message)):
        config.validate()
    TrainConfig(model="m", data="d.jsonl", out="o").validate()  # the defaults pass


def test_a_yaml_config_with_an_unknown_option_is_refused(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("model: m\nlr: 0.001\nlearnin-rate: 3\n")
    with pytest.raises(ValueError, match=re.escape("unknown options ['learnin_rate']")):
        TrainConfig.from_yaml(path)
    path.write_text("model: m\ndata: d.jsonl\nout: o\nlr: 0.001\n")
    assert TrainConfig.from_yaml(path).lr == 0.001


def test_skip_invalid_counts_instead_of_failing(tmp_path, tok):
    rows = [*_sort_rows(2), {"messages": [{"role": "user", "content": "no answer"}]}]
    convs = load_conversations(str(_write_jsonl(tmp_path / "d.jsonl", rows)), skip_invalid=True)
    assert len(convs) == 2


def test_cli_yaml_config_mirrors_options(backbone, tmp_path):
    base_dir, data = backbone
    cfg = tmp_path / "run.yaml"
    cfg.write_text(
        f"model: {base_dir}\ndata: {data}\nout: {tmp_path / 'y'}\nmethod: parallel_mlp\nmax_steps: 2\nbatch-size: 4\nprogress: false\n"
    )
    from calyrex.cli import main

    assert main(["train", "--config", str(cfg), "--max-steps", "3"]) == 0
    summary = json.loads((tmp_path / "y" / "summary.json").read_text())
    assert summary["steps"] == 3 and summary["config"]["method"] == "parallel_mlp"
    assert main(["train", "--model", "x"]) == 2  # missing options: a clear error, exit code 2


def _tiny_config(backbone, out, **kw) -> TrainConfig:
    """A short run on the module's tiny backbone: batch 4, no progress bar."""
    base_dir, data = backbone
    kw = {"batch_size": 4, "progress": False, **kw}
    return TrainConfig(model=str(base_dir), data=str(data), out=str(out), **kw)


def test_bf16_autocast_with_gradient_checkpointing(backbone, tmp_path):
    cfg = _tiny_config(
        backbone, tmp_path / "bf16", max_steps=3, precision="bf16", gradient_checkpointing=True
    )
    result = train(cfg)
    assert (
        result.final_loss is not None and result.final_loss == result.final_loss
    )  # finite, not NaN
    calyrex.load_adapter(
        tiny_model("qwen2", num_hidden_layers=8, initializer_range=0.2),
        tmp_path / "bf16" / "adapter",
    )


def test_a_resumed_run_keeps_the_precision_it_started_with(tmp_path, monkeypatch):
    """``auto`` is measured per process (a timed matmul) and can flip under load: a run resumed
    from a checkpoint must continue in the precision it started with, not re-measure."""
    from calyrex.backbones import precision
    from calyrex.training.config import TrainConfig
    from calyrex.training.run import PRECISION_FILE, _record_precision, run_precision

    out = tmp_path / "run"
    out.mkdir()
    monkeypatch.setattr(precision, "choose", lambda device="cpu": precision.Choice("fp32", "x"))
    auto = TrainConfig(model="m", data="d", out=str(out), precision="auto")
    assert run_precision(auto, out, None).precision == "fp32"  # a fresh run measures
    _record_precision(out, precision.Choice("bf16", "measured when it started"))
    assert json.loads((out / PRECISION_FILE).read_text())["chosen"] == "bf16"
    ckpt = str(out / "checkpoint-8")
    assert run_precision(auto, out, ckpt).precision == "bf16"  # resumed: as it started
    assert run_precision(auto, out, None).precision == "fp32"  # no checkpoint: a new run
    same = dataclasses.replace(auto, precision="bfloat16")
    assert run_precision(same, out, ckpt).precision == "bf16"
    with pytest.raises(ValueError, match="trained in bf16 until checkpoint-8.*--precision bf16"):
        run_precision(dataclasses.replace(auto, precision="fp32"), out, ckpt)


def _agree_on_rank(rank: int, port: int, out: str) -> None:
    import torch.distributed as dist

    from calyrex.backbones.precision import Choice, agreed

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    measured = Choice("bf16" if rank == 0 else "fp32", f"measured on rank {rank}")
    Path(out, f"rank{rank}.txt").write_text(agreed(measured).precision)
    dist.destroy_process_group()


def test_every_rank_trains_in_rank_zeros_precision(tmp_path):
    """auto is measured per process: two ranks that measure differently still agree (rank 0's)."""
    import torch.multiprocessing as mp

    from calyrex.backbones.precision import Choice, agreed

    mp.spawn(_agree_on_rank, args=(29561, str(tmp_path)), nprocs=2)
    assert [(tmp_path / f"rank{r}.txt").read_text() for r in range(2)] == ["bf16", "bf16"]
    alone = Choice("fp32", "x")
    assert agreed(alone) is alone  # no process group: unchanged


@pytest.mark.parametrize("method", ["calyrex", "lora"])
def test_validation_loss_is_logged_and_the_best_adapter_is_kept(
    backbone, tmp_path, method, monkeypatch
):
    """--eval-data: the validation loss in metrics.jsonl every --eval-steps and at the last
    step; OUT/adapter holds the adapter of the lowest one (best.json names its step), which is
    the adapter the run had at that step (its checkpoint), not the last one."""
    base_dir, data = backbone
    # which measured step is lowest is the CPU's rounding (LoRA flattens at the task's floor, ~4.5,
    # at this rate; CALYREX rose after step 6 on AMX and avx512_bf16 Xeons and kept falling to
    # step 12 on an avx512_bf16 EPYC): the best is scripted, a dip at step 6 that no real step
    # reaches, on top of the measured losses
    from calyrex.training.trainer import AdapterTrainer

    measured = AdapterTrainer.evaluation_loop

    def dipped(self, *args, **kw):
        output = measured(self, *args, **kw)
        if self.state.global_step == 6:
            output.metrics["eval_loss"] -= 10.0
        return output

    monkeypatch.setattr(AdapterTrainer, "evaluation_loop", dipped, raising=False)
    val = _write_jsonl(tmp_path / "val.jsonl", _sort_rows(12, seed=9))
    out = tmp_path / method
    cfg = TrainConfig(
        model=str(base_dir),
        data=str(data),
        eval_data=str(val),
        eval_steps=3,
        out=str(out),
        method=method,
        max_steps=12,
        scheduler="constant",
        batch_size=4,
        lr=0.3,  # large: every checkpoint's adapter differs, so the kept one is told from the last
        precision="fp32",
        logging_steps=1,
        save_steps=3,  # every evaluated step's adapter, to compare the kept one with
        save_total_limit=10,
        progress=False,
    )
    train(cfg)
    evals = [
        json.loads(line)
        for line in (out / "metrics.jsonl").read_text().splitlines()
        if "eval_loss" in line
    ]
    assert [e["step"] for e in evals] == [0, 3, 6, 9, 12]
    best = min(evals, key=lambda e: e["eval_loss"])
    summary = json.loads((out / "summary.json").read_text())["validation"]
    assert summary["best"]["step"] == best["step"] and summary["evaluations"] == 5
    assert summary["stopped_early"] is False  # every one of its 12 steps ran
    assert best["step"] == 6  # the scripted dip: not the last adapter, so the test can fail

    from calyrex.core.adapter_io import read_adapter

    def weights(where):
        return read_adapter(where)[1]

    def same(a, b):
        return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)

    kept = weights(out / "adapter")
    assert same(kept, weights(out / f"best-{best['step']}"))
    assert same(kept, weights(out / f"checkpoint-{best['step']}")), "not the best step's adapter"
    assert not same(kept, weights(out / "checkpoint-12")), "the last step's adapter"
    assert sorted(p.name for p in out.glob("best-*")) == [f"best-{best['step']}"]


def test_patience_stops_after_evaluations_without_a_lower_loss(tmp_path):
    from types import SimpleNamespace

    from calyrex.training.trainer import KeepBest, read_best

    saved = []
    keep = KeepBest(tmp_path, lambda model, where: saved.append(where.name), patience=2)
    args = SimpleNamespace(eval_steps=5)
    keep.on_train_begin(args, None, None)
    stops = []
    for step, loss in zip((5, 10, 15, 20), (3.0, 2.0, 2.5, 2.0), strict=True):
        state = SimpleNamespace(global_step=step, is_world_process_zero=True)
        control = SimpleNamespace(should_training_stop=False)
        keep.on_evaluate(args, state, control, metrics={"eval_loss": loss}, model=None)
        stops.append(control.should_training_stop)
    assert saved == ["best-5", "best-10"] and read_best(tmp_path)["step"] == 10
    assert stops == [False, False, False, True]  # 2 evaluations (10 steps) past the best; equal
    # is not lower
    resumed = KeepBest(tmp_path, lambda model, where: None, patience=2)
    resumed.on_train_begin(args, None, None)
    assert resumed.best["eval_loss"] == 2.0  # a resumed run reads it back


def test_a_run_restarted_without_a_checkpoint_logs_each_step_once(backbone, tmp_path):
    """A run killed before its first checkpoint starts again from step 0: what it logged and the
    best adapter it kept are forgotten, not doubled (found in the study's sweep)."""
    base_dir, data = backbone
    out = tmp_path / "run"
    out.mkdir()
    stale = [{"step": s, "loss": 9.0} for s in (1, 2)] + [{"step": 0, "eval_loss": 0.1}]
    (out / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in stale))
    (out / "best.json").write_text(json.dumps({"step": 0, "eval_loss": 0.1, "dir": "best-0"}))
    (out / "best-0").mkdir()
    train(
        TrainConfig(
            model=str(base_dir),
            data=str(data),
            eval_data=str(data),
            eval_steps=2,
            out=str(out),
            max_steps=4,
            batch_size=4,
            precision="fp32",
            logging_steps=1,
            resume=True,
            progress=False,
        )
    )
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "loss" in r] == [1, 2, 3, 4]
    assert [r["step"] for r in rows if "eval_loss" in r] == [0, 2, 4]
    assert all(r.get("loss") != 9.0 for r in rows)
    best = json.loads((out / "best.json").read_text())
    assert best["eval_loss"] != 0.1  # the new run's own, not the earlier attempt's


@pytest.mark.parametrize("checkpoint", ["with_clock", "from_before_the_clock"])
def test_a_resumed_runs_seconds_are_summed_over_its_attempts(checkpoint, backbone, tmp_path):
    """``summary.json``'s seconds are the run's, not the last attempt's (the study's report
    divides them by the steps): the checkpoint resumed from carries the seconds up to it. A
    checkpoint written before the clock existed resumes too, counting this attempt only."""
    cfg = _tiny_config(
        backbone, tmp_path / "run", max_steps=4, save_steps=2, logging_steps=1, precision="fp32"
    )
    # a run in one attempt: its seconds are that attempt's, setup included once
    train(dataclasses.replace(cfg, out=str(tmp_path / "whole")))
    whole = json.loads((tmp_path / "whole" / "summary.json").read_text())
    assert whole["seconds"] == pytest.approx(whole["seconds_this_attempt"], abs=0.02)
    train_killed_at(cfg, 3)  # after checkpoint-2
    state_file = tmp_path / "run" / "checkpoint-2" / "trainer_state.json"
    state = json.loads(state_file.read_text())
    assert state["stateful_callbacks"]["Clock"]["attributes"]["seconds"] > 0
    if checkpoint == "with_clock":  # as if the first attempt had taken 1000 s to step 2
        state["stateful_callbacks"]["Clock"]["attributes"]["seconds"] = 1000.0
        before = 1000.0
    else:
        del state["stateful_callbacks"]["Clock"]
        before = 0.0
    state_file.write_text(json.dumps(state))
    train(dataclasses.replace(cfg, resume=True))
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["steps"] == 4
    assert 0 < summary["seconds_this_attempt"] < 1000
    assert summary["seconds"] == pytest.approx(before + summary["seconds_this_attempt"], abs=0.02)
    # the checkpoint the resumed attempt wrote carries the sum on
    later = json.loads((tmp_path / "run" / "checkpoint-4" / "trainer_state.json").read_text())
    assert later["stateful_callbacks"]["Clock"]["attributes"]["seconds"] >= before


def test_tokens_per_second_count_the_tokens_since_the_last_log(tmp_path, monkeypatch):
    """The metrics log's tokens/s: the tokens seen since the last training log (or since the
    train began, a resumed run's earlier tokens excluded) over the seconds between them."""
    from types import SimpleNamespace

    from calyrex.training import trainer as trainer_module

    clock = iter([10.0, 12.0, 16.0])  # train begins; first log 2 s later; second 4 s after it
    monkeypatch.setattr(trainer_module.time, "perf_counter", lambda: next(clock))
    log = trainer_module.MetricsLog(tmp_path / "metrics.jsonl")
    state = SimpleNamespace(is_world_process_zero=True, global_step=40, num_input_tokens_seen=5000)
    log.on_train_begin(None, state, None)  # resumed: 5,000 tokens seen by earlier attempts
    for step, seen in ((41, 6000), (42, 10000)):
        state.global_step, state.num_input_tokens_seen = step, seen
        log.on_log(None, state, None, logs={"loss": 1.0})
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [(r["step"], r["tokens_per_s"]) for r in rows] == [(41, 500.0), (42, 1000.0)]


def test_a_resumed_run_with_validation_logs_and_evaluates_each_step_once(backbone, tmp_path):
    """A run resumed from a checkpoint does not evaluate again at its start (``eval_on_start``
    is the first attempt's), and what the killed attempt logged after that checkpoint is dropped
    before the steps are run again: each step and evaluation is logged once."""
    base_dir, data = backbone
    cfg = _tiny_config(
        backbone, tmp_path / "run", max_steps=4, save_steps=2, logging_steps=1, precision="fp32"
    )
    cfg = dataclasses.replace(cfg, eval_data=str(data), eval_steps=2, resume=True)
    train_killed_at(cfg, 4)  # after checkpoint-2, its evaluation and step 3's log
    logged = (tmp_path / "run" / "metrics.jsonl").read_text()
    assert '"step": 3' in logged  # not vacuous: a line past the checkpoint to drop
    train(cfg)
    rows = [
        json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    ]
    assert [r["step"] for r in rows if "eval_loss" in r] == [0, 2, 4]
    assert [r["step"] for r in rows if "loss" in r] == [1, 2, 3, 4]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["steps"] == 4 and summary["validation"]["evaluations"] == 3


@pytest.mark.parametrize("objective", ["sft", "dpo"])
def test_every_option_reaches_the_trainers_arguments(objective, tmp_path):
    """Each TrainConfig option a Trainer reads arrives in its TrainingArguments (DPO: TRL's
    DPOConfig) as given, not as a default: an option dropped on the way trains silently."""
    from calyrex.training.run import _training_args

    cfg = TrainConfig(
        model="m",
        data="d",
        out=str(tmp_path),
        objective=objective,
        lr=7e-4,
        batch_size=3,
        grad_accum=5,
        max_steps=17,
        scheduler="cosine_with_restarts",
        warmup_ratio=0.2,
        weight_decay=0.07,
        seed=11,
        save_steps=6,
        save_total_limit=4,
        logging_steps=7,
        eval_data="v",
        eval_steps=9,
        group_by_length=True,
        beta=0.3,
        max_length=96,
    )
    args = _training_args(cfg, "fp32")
    given = {
        "learning_rate": 7e-4,
        "per_device_train_batch_size": 3,
        "per_device_eval_batch_size": 3,
        "gradient_accumulation_steps": 5,
        "max_steps": 17,
        "lr_scheduler_type": "cosine_with_restarts",
        "warmup_steps": 0.2,
        "weight_decay": 0.07,
        "seed": 11,
        "data_seed": 11,
        "save_steps": 6,
        "save_total_limit": 4,
        "logging_steps": 7,
        "eval_steps": 9,
        "eval_strategy": "steps",
        "train_sampling_strategy": "group_by_length",
        "include_num_input_tokens_seen": "non_padding",
    }
    if objective == "dpo":
        given |= {"beta": 0.3, "max_length": 96, "truncation_mode": "keep_start"}
    found = {k: getattr(args, k) for k in given}
    found = {k: getattr(v, "value", v) for k, v in found.items()}  # the Trainer's enums
    assert found == given
    assert type(args).__name__ == ("DPOConfig" if objective == "dpo" else "TrainingArguments")


def test_an_init_adapter_of_another_method_is_refused_by_name(backbone, tmp_path):
    """--init-adapter continues an adapter of --method; one of another method is refused (it
    would train under the wrong name and parameter count), the run's folder left without one."""
    initial_adapter(tmp_path / "sft", "calyrex", seed=0)
    cfg = _tiny_config(backbone, tmp_path / "run", max_steps=2, precision="fp32")
    with pytest.raises(ValueError, match=r"is a calyrex adapter, not lora"):
        train(dataclasses.replace(cfg, method="lora", init_adapter=str(tmp_path / "sft")))
    assert not (tmp_path / "run" / "adapter").exists()


def test_instruction_rows_sources_and_the_system_pool(tmp_path, tok):
    """Alpaca/Dolly rows put their input or context after the instruction; ``#N`` keeps the first
    N rows; the system pool's draw is the seed's (the same seed, the same prompts)."""
    rows = [
        {"instruction": "Summarise.", "input": "A long text.", "output": "Short."},
        {"instruction": "Classify.", "context": "red, apple", "response": "fruit"},
        {"instruction": "Say hi.", "input": "  ", "output": "Hi."},
        *({"prompt": f"q{i}", "response": f"a{i}"} for i in range(12)),
    ]
    path = str(_write_jsonl(tmp_path / "d.jsonl", rows))
    convs = load_conversations(path, system_pool=None)
    users = [c[0]["content"] for c in convs[:3]]
    assert users == ["Summarise.\n\nA long text.", "Classify.\n\nred, apple", "Say hi."]
    assert [c[1]["content"] for c in convs[:3]] == ["Short.", "fruit", "Hi."]
    assert len(load_conversations(f"{path}#4", system_pool=None)) == 4
    pool = [f"system prompt {i}" for i in range(8)]

    def systems(seed):
        return [c[0]["content"] for c in load_conversations(path, system_pool=pool, seed=seed)]

    assert systems(3) == systems(3) and len(set(systems(3))) > 1
    assert systems(3) != systems(4)


def test_a_conversation_whose_reply_is_cut_whole_is_skipped_and_counted(tok):
    """A reply that max_length cuts off entirely leaves nothing to learn: the row is skipped
    and counted, and ``kept`` counts the rows encoded, not those read."""
    from calyrex.span.chat import encode_one
    from calyrex.training.data import EncodeStats

    long = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "word " * 40},
        {"role": "assistant", "content": "Done."},
    ]
    short = [
        *long[:1],
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Hello."},
    ]
    prompt = encode_one(tok, long[:2], add_generation_prompt=True)["input_ids"]
    stats = EncodeStats()
    rows = encode_conversations(tok, [long, short], max_length=len(prompt), stats=stats)
    assert len(rows) == 1 and stats.summary() == {
        "kept": 1,
        "skipped": {"no_assistant_tokens_after_truncation": 1},
    }


def test_the_train_command_leaves_the_process_group_of_a_finished_run(tmp_path, monkeypatch):
    """Under torchrun the command's process owns its group: a finished run destroys it while
    the interpreter is whole (left to exit, gloo's threads can abort a rank: SIGABRT)."""
    import torch.distributed as dist

    import calyrex.training.run as run
    from calyrex.training.command import train_command

    monkeypatch.setattr(run, "train", lambda cfg: None)
    dist.init_process_group(
        "gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1
    )
    try:
        train_command(model="m", data="d", out=str(tmp_path / "o"))
        assert not dist.is_initialized()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
