#!/usr/bin/env bash
# Record the real-model benchmark: CALYREX vs parameter-matched LoRA / ParallelMLP (training) and
# vs the base model (prefill, decode) on SmolLM2-135M-Instruct's real weights (`--model smollm2`),
# in the dtype `auto` picks here (fp32 on an AVX2-only CPU, bf16 with AMX), written to
# benchmarks/results/cpu-2core-smollm2.json; `python scripts/readme_bench.py` then rewrites the
# bench-smollm2 block of docs/benchmarks.md from it. Run it on an otherwise idle machine: another job on the
# same cores moves every ratio. Extra arguments go to `calyrex bench` and win over the ones here
# (e.g. smaller sizes and `--json /tmp/smoke.json` for a smoke run).
#
# Sizes, for about 5–8 minutes on 2 cores (SmolLM2 fp32: a CALYREX training step at 8 × 256
# tokens takes ~12 s, a LoRA step more, since LoRA backpropagates through all 30 layers and CAL
# only through the last 5; prefill runs at ~700 tokens/s):
# - training: batch 8 × 256 tokens, the system span and the supervised reply a quarter of each
#   row (64 + 64, the cpu preset's proportions), 3 timed steps after the preset's 1 warm-up, per
#   method; with the memory pass, ~5 steps × 3 methods at 10–20 s each: ~4 min.
# - inference: the cpu preset's prompt (250 system + 1000 conversation tokens: ~1.8 s a
#   prefill), 32 decode steps, 5 repeats alternating base and CALYREX: ~35 s; decode step time
#   at 1024, 2048 and 4096 tokens of context (SmolLM2 was trained to 8192): ~50 s.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/calyrex bench --model smollm2 --dtype auto --sections train inference \
  --train-batch 8 --train-tokens 256 --train-system 64 --train-labelled 64 --train-steps 3 \
  --system-tokens 250 --conversation-tokens 1000 --decode-steps 32 --repeats 5 \
  --decode-contexts 1024 2048 4096 \
  --json benchmarks/results/cpu-2core-smollm2.json "$@"
