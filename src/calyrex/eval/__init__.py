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
}

# what ``--suite paper`` runs: every benchmark the paper reports that calyrex can run
PAPER: tuple[str, ...] = tuple(SUITES)
