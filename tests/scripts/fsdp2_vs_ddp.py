"""Run under ``torchrun --nproc_per_node 2 fsdp2_vs_ddp.py OUT``: FSDP2 (``fully_shard``) and DDP
train the same wrapped model on the same data (gloo, CPU); each rank writes ``OUT/rank<r>.json``
with both adapters' checksums and the largest difference between them.

accelerate (and so ``transformers.Trainer``) runs FSDP only on accelerators, so on CPU this
applies ``fully_shard`` directly: each decoder layer (host + block) and then the root.
"""

import hashlib
import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel

import calyrex
from calyrex.backbones.tiny import tiny_model, tiny_tokenizer

CONVS = [
    [
        {"role": "system", "content": f"Always answer with the word {w}."},
        {"role": "user", "content": f"question {i}"},
        {"role": "assistant", "content": f"{w} {w}"},
    ]
    for i, w in enumerate(["alpha", "beta", "gamma", "delta"])
]


def build(tok):
    model = calyrex.wrap(tiny_model("qwen2", num_hidden_layers=4), tokenizer=tok, seed=0)
    return model.train()


def train(model, batch, steps=3):
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=0.5)
    for _ in range(steps):
        out = model(**batch, labels=batch["input_ids"])
        out.loss.backward()
        opt.step()
        opt.zero_grad()


def digest(state):
    h = hashlib.sha256()
    for k in sorted(state):
        h.update(k.encode())
        h.update(state[k].detach().float().contiguous().numpy().tobytes())
    return h.hexdigest()


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    tok = tiny_tokenizer("chatml")
    rows = CONVS[rank * 2 : rank * 2 + 2]  # each rank its own half of the batch
    batch = dict(calyrex.encode_chat(tok, rows))
    batch.pop("labels", None)

    sharded = build(tok)
    for layer in sharded.base.model.layers:
        fully_shard(layer)
    fully_shard(sharded)
    train(sharded, batch)
    fsdp_state = sharded.adapter_state_dict()  # gathered whole on every rank
    kinds = sorted({type(p).__name__ for p in sharded.parameters() if p.requires_grad})

    plain = build(tok)
    ddp = DistributedDataParallel(plain)
    train(ddp, batch)
    ddp_state = plain.adapter_state_dict()

    diff = max((fsdp_state[k] - ddp_state[k]).abs().max().item() for k in ddp_state)
    moved = max(v.abs().max().item() for k, v in ddp_state.items() if "o_proj" in k)
    record = {
        "rank": rank,
        "param_types": kinds,
        "fsdp": digest(fsdp_state),
        "ddp": digest(ddp_state),
        "max_diff": diff,
        "o_proj_max": moved,
    }
    (Path(sys.argv[1]) / f"rank{rank}.json").write_text(json.dumps(record))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
