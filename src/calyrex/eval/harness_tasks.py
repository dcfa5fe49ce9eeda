"""Benchmarks that lm-evaluation-harness already has (MMLU, GSM8K, SQuAD v2), run in-process.

The loaded model is wrapped in :class:`calyrex.eval.lm.CalyrexLM` (the system span reaches the
model in both the generation and the log-likelihood paths) and evaluated with the chat
template; ``--system-prompt`` becomes lm-eval's ``system_instruction``. Metric names are the
harness's (``acc``, ``exact_match,strict-match``, ...; the ``none`` filter suffix dropped), with
``n``, the documents scored. Tasks on local files (no hub): :mod:`calyrex.eval.local_tasks`.
These need the model: they cannot score ``--responses``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from .bench import Benchmark, Context


def harness_metrics(results: dict[str, Any]) -> dict[str, float]:
    out = {}
    for key, value in results.items():
        if key in ("alias", "sample_len") or not isinstance(value, int | float):
            continue
        name = key.removesuffix(",none")
        out[name] = float(value)
    return out


def sample_count(out: dict[str, Any], task: str) -> int:
    """Documents lm-eval scored for ``task``: its own count, or its subtasks' sum (a group)."""
    if task in out.get("n-samples", {}):
        return int(out["n-samples"][task]["effective"])
    return sum(sample_count(out, child) for child in out.get("group_subtasks", {}).get(task, []))


SAMPLE_METRICS = ("acc", "acc_norm", "exact_match")


def write_samples(path: Any, samples: dict[str, list[dict[str, Any]]]) -> None:
    """lm-eval's per-document results (``log_samples``), one row per (task, document): its
    0/1 scores, so that two models' capability is compared paired, document by document."""
    from .data import write_jsonl

    rows = [
        {"task": task, "doc_id": s["doc_id"]}
        | {m: float(s[m]) for m in SAMPLE_METRICS if isinstance(s.get(m), int | float)}
        for task, docs in sorted(samples.items())
        for s in docs
    ]
    write_jsonl(path, rows)


class HarnessTask(Benchmark):
    task: ClassVar[str]

    def task_specs(self, ctx: Context) -> tuple[list[Any], Any]:
        """What lm-eval loads (task names, inline task configs, ``Group`` objects) and the
        ``TaskManager`` that loads them; ``None`` is lm-eval's default, which indexes every task
        it ships (seconds)."""
        return [self.task], None

    def doc_limit(self, ctx: Context) -> int | None:
        """lm-eval's ``limit``, the first N documents of every (sub)task: ``--limit``."""
        return ctx.config.limit

    def run(self, ctx: Context) -> dict[str, Any]:
        import lm_eval

        from .lm import CalyrexLM

        gen = ctx.generator
        if ctx.lm is None:
            ctx.lm = CalyrexLM(
                pretrained=gen.model, tokenizer=gen.tokenizer, batch_size=gen.batch_size
            )
        tasks, manager = self.task_specs(ctx)
        out = lm_eval.simple_evaluate(
            model=ctx.lm,
            tasks=tasks,
            task_manager=manager,
            apply_chat_template=True,
            system_instruction=ctx.config.system_prompt,
            limit=self.doc_limit(ctx),
            random_seed=ctx.config.seed,
            log_samples=True,
        )
        metrics = harness_metrics(out["results"][self.task])
        metrics["n"] = sample_count(out, self.task)
        write_samples(ctx.out / f"{self.name}.samples.jsonl", out.get("samples") or {})
        return {"metrics": metrics, "task": self.task}


class MMLU(HarnessTask):
    name = task = "mmlu"
    source = "cais/mmlu (lm-eval task mmlu)"


class GSM8K(HarnessTask):
    name = task = "gsm8k"
    source = "openai/gsm8k (lm-eval task gsm8k)"


class SQuADv2(HarnessTask):
    name = task = "squadv2"
    source = "rajpurkar/squad_v2 (lm-eval task squadv2)"
