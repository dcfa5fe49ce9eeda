"""What the real-model study runs: its arms, seeds, training budget and evaluation subsets.

Presets, one dataclass: :data:`FULL` (issues 37 and 38: tuned, converged adapters with the
powered evaluation, ``results/study-real-MODEL-v2``), :data:`V1` (the first study: 48 steps at one
learning rate, small suites, committed in ``results/study-real-MODEL``) and :data:`QUICK` (the
FULL recipe's every stage on a handful of examples, for CI). Every arm trains on the same mix
file, batch and sequence length; in FULL each method at its own swept learning rate and to its
own convergence on the validation split. LoRA and ParallelMLP are parameter-matched to the
blocks of ``late8th`` (:func:`calyrex.adapters.baselines.matched_counts`).
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
    objective: str = "sft"  # "dpo": on the preference mix, starting from ``init_from``'s adapter
    init_from: str | None = None  # the arm whose adapter (same seed) this one starts from
    access: str | None = None  # the SFT mix's access rotation; None: the study's (cfg.access)
    loss_type: tuple[str, ...] = ("sigmoid",)  # a DPO arm's TrainConfig.loss_type (+ "sft": RPO)

    @property
    def data(self) -> str:
        """The mix file this arm trains on, in ``OUT/data``."""
        if self.objective == "dpo":
            return "preference.jsonl"
        return "sft.jsonl" if self.access is None else f"sft-{self.access}.jsonl"


@dataclass(frozen=True)
class Suite:
    """One ``calyrex eval`` suite as the study runs it (reply lengths fit what its checker reads)."""

    name: str
    limit: int | None
    max_new_tokens: int = 64
    system_prompt: str | None = None  # only read by the lm-eval capability tasks
    tag: str = ""  # a second run of the same suite (capability without a system prompt)
    shots: tuple[int, ...] | None = None  # msj_hijack's shot counts
    first_seed_only: bool = False  # run on the base and each arm's first seed only
    batch_size: int | None = None  # None: the study's eval_batch_size

    @property
    def key(self) -> str:
        return f"{self.name}{self.tag}"


NEUTRAL = "You are a helpful assistant."
CAPABILITY = ("arc_easy", "arc_challenge", "hellaswag", "piqa", "boolq", "mmlu_local")
# tasks whose official YAML has a ``description`` ("The following are multiple choice questions
# (with answers) about …"): lm-eval's chat template renders it as the system turn, so even the
# run without a system prompt has a system span there and the blocks act
DESCRIBED = ("mmlu_local",)


def _powered() -> tuple[Suite, ...]:
    """The evaluation of issue 37: n >= 200 per attack suite where the source has them (StruQ's
    208 whole), many-shot k = 4 and 16 on 100 samples (k = 64 dropped: at 12 samples it showed
    the same ordering as k = 16, and a 64-shot prompt costs as much as the rest of the suite),
    300 documents per capability task with the neutral system prompt (per-document, paired);
    without a system prompt 40 on the first seed only, the check that the blocks are idle there.
    Reply lengths are what the checkers read: the grant's first line, a leaked code or the
    witness within 24 tokens, StruQ's task check 32, sys-IFEval 128."""
    return (
        # generation of 128 tokens: 64 prompts a batch ran 1.7× faster than 16 (eval_speed.py)
        Suite("sys_ifeval", 200, max_new_tokens=128, batch_size=64),
        Suite("tensortrust", 200, max_new_tokens=24),
        Suite("struq", None, max_new_tokens=32),
        Suite("sep", 200, max_new_tokens=24),
        Suite("msj_hijack", 100, max_new_tokens=8, shots=(4, 16)),
        # the held-out defences of the study's own mix: granted only for the right code?
        Suite("mix_access", None, max_new_tokens=8),
        *(Suite(name, 300, system_prompt=NEUTRAL) for name in CAPABILITY),
        *(Suite(name, 40, tag="-nosys", first_seed_only=True) for name in CAPABILITY),
    )


def _suites(gen: int, msj: int, cap: int, tokens: int, shots: tuple[int, ...]) -> tuple[Suite, ...]:
    return (
        Suite("sys_ifeval", gen, max_new_tokens=4 * tokens),
        Suite("tensortrust", gen // 2, max_new_tokens=tokens // 2),
        Suite("struq", gen, max_new_tokens=tokens // 4),
        Suite("sep", gen // 2, max_new_tokens=tokens // 2),
        Suite("msj_hijack", msj, max_new_tokens=tokens // 4, shots=shots),
        *(Suite(name, cap, system_prompt=NEUTRAL) for name in CAPABILITY),
        # without a system prompt a CALYREX model is its base exactly (no span, blocks idle),
        # except on DESCRIBED tasks, whose description is the system turn
        *(Suite(name, cap, tag="-nosys", first_seed_only=True) for name in CAPABILITY),
    )


# the first study's arms (V1)
ARMS_V1 = (
    Arm("calyrex-late8th", "calyrex"),
    Arm("lora", "lora"),
    Arm("parallel_mlp", "parallel_mlp"),
    # the change seed 0 points to (CALYREX's loss ends above LoRA's, and a step costs it about
    # half of LoRA's): CALYREX given LoRA's wall time, i.e. more steps in the same budget
    Arm("calyrex-equal-time", "calyrex", seeds=(0,), steps_like="lora"),
    Arm("calyrex-analyze", "calyrex", placement="analyze", seeds=(0,)),
    Arm("lora-equal-time", "lora", seeds=(0,), steps_like="calyrex-late8th"),
    # the change the arms above point to (every one says "Access Granted" too readily): the
    # same mix with half the access rows' granted targets turned into refusals
    Arm("calyrex-fewer-granted", "calyrex", seeds=(0, 1), access="fewer-granted"),
    Arm("lora-fewer-granted", "lora", seeds=(0, 1), access="fewer-granted"),  # LoRA on it too
    # SFT → DPO (issue 28): the reference is the base (the adapters switched off)
    Arm("calyrex-dpo", "calyrex", objective="dpo", init_from="calyrex-late8th", seeds=(0,)),
    Arm("lora-dpo", "lora", objective="dpo", init_from="lora", seeds=(0,)),
    Arm(
        "parallel_mlp-dpo",
        "parallel_mlp",
        objective="dpo",
        init_from="parallel_mlp",
        seeds=(0,),
    ),
)
# the records a preset sets: not flags of calyrex study
NOT_A_FLAG = {"cli": False}


@dataclass(frozen=True)
class StudyConfig:
    """The study's whole recipe (written to ``OUT/study.json`` beside the results)."""

    model: str = "smollm2"
    """The real study's model: a registered name (smollm2)."""
    mix_rows: int = 4000
    """Rows of the SFT mix (calyrex mix --n)."""
    preference_rows: int = 1600
    """Rows of the preference mix the DPO arms train on."""
    access: str = "default"
    """The mixes' access-dialogue rotation (calyrex mix --access)."""
    val_rows: int = 0
    """Rows held out of the SFT mix as its validation split (calyrex mix --val)."""
    preference_val_rows: int = 0
    """The same for the preference mix."""
    preference_balance: bool = False
    """Repeat the preference mix's right-code pairs until "Access Granted" is preferred as often
    as it is rejected (calyrex mix --balance-grants), in both splits."""
    steps: int = 48
    """Every SFT run's steps, when epochs is unset."""
    dpo_steps: int = 24
    """Every DPO run's steps, when dpo_epochs is unset (a DPO step is two sequences and a
    reference forward)."""
    epochs: float | None = None
    """Train every SFT run this many epochs at most, to convergence on the validation split
    (unset: steps)."""
    dpo_epochs: float | None = None
    """The same for the DPO runs (unset: dpo_steps)."""
    eval_steps: int = 50
    """Validation loss every this many steps (with val_rows)."""
    patience: int | None = None
    """Stop a run after this many evaluations without a lower validation loss."""
    batch_size: int = 8
    """Training sequences per step, every run."""
    max_length: int = 256
    """The longest training sequence, in tokens."""
    lr: float = 3e-4
    """The learning rate of every SFT run when lr_grid is empty."""
    dpo_lr: float = 5e-5
    """The learning rate of every DPO run when dpo_lr_grid is empty."""
    lr_grid: tuple[float, ...] = ()
    """The sweep (issue 38): per method, seed 0 trained sweep_steps at each value, the lowest
    validation loss wins (OUT/sweep/chosen.json)."""
    dpo_lr_grid: tuple[float, ...] = ()
    """The DPO sweep, from the SFT adapter of the DPO arm's first seed."""
    sweep_steps: int = 80
    """Steps of each SFT sweep run."""
    sweep_extend: int = 0
    """A winner at the grid's edge: sweep this many more values past it."""
    dpo_sweep_steps: int = 40
    """Steps of each DPO sweep run."""
    dpo_beta: float = 0.1
    """DPO's beta: how strongly the trained model is held to the reference."""
    heldout_limit: int | None = None
    """Held-out attack items per set run as ``--cases`` (:mod:`.heldout`) after a model's
    suites, on the base, every arm's ``heldout_seed`` and single-seed arms; None: none."""
    heldout_seed: int = 1
    """The seed whose models the held-out items run on (the first whose adapters the study
    keeps: seed 0's were lost with a machine)."""
    dpo_reference: str = "base"
    """DPO's reference (``TrainConfig.reference``): "start", the SFT model each DPO run starts
    from (the DPO paper's), or "base" (the first study's: the base with the adapters off)."""
    precision: str = "fp32"
    """Training and evaluation precision (fp32, bf16 or fp16), fixed, not "auto": a study
    resumed on a machine with fast bf16 must not mix precisions ("auto" still exists for a
    one-machine study: calyrex.backbones.precision)."""
    seeds: tuple[int, ...] = (0, 1, 2)
    """The training seeds of every arm that names none of its own."""
    # the trained methods and the evaluated suites: records the presets set, not flags
    arms: tuple[Arm, ...] = field(default=ARMS_V1, metadata=NOT_A_FLAG)
    suites: tuple[Suite, ...] = field(
        default_factory=lambda: _suites(48, 12, 40, 32, (4, 16, 64)), metadata=NOT_A_FLAG
    )
    eval_batch_size: int = 16
    """Prompts per evaluation batch (a suite may set its own)."""
    merge_lora: bool = False
    """Evaluate LoRA folded into the weights (PEFT merge_and_unload): the same function without
    LoRA's extra matmuls in every layer (benchmarks/eval_precision.py --lora measures it)."""
    analyze_examples: int = 48
    """Conversations the analyze stage reads (calyrex analyze --max-examples)."""
    resamples: int = 2000
    """Bootstrap resamples of every 95 % interval."""

    def arm(self, label: str) -> Arm:
        return next(a for a in self.arms if a.label == label)

    def seeds_of(self, arm: Arm) -> tuple[int, ...]:
        return arm.seeds if arm.seeds is not None else self.seeds

    def suite(self, key: str) -> Suite:
        return next(s for s in self.suites if s.key == key)


# the study committed in results/study-real-smollm2 (issue 27): its suites' sizes
V1 = StudyConfig()
# issue 38: tuned, converged adapters on a mix that teaches when to grant; the dropped arms are
# moot there: equal wall time (every arm trains to its own convergence) and fewer-granted (the
# mix itself now grants a quarter of its access rows, each defence refusing its attacks)
ARMS_V2 = (
    Arm("calyrex-late8th", "calyrex"),
    Arm("lora", "lora"),
    Arm("parallel_mlp", "parallel_mlp"),
    # DPO on two seeds (the issue's allowance), 1 and 2: seed 0's SFT adapters were lost with a
    # machine, and each DPO run follows its SFT run, so that adapter is needed only briefly
    Arm("calyrex-dpo", "calyrex", objective="dpo", init_from="calyrex-late8th", seeds=(1, 2)),
    Arm("lora-dpo", "lora", objective="dpo", init_from="lora", seeds=(1, 2)),
    Arm("parallel_mlp-dpo", "parallel_mlp", objective="dpo", init_from="parallel_mlp", seeds=(1,)),
    Arm("calyrex-analyze", "calyrex", placement="analyze", seeds=(0,)),
    # the lever docs/study.md recipe item 5 names for DPO lowering both replies of the access
    # pairs (likelihood displacement; CALYREX's and LoRA's DPO both end refusing the right code):
    # DPO plus the preferred replies' next-token loss (RPO, weight 1) at each method's DPO rate,
    # once, on seed 2: right after that seed's DPO run, from the same SFT adapter (paired)
    *(
        Arm(f"{m}-rpo", m, objective="dpo", init_from=sft, seeds=(2,), loss_type=("sigmoid", "sft"))
        for m, sft in (("calyrex", "calyrex-late8th"), ("lora", "lora"))
    ),
)
# the trained study with the powered evaluation (issues 37, 38): results/study-real-MODEL-v2.
# Sizes fit ~24 h of this 2-core CPU (docs/study.md, Budget): the mix is 2,000 rows (the v1
# composition), the validation splits 200 and 100, at most 2 epochs
FULL = replace(
    V1,
    mix_rows=2000,
    preference_rows=800,
    access="every-outcome",
    val_rows=200,
    preference_val_rows=100,
    # the first CALYREX DPO run on the unbalanced pairs learnt to refuse every code, the right
    # one included (docs/study.md, recipe item 5); its records are in OUT/superseded/
    preference_balance=True,
    epochs=2.0,
    dpo_epochs=1.0,
    # a validation pass over the 200 rows costs about 20 training steps here: every 100 steps,
    # and 2 passes without a lower loss (200 steps, 0.8 of an epoch) stop a run
    eval_steps=100,
    patience=2,
    lr_grid=(1e-4, 3e-4, 1e-3, 3e-3),
    # three values over 10x (the least): 1e-5, the first grid's bottom, was dropped before
    # any DPO run (~50 min a run on an AVX2 CPU); a winner at 3e-5 grows the grid down to it
    dpo_lr_grid=(3e-5, 1e-4, 3e-4),
    # the reference is the SFT model a DPO run starts from: every run starts at margin 0, loss
    # ln 2, so what DPO adds is not confused with how far SFT moved from the base
    dpo_reference="start",
    heldout_limit=100,
    sweep_extend=2,
    arms=ARMS_V2,
    suites=_powered(),
    merge_lora=True,
)
# every stage on a handful of examples, sized for CI on an AVX2-only 2-core CPU (there it took
# 36 min with three DPO arms and every sweep grown past its edge): two DPO arms, one DPO value,
# no grid extension (the sweep's growth has its own test), half an epoch
QUICK = replace(
    FULL,
    arms=tuple(
        replace(a, seeds=a.seeds and (0,))
        for a in FULL.arms
        if a.label not in ("parallel_mlp-dpo", "lora-rpo")
    ),
    mix_rows=48,
    preference_rows=16,
    val_rows=8,
    preference_val_rows=8,
    epochs=0.5,
    dpo_epochs=1.0,
    eval_steps=8,
    patience=1,
    lr_grid=(1e-4, 1e-3),
    dpo_lr_grid=(1e-4,),
    sweep_extend=0,
    sweep_steps=2,
    dpo_sweep_steps=1,
    batch_size=2,
    max_length=128,
    seeds=(0,),
    suites=tuple(s for s in _suites(2, 1, 2, 8, (2,)) if s.name not in CAPABILITY[1:]),
    eval_batch_size=4,
    heldout_limit=1,
    heldout_seed=0,
    analyze_examples=16,
    resamples=200,
)


# CALYREX late8th is compared with each, paired: label → name in words (LoRA at equal steps,
# ParallelMLP, and LoRA given CALYREX's wall time: the "equal steps and equal time")
BASELINES = {"lora": "LoRA", "parallel_mlp": "ParallelMLP", "lora-equal-time": "LoRA at equal time"}
CALYREX = "calyrex-late8th"
# the changes the comparison pointed to (issue 27, item 5): arm → (what it changes, in words;
# the LoRA arm it is compared with: LoRA as it was, or LoRA given the same change)
CHANGES = {
    "calyrex-equal-time": ("CALYREX at LoRA's time", "lora"),
    "calyrex-fewer-granted": ("CALYREX on fewer granted", "lora-fewer-granted"),
}
# DPO's gain over its SFT start, CALYREX's against LoRA's: the two plain DPO arms (the RPO arms'
# gains, one seed each, are reported beside them)
DPO_PAIR = ("calyrex-dpo", "lora-dpo")
