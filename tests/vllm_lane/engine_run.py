"""Run one vLLM engine over phases of prompts and write greedy tokens and cache hits as JSON.

``python engine_run.py SPEC.json OUT.json`` — a separate process per engine configuration (vLLM
engines do not share a process well). SPEC: ``model``, ``tokenizer_mode``,
``max_num_batched_tokens``, ``prefix_caching``, ``max_tokens``, ``phases`` (lists of prompts as
token ids, each phase one ``generate`` call, run in order so later phases can hit the cache).
"""

from __future__ import annotations

import json
import sys

if __name__ == "__main__":
    from vllm import LLM, SamplingParams

    spec = json.loads(open(sys.argv[1]).read())
    llm = LLM(
        model=spec["model"],
        tokenizer_mode=spec.get("tokenizer_mode", "auto"),
        enforce_eager=spec.get("enforce_eager", True),
        dtype="float32",
        max_model_len=1024,
        max_num_batched_tokens=spec["max_num_batched_tokens"],
        max_num_seqs=8,
        enable_prefix_caching=spec["prefix_caching"],
        block_size=32,
        seed=0,
    )
    params = SamplingParams(max_tokens=spec["max_tokens"], temperature=0.0, ignore_eos=True)
    phases = []
    for prompts in spec["phases"]:
        outs = llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
        phases.append(
            [
                {
                    "tokens": list(o.outputs[0].token_ids),
                    "num_cached_tokens": o.num_cached_tokens or 0,
                }
                for o in outs
            ]
        )
    json.dump({"phases": phases}, open(sys.argv[2], "w"))
