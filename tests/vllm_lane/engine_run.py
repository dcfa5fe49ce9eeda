"""Run one vLLM engine over phases of prompts; write greedy tokens, their log-probabilities
and cache hits as JSON.

``python engine_run.py SPEC.json OUT.json`` — a separate process per engine configuration (vLLM
engines do not share a process well). SPEC: ``model``, ``tokenizer_mode``,
``max_num_batched_tokens``, ``prefix_caching``, ``max_tokens``, ``phases`` (each one
``generate`` call, run in order so later phases can hit the cache): a list of prompts, each
token ids or ``{"ids": [...], "span": [start, end]}`` (the ids with a span carried as the
calyrex renderer carries one), or ``{"chat": [conversation, ...]}`` (one ``LLM.chat`` call; its
phase also records the span each prompt carried out of the renderer, ``"carried"``).
"""

from __future__ import annotations

import json
import sys


def prompt(item):
    """A token prompt dict; ``{"ids", "span"}`` carries the span under the renderer's key."""
    from calyrex.vllm.span import CHAT_SPAN, ChatSpan

    if isinstance(item, dict):
        span = ChatSpan(tuple(item["span"]), tuple(item["ids"]))
        return {"prompt_token_ids": item["ids"], CHAT_SPAN: span}
    return {"prompt_token_ids": item}


def run_phase(llm, phase, params):
    """[{"tokens", "num_cached_tokens"}] of one phase (and the chat phase's carried spans)."""
    from calyrex.vllm.span import CHAT_SPAN

    carried = None
    if isinstance(phase, dict):
        rendered = llm._preprocess_chat(phase["chat"])  # what LLM.chat renders, to inspect
        carried = [list(r[CHAT_SPAN].bounds) if CHAT_SPAN in r else None for r in rendered]
        outs = llm.chat(phase["chat"], params, use_tqdm=False)
    else:
        outs = llm.generate([prompt(p) for p in phase], params, use_tqdm=False)
    rows = [
        {
            "tokens": list(o.outputs[0].token_ids),
            "logprobs": [
                lp[t].logprob
                for t, lp in zip(o.outputs[0].token_ids, o.outputs[0].logprobs, strict=True)
            ],
            "num_cached_tokens": o.num_cached_tokens or 0,
        }
        for o in outs
    ]
    for row, span in zip(rows, carried or [], strict=False):
        row["carried"] = span
    return rows


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
    params = SamplingParams(
        max_tokens=spec["max_tokens"], temperature=0.0, ignore_eos=True, logprobs=0
    )
    phases = [run_phase(llm, phase, params) for phase in spec["phases"]]
    json.dump({"phases": phases}, open(sys.argv[2], "w"))
