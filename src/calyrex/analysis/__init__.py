"""Mechanistic activation analysis: where a backbone keeps its system-prompt rules, by layer.

``analyze_model(model, tokenizer, examples)`` computes, per decoder layer, the system-prompt
effect on the residual at response positions, rule decodability by a held-out linear probe,
the attention share on the system span, and the log-likelihood drop under causal patching
(plus per-block output norm and span-attention entropy for a calyrex model), and recommends a
placement preset. ``analyze(model=..., out=...)`` is the ``calyrex analyze`` command.
"""

from .command import analyze, write_report
from .data import RULES, RuleExample, builtin_examples, load_examples, read_jsonl, write_jsonl
from .recommend import recommend, summary
from .run import AnalysisConfig, analyze_model

__all__ = [
    "RULES",
    "AnalysisConfig",
    "RuleExample",
    "analyze",
    "analyze_model",
    "builtin_examples",
    "load_examples",
    "read_jsonl",
    "recommend",
    "summary",
    "write_jsonl",
    "write_report",
]
