"""Evaluation suite: the paper's benchmarks on real data, lm-eval integration and reports.

``SUITES`` maps a suite name to its runner class, one line each (imported only when used).
"""

from __future__ import annotations

SUITES: dict[str, str] = {
    "ifeval": "calyrex.eval.ifeval:IFEval",
    "sysbench": "calyrex.eval.sysbench:SysBench",
    "msj": "calyrex.eval.msj:ManyShotJailbreak",
    "long_ifeval": "calyrex.eval.long_ifeval:LongIFEval",
    "tensortrust": "calyrex.eval.tensortrust:TensorTrust",
    "glaive_fc": "calyrex.eval.glaive:GlaiveFC",
    "mmlu": "calyrex.eval.harness_tasks:MMLU",
    "gsm8k": "calyrex.eval.harness_tasks:GSM8K",
    "squadv2": "calyrex.eval.harness_tasks:SQuADv2",
    "sys_ifeval": "calyrex.eval.sys_ifeval:SysIFEval",
    "struq": "calyrex.eval.struq:StruQ",
    "sep": "calyrex.eval.sep:SEP",
    "msj_hijack": "calyrex.eval.msj_hijack:ManyShotHijacking",
    "arc_easy": "calyrex.eval.local_tasks:ARCEasy",
    "arc_challenge": "calyrex.eval.local_tasks:ARCChallenge",
    "hellaswag": "calyrex.eval.local_tasks:HellaSwag",
    "piqa": "calyrex.eval.local_tasks:PIQA",
    "boolq": "calyrex.eval.local_tasks:BoolQ",
    "mmlu_local": "calyrex.eval.local_tasks:MMLULocal",
    "mix_access": "calyrex.eval.mix_access:MixAccess",
}

# what ``--suite paper`` runs: every benchmark the paper reports that calyrex can run (not the
# real-data suites of issue 27, from ``sys_ifeval`` on)
PAPER: tuple[str, ...] = (
    "ifeval",
    "sysbench",
    "msj",
    "long_ifeval",
    "tensortrust",
    "glaive_fc",
    "mmlu",
    "gsm8k",
    "squadv2",
)
