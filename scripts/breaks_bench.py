"""The benchmark broken on purpose: the breaks ``scripts/break_code.py`` runs on ``calyrex
bench``'s FLOP model, its training and inference ratios, its headline summary and its printed
tables. Same shape as its ``BREAKS``."""

from __future__ import annotations

BENCH_TESTS = ["tests/test_bench.py"]
FLOPS, TRAIN = "bench/flops.py", "bench/train.py"
INFERENCE, RUN, REPORT = "bench/inference.py", "bench/run.py", "bench/report.py"
MEASURE = "bench/measure.py"
# (what the break does, file under src/calyrex, the text it replaces, the bug, the tests run)
BENCH_BREAKS: list[tuple[str, str, str, str, list[str]]] = [
    ("flops: LoRA's backward from its first layer's output, not through every layer", FLOPS, "        above = g.layers  # LoRA", "        above = g.layers - 1  # LoRA", BENCH_TESTS),
    ("flops: a trainable adapter's backward as cheap as a frozen layer's", FLOPS, "backward = above * layer_bwd + 2 * adapter[\"fwd\"] + head(g, logits)", "backward = above * layer_bwd + adapter[\"fwd\"] + head(g, logits)", BENCH_TESTS),
    ("flops: attention's backward counted once, not twice", FLOPS, "layer_bwd = layer_linear(g, tokens) + 2 * attention_core(g, causal_pairs(tokens))", "layer_bwd = layer_linear(g, tokens) + attention_core(g, causal_pairs(tokens))", BENCH_TESTS),
    ("flops: the LM head's backward left out", FLOPS, "backward = above * layer_bwd + 2 * adapter[\"fwd\"] + head(g, logits)", "backward = above * layer_bwd + 2 * adapter[\"fwd\"]", BENCH_TESTS),
    ("flops: grouped-query attention read as one kv head per head", FLOPS, "kv_heads=getattr(hf_config, \"num_key_value_heads\", None) or heads,", "kv_heads=heads,", BENCH_TESTS),
    ("flops: a CAL block's keys and values over every token, not the span", FLOPS, "    kv = 2 * 2 * span * g.hidden", "    kv = 2 * 2 * tokens * g.hidden", BENCH_TESTS),
    ("flops: a decode step projects the cached span again", FLOPS, "    linear = cal_linear(g, cfg, tokens, 0 if kv_cached else span)", "    linear = cal_linear(g, cfg, tokens, span)", BENCH_TESTS),
    ("flops: the prefill's LM head over every token", FLOPS, "    base = base_forward(g, tokens, past, logits=1)", "    base = base_forward(g, tokens, past)", BENCH_TESTS),
    ("flops: causal pairs T²/2, the diagonal left out", FLOPS, "return tokens * past + tokens * (tokens + 1) // 2", "return tokens * past + tokens * tokens // 2", BENCH_TESTS),
    ("flops: a model's own head_dim ignored", FLOPS, "head_dim=getattr(hf_config, \"head_dim\", None) or hf_config.hidden_size // heads,", "head_dim=hf_config.hidden_size // heads,", BENCH_TESTS),
    ("train: time ratio LoRA over the method", TRAIN, "out[f\"{m}_time_ratio_vs_lora\"] = methods[m][\"step_s\"] / lora[\"step_s\"]", "out[f\"{m}_time_ratio_vs_lora\"] = lora[\"step_s\"] / methods[m][\"step_s\"]", BENCH_TESTS),
    ("train: tokens/s of one row", TRAIN, "\"tokens_per_s\": case.batch * case.tokens / seconds,", "\"tokens_per_s\": case.tokens / seconds,", BENCH_TESTS),
    ("train: a step's FLOPs for one row of the batch", TRAIN, "\"flops\": case.batch * flops.train_step(", "\"flops\": flops.train_step(", BENCH_TESTS),
    ("train: LoRA's forward FLOPs one multiply per parameter", TRAIN, "return {\"first\": 0, \"fwd\": 2 * case.tokens * trainable}", "return {\"first\": 0, \"fwd\": case.tokens * trainable}", BENCH_TESTS),
    ("train: backward from the last adapter layer, not the first", TRAIN, "return {\"first\": min(layers), \"fwd\": len(layers) * per}", "return {\"first\": max(layers), \"fwd\": len(layers) * per}", BENCH_TESTS),
    ("train: ParallelMLP's FFN counted with two matrices", TRAIN, "        per = 2 * 3 * case.tokens * g.hidden * cfg.intermediate_size", "        per = 2 * 2 * case.tokens * g.hidden * cfg.intermediate_size", BENCH_TESTS),
    ("inference: prefill ratio CALYREX over base", INFERENCE, "\"prefill_ratio_vs_base\": pre[\"base\"] / pre[\"calyrex\"],", "\"prefill_ratio_vs_base\": pre[\"calyrex\"] / pre[\"base\"],", BENCH_TESTS),
    ("inference: decode tokens/s of one step", INFERENCE, "\"decode_tokens_per_s\": {k: case.decode_steps / v for k, v in dec.items()},", "\"decode_tokens_per_s\": {k: 1 / v for k, v in dec.items()},", BENCH_TESTS),
    ("inference: tied embeddings read twice", INFERENCE, "0 if backbone.config.tie_word_embeddings else backbone.get_input_embeddings().weight.numel()", "0", BENCH_TESTS),
    ("inference: the decode FLOP ratio without the prompt's cache", INFERENCE, "g, resolved, 1, case.system, past=tokens", "g, resolved, 1, case.system, past=0", BENCH_TESTS),
    ("inference: the added decode time per call, not per step", INFERENCE, "\"added_step_s\": (step[\"calyrex\"] - step[\"base\"]) / case.decode_steps,", "\"added_step_s\": step[\"calyrex\"] - step[\"base\"],", BENCH_TESTS),
    ("inference: a context shorter than the prompt measured", INFERENCE, "        if context < cache.get_seq_length():\n            continue", "        if False:\n            continue", BENCH_TESTS),
    ("run: the headline time ratio is ParallelMLP's", RUN, "out[\"train_time_ratio_vs_lora\"] = t[\"calyrex_time_ratio_vs_lora\"]", "out[\"train_time_ratio_vs_lora\"] = t[\"parallel_mlp_time_ratio_vs_lora\"]", BENCH_TESTS),
    ("run: the decode FLOP ratio left out of the headline", RUN, "        out[\"decode_flop_ratio_vs_base\"] = i[\"decode_flop_ratio_vs_base\"]\n", "        pass\n", BENCH_TESTS),
    ("report: the FLOP limit printed as the FLOP ratio", REPORT, "        f\"{1 / i['flop_ratio_vs_base']:.3f}\",", "        f\"{i['flop_ratio_vs_base']:.3f}\",", BENCH_TESTS),
    ("report: memory ×LoRA from the step times", REPORT, "            f\"{m['activation_bytes'] / lora['activation_bytes']:.3f}\",", "            f\"{m['step_s'] / lora['step_s']:.3f}\",", BENCH_TESTS),
    ("measure: no call is timed when repeats is 0", MEASURE, "timed(fn, device)[0] for _ in range(max(1, repeats))", "timed(fn, device)[0] for _ in range(repeats)", BENCH_TESTS),
    ("measure: the CPU peak read from unsorted events", MEASURE, "    for _, nbytes in sorted(events):", "    for _, nbytes in sorted(events, reverse=True):", BENCH_TESTS),
]  # fmt: skip
