"""Benchmarks that lm-evaluation-harness already has (MMLU, GSM8K, SQuAD v2), run in-process.

The loaded model is wrapped in :class:`calyrex.eval.lm.CalyrexLM` (the system span reaches the
model in both the generation and the log-likelihood paths) and evaluated with the chat
template; ``--system-prompt`` becomes lm-eval's ``system_instruction``. Metric names are the
harness's (``acc``, ``exact_match,strict-match``, ...; the ``none`` filter suffix dropped).
These need the model: they cannot score ``--responses``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from .bench import Benchmark, Context


def harness_metrics(results: dict[str, Any]) -> dict[str, float]:
    out = {}
    for key, value in results.items():
        if key == "alias" or not isinstance(value, int | float):
            continue
        name = key.removesuffix(",none")
        out[name] = float(value)
    return out


class HarnessTask(Benchmark):
    task: ClassVar[str]

    def run(self, ctx: Context) -> dict[str, Any]:
        import lm_eval

        from .lm import CalyrexLM

        gen = ctx.generator
        if ctx.lm is None:
            ctx.lm = CalyrexLM(
                pretrained=gen.model, tokenizer=gen.tokenizer, batch_size=gen.batch_size
            )
        out = lm_eval.simple_evaluate(
            model=ctx.lm,
            tasks=[self.task],
            apply_chat_template=True,
            system_instruction=ctx.config.system_prompt,
            limit=ctx.config.limit,
            random_seed=ctx.config.seed,
        )
        return {"metrics": harness_metrics(out["results"][self.task]), "task": self.task}


class MMLU(HarnessTask):
    name = task = "mmlu"
    source = "cais/mmlu (lm-eval task mmlu)"


class GSM8K(HarnessTask):
    name = task = "gsm8k"
    source = "openai/gsm8k (lm-eval task gsm8k)"


class SQuADv2(HarnessTask):
    name = task = "squadv2"
    source = "rajpurkar/squad_v2 (lm-eval task squadv2)"
