"""What the real-model study runs: its arms, seeds, training budget and evaluation subsets.

Two presets, one dataclass: :data:`FULL` (the comparison the README reports) and :data:`QUICK`
(every stage on a handful of examples, for CI). Every arm trains on the same mix file with the
same steps, batch, sequence length and learning rate; LoRA and ParallelMLP are parameter-matched
to the blocks of ``late8th`` (:func:`calyrex.baselines.matched_counts`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class Arm:
    """One trained method of the study. ``placement="analyze"``: the one ``calyrex analyze``
    recommends on this model (another preset when it recommends ``late8th`` itself)."""

    label: str
    method: str
    placement: str = "late8th"
    seeds: tuple[int, ...] | None = None  # None: the study's seeds
    steps_like: str | None = None  # train for the wall time this arm's seed-0 run took


# label → suite → (max_new_tokens, items): generation lengths fit what each checker reads
@dataclass(frozen=True)
class Suite:
    name: str
    limit: int | None
    max_new_tokens: int = 64
    system_prompt: str | None = None  # only read by the lm-eval capability tasks
    tag: str = ""  # a second run of the same suite (capability without a system prompt)

    @property
    def key(self) -> str:
        return f"{self.name}{self.tag}"


NEUTRAL = "You are a helpful assistant."
CAPABILITY = ("arc_easy", "arc_challenge", "hellaswag", "piqa", "boolq", "mmlu_local")
ARMS = (
    Arm("calyrex-late8th", "calyrex"),
    Arm("calyrex-analyze", "calyrex", placement="analyze"),
    Arm("lora", "lora"),
    Arm("parallel_mlp", "parallel_mlp"),
    Arm("lora-equal-time", "lora", seeds=(0,), steps_like="calyrex-late8th"),
)


def _suites(gen: int, msj: int, cap: int, tokens: int) -> tuple[Suite, ...]:
    return (
        Suite("sys_ifeval", gen, max_new_tokens=4 * tokens),
        Suite("tensortrust", gen // 2, max_new_tokens=tokens // 2),
        Suite("struq", gen, max_new_tokens=tokens // 4),
        Suite("sep", gen, max_new_tokens=tokens),
        Suite("msj_hijack", msj, max_new_tokens=tokens // 4),
        *(Suite(name, cap, system_prompt=NEUTRAL) for name in CAPABILITY),
        *(Suite(name, cap, tag="-nosys") for name in CAPABILITY),
    )


@dataclass(frozen=True)
class StudyConfig:
    """The study's whole recipe (written to ``OUT/study.json`` beside the results)."""

    model: str = "smollm2"
    mix_rows: int = 4000
    steps: int = 64
    batch_size: int = 8
    max_length: int = 256
    lr: float = 3e-4
    seeds: tuple[int, ...] = (0, 1, 2)
    arms: tuple[Arm, ...] = ARMS
    suites: tuple[Suite, ...] = field(default_factory=lambda: _suites(100, 24, 100, 64))
    eval_batch_size: int = 16
    analyze_examples: int = 48
    resamples: int = 2000

    def arm(self, label: str) -> Arm:
        return next(a for a in self.arms if a.label == label)

    def seeds_of(self, arm: Arm) -> tuple[int, ...]:
        return arm.seeds if arm.seeds is not None else self.seeds


FULL = StudyConfig()
QUICK = replace(
    FULL,
    mix_rows=48,
    steps=2,
    batch_size=2,
    max_length=128,
    seeds=(0,),
    suites=_suites(2, 1, 4, 8),
    eval_batch_size=4,
    analyze_examples=8,
    resamples=200,
)
