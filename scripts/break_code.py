"""Break the code on purpose, one break at a time, and count the tests that fail.

Each break replaces one line (or expression) of the span, mask, block, cache, adapter-file,
baseline, training-config, statistics, command-line, vLLM-plugin, scorer, server, training-mix,
training, analysis, study, evaluation-run, study-report, benchmark, adapter-layer or cases code
with a plausible bug (the last eleven in ``scripts/breaks_*.py``: eval, serve, mix, train,
analysis, study, runs, report, bench, library, cases); the guarding test files run on the
broken copy; the break is reverted (also when the run is stopped: SIGTERM, Ctrl-C), and a tree
whose ``src`` differs from its commit is refused. A break no test catches is a hole in the
tests (docs/testing.md, "Broken on purpose").

    git worktree add --detach /tmp/scratch HEAD
    python scripts/break_code.py --tree /tmp/scratch --out results/breaks/code.jsonl [NAME …]
    python scripts/break_code.py --table results/breaks/code.jsonl [--check]

``--tree`` is a scratch checkout (the breaks are written into it and reverted, one at a time);
the tests run with this interpreter and the tree's ``src`` first on ``PYTHONPATH``. ``--out`` is
appended to and resumed from (a break already recorded is skipped); ``NAME`` runs the breaks
whose description contains it; ``--tests "ARGS"`` runs those pytest arguments instead of each
break's own list (a second pass: a first pass's survivors on the tests written for them; the
record and the table name what ran). ``--table`` rewrites docs/testing.md's ``code-breaks``
block from the record; ``--check`` changes nothing and exits 1 when the block is stale.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from breaks_analysis import ANALYSIS_BREAKS, ANALYSIS_TESTS
from breaks_bench import BENCH_BREAKS, BENCH_TESTS
from breaks_cases import CASES_BREAKS, CASES_TESTS
from breaks_eval import EVAL, SCORERS
from breaks_library import LIBRARY_BREAKS, LIBRARY_TESTS
from breaks_mix import MIX_BREAKS, MIX_TESTS
from breaks_report import REPORT_BREAKS, REPORT_TESTS
from breaks_runs import RUN_BREAKS, RUN_TESTS
from breaks_serve import SERVE, SERVE_BREAKS
from breaks_study import STUDY_BREAKS, STUDY_TESTS
from breaks_train import TRAIN_BREAKS, TRAIN_TESTS
from doc_blocks import rewrite

ROOT = Path(__file__).resolve().parents[1]
CORE = [
    *(f"tests/test_{n}.py" for n in ("mask", "model", "core_v2", "cal_cache", "adapter_io")),
    *(f"tests/test_{n}.py" for n in ("templates", "span_paths", "placement", "variants", "chat")),
    *(f"tests/test_{n}.py" for n in ("adapter_contract", "model_contract", "prefill")),
]
COUNTS = ["tests/test_training.py", "-k", "parameter_counts or closed_form"]
POLICY = [
    "tests/test_serve.py",
    "tests/test_serve_errors.py",
    "-k",
    "system or developer or policy",
]

MASK, BLOCK, CACHE = "core/mask.py", "core/block.py", "core/cal_cache.py"
NAMES, IO, LAYER = "core/names.py", "core/adapter_io.py", "core/layer.py"
CHAT, MARKERS, POLICY_PY = "span/chat.py", "span/markers.py", "span/policy.py"
BASELINES = "adapters/baselines.py"
STATS = [
    *(f"tests/test_{n}.py" for n in ("intervals_over_seeds", "eval_report", "study_real")),
    *(f"tests/test_{n}.py" for n in ("eval_cases", "continuous_scores", "scorers")),
    *("-k", "not quick"),
]
INTERVALS, REPORT = "eval/intervals.py", "research/study/report.py"
CHECKS = [
    *("tests/test_training.py", "tests/test_cli_config.py", "tests/test_dpo.py", "-k"),
    "bad or refus or checked or invalid or unknown or error or config",
]
TRAIN_CONFIG = "training/config.py"
CLI = [
    *(f"tests/test_{n}.py" for n in ("cli_config", "chat_cli", "serve_cli", "layering")),
    *("tests/test_adapter_contract.py", "tests/test_study_real.py", "-k", "not quick"),
]
CLI_INIT, FIELDS = "cli/__init__.py", "cli/fields.py"
COMMAND, CHAT_CLI = "cli/command.py", "cli/chat.py"
# the vLLM plugin's: run with .venv-vllm's python; the fast files first and -x (a caught break
# stops at its first failure; the real-model test, 2 minutes, left to the lane)
VLLM = ["-x", "tests/test_span_paths.py", "tests/test_vllm_export.py"]
VLLM += ["tests/vllm_lane/test_vllm_plugin.py", "tests/vllm_lane/test_vllm_server.py"]
V_SPAN, V_BLOCK, V_MODELS = "vllm/span.py", "vllm/block.py", "vllm/models.py"
V_INPUTS, V_RENDERER, V_RUNNER = "vllm/inputs.py", "vllm/renderer.py", "vllm/runner.py"
V_EXPORT, V_INIT = "vllm/export.py", "vllm/__init__.py"
# (what the break does, file under src/calyrex, the text it replaces, the bug, the tests run)
BREAKS: list[tuple[str, str, str, str, list[str]]] = [
    ("mask: span keys visible to every query (no causal order inside the span)", MASK, "    return causal & key_valid[:, None, :]", "    return torch.ones_like(causal) & key_valid[:, None, :]", CORE),
    ("mask: padding keys visible (key_valid ignored)", MASK, "    return causal & key_valid[:, None, :]", "    return causal", CORE),
    ("mask: span gather indices reversed", MASK, "idx = order[:, :s_max]  # (B, S_max)", "idx = order[:, :s_max].flip(1)  # (B, S_max)", CORE),
    ("mask: a call's part of the system mask off by one token", MASK, "part = system_mask[:, past : past + length].bool()", "part = system_mask[:, past + 1 : past + 1 + length].bool()", CORE),
    ("mask: packed documents never detected", MASK, "    return bool(back.any())", "    return False", CORE),
    ("mask: host-gate span flags shifted by one position", MASK, "return flags.scatter_(1, pos, True)[:, :length]", "return flags.scatter_(1, pos, True)[:, 1 : length + 1]", CORE),
    ("block: W_O starts random (not 0)", BLOCK, "        nn.init.zeros_(self.cal_o_proj.weight)", "        nn.init.normal_(self.cal_o_proj.weight, std=cfg.init_std)", CORE),
    ("block: SwiGLU W_D starts random (not 0)", BLOCK, "        nn.init.zeros_(self.cal_down_proj.weight)", "        nn.init.normal_(self.cal_down_proj.weight, std=std)", CORE),
    ("block: rows that see no key get the attention output", BLOCK, "        h1 = torch.where(keep, h1, h)", "        h1 = h1", CORE),
    ("block: rows that see no key get the FFN", BLOCK, "torch.where(keep, h1 + self.cal_ffn(h1), h1)", "h1 + self.cal_ffn(h1)", CORE),
    ("block: cached keys joined after the new ones (keys and values out of step)", BLOCK, "return torch.cat([past[0].to(new[0].dtype), new[0]], 2), torch.cat(", "return torch.cat([new[0], past[0].to(new[0].dtype)], 2), torch.cat(", CORE),
    ("block: no attention mask at all", BLOCK, "attend = None if span.full else (span.visible | ~span.has_key[..., None])[:, None]", "attend = None", CORE),
    ("block: no zero gradient path for a batch without a span", BLOCK, "    return sum(p.sum() for p in params) * 0.0", "    return None", CORE),
    ("block: init_from_host leaves the biases", BLOCK, "                mine.bias.copy_(theirs.bias)", "                pass", CORE),
    ("block: init_from_host leaves the attention norm", BLOCK, "        self.cal_attn_norm.weight.copy_(host_layer.input_layernorm.weight)", "        pass", CORE),
    ("block: host gate biases the span keys instead of the others", BLOCK, "outside = (~span_keys).to(beta.dtype)", "outside = (span_keys).to(beta.dtype)", CORE),
    ("cache: span positions kept relative to the call (past not added)", CACHE, "self.key_pos = torch.cat([self.key_pos, idx + past], dim=1)", "self.key_pos = torch.cat([self.key_pos, idx], dim=1)", CORE),
    ("cache: a crop keeps the span keys past the cut", CACHE, "self.key_valid = self.key_valid & (self.key_pos < length)", "self.key_valid = self.key_valid", CORE),
    ("cache: a prefill on a reused cache does not start over", CACHE, "        if past == 0:", "        if past < 0:", CORE),
    ("cache: past_kv gives every cached key, also those of the call", CACHE, "return kv[0][:, :, : call.keys_before], kv[1][:, :, : call.keys_before]", "return kv", CORE),
    ("cache: shift moves the length but not the key positions", CACHE, "out.key_pos, out.length = self.key_pos + offset, self.length + offset", "out.key_pos, out.length = self.key_pos, self.length + offset", CORE),
    ("cache: decode steps unmasked even with padded spans", CACHE, "empty, full = not spans, spans and self.all_valid", "empty, full = not spans, spans", CORE),
    ("cache: repeat tiles the batch instead of interleaving rows", CACHE, "return self._mapped(lambda t: t.repeat_interleave(n, dim=0))", "return self._mapped(lambda t: t.repeat(n, *[1] * (t.dim() - 1)))", CORE),
    ("cache: cat of unequal spans still marked all valid", CACHE, "CALCache(key_pos, key_valid, kv, self.length, self.all_valid and not pad)", "CALCache(key_pos, key_valid, kv, self.length, self.all_valid)", CORE),
    ("layer: the call's new span K/V never appended to the cache", LAYER, "        if new is not None and store is not None:", "        if False:", CORE),
    ("names: adapter filter reads only the first name part", NAMES, 'return any(part.startswith(ADAPTER_PREFIX) for part in name.split("."))', "return name.startswith(ADAPTER_PREFIX)", CORE),
    ("names: host_name keeps the wrapper's part", NAMES, 'return ".".join(part for part in name.split(".") if part != HOST)', "return name", CORE),
    ("adapter io: missing tensors accepted (partial load)", IO, "    if set(given) != set(mine):", "    if set(given) - set(mine):", CORE),
    ("adapter io: sha256 never checked", IO, 'if config.get("weights_sha256") and file_sha256(file) != config["weights_sha256"]:', "if False:", CORE),
    ("adapter io: shapes never checked", IO, "wrong = [k for k, t in mine.items() if tuple(given[k].shape) != tuple(t.shape)]", "wrong = []", CORE),
    ("span: the first message is span whatever its role", CHAT, 'anchored = bool(conversation) and conversation[0]["role"] == "system"', "anchored = bool(conversation)", CORE),
    ("span: a token shared by the system prompt and other text is span", CHAT, "system = [int(anchored and o == {0}) for o in owners]", "system = [int(anchored and 0 in o) for o in owners]", CORE),
    ("span: special-token strings in user text not re-tokenised as plain text", CHAT, "    if not any(inside(h) for h in hits):", "    if True:", CORE),
    ("span fallback: left padding ignored (rows read from 0)", MARKERS, "first = 0 if attention_mask is None else int(attention_mask[b].long().argmax())", "first = 0", CORE),
    ("policy: a later system message keeps its role", POLICY_PY, '            role = "user"', "            pass", POLICY),
    ("policy: the client's system message kept beside the pinned one", POLICY_PY, "out = out[1:]  # overridden", "out = out  # overridden", POLICY),
    ("baselines: LoRA rank pattern gives no extra rank", BASELINES, "pattern[f\"^{name.replace('.', '[.]')}$\"] = rank + 1", "pattern[f\"^{name.replace('.', '[.]')}$\"] = rank", COUNTS),
    ("baselines: ParallelMLP width solved with 2·D·W", BASELINES, "width = max(1, round((per_block - hidden) / (3 * hidden)))", "width = max(1, round((per_block - hidden) / (2 * hidden)))", COUNTS),
    ("baselines: LoRA's extra-rank modules keep alpha 2r (alpha_pattern empty)", BASELINES, "alpha_pattern={k: 2 * v for k, v in pattern.items()},", "alpha_pattern={},", COUNTS),
    ("intervals: Wilson's interval with z for z² in its n² term", INTERVALS, "z * z / (4 * n * n)", "z / (4 * n * n)", STATS),
    ("intervals: a proportion's interval at z = 1 (68 %)", INTERVALS, "    lo, hi = wilson(k, n)", "    lo, hi = wilson(k, n, z=1.0)", STATS),
    ("intervals: the bootstrap's tails cut at 90 %", INTERVALS, "tail = (1 - level) / 2 * 100", "tail = (1 - level) * 100", STATS),
    ("intervals: the bootstrap never resamples (every draw the items as they are)", INTERVALS, "{g: v[rng.integers(0, len(v), len(v))] for g, v in groups.items()}", "{g: v for g, v in groups.items()}", STATS),
    ("intervals: a column pools its items instead of averaging its group means", INTERVALS, "return float(np.mean([v.mean() for v in groups.values()]))", "return float(np.mean(np.concatenate(list(groups.values()))))", STATS),
    ("intervals: paired differences taken b − a", INTERVALS, "return {k: (a[k][0], a[k][1] - b[k][1]) for k in common if a[k][0] == b[k][0]}", "return {k: (a[k][0], b[k][1] - a[k][1]) for k in common if a[k][0] == b[k][0]}", STATS),
    ("intervals: the seeds' sd divided by k, not k - 1", INTERVALS, "    sd = math.sqrt(sum((v - m) ** 2 for v in values) / (k - 1))", "    sd = math.sqrt(sum((v - m) ** 2 for v in values) / k)", STATS),
    ("intervals: Student's t read at k degrees of freedom, not k - 1", INTERVALS, "return m, T95.get(k - 1, Z95) * sd / math.sqrt(k)", "return m, T95.get(k, Z95) * sd / math.sqrt(k)", STATS),
    ("intervals: over seeds, the t-interval alone (the examples' own interval dropped)", INTERVALS, "    lo = min(m - half, sum(e[\"ci95\"][0] for e in entries) / k)", "    lo = m - half", STATS),
    ("intervals: two intervals separated when their lower ends are", INTERVALS, 'if a["ci95"][0] > b["ci95"][1]:', 'if a["ci95"][0] > b["ci95"][0]:', STATS),
    ("report: a verdict ignores whether lower is better", REPORT, "better = (lo > 0) == m.higher_is_better", "better = lo > 0", STATS),
    ("report: a verdict from an interval that holds 0", REPORT, "if math.isnan(lo) or lo <= 0 <= hi:", "if math.isnan(lo):", STATS),
    ("report: a verdict from a metric undefined for a model (not playing the game)", REPORT, 'cells = {k: v for k, v in shown.items() if v and "undefined" not in v}', "cells = {k: v for k, v in shown.items() if v}", STATS),
    ("report: a difference's se from one side only", REPORT, 'cell["se"] = math.sqrt(a.get("se", math.nan) ** 2 + b.get("se", math.nan) ** 2)', 'cell["se"] = a.get("se", math.nan)', STATS),
    ("report: a difference's interval ±1 se (not ±1.96)", REPORT, 'diff["ci95"] = [diff["value"] - Z95 * se, diff["value"] + Z95 * se]', 'diff["ci95"] = [diff["value"] - se, diff["value"] + se]', STATS),
    ("train config: a precision not of the choices accepted", TRAIN_CONFIG, "        if self.precision not in PRECISIONS:", "        if False:", CHECKS),
    ("train config: an on_truncate not of the choices accepted", TRAIN_CONFIG, "        if self.on_truncate not in ON_TRUNCATE:", "        if False:", CHECKS),
    ("train config: an objective not of the choices accepted", TRAIN_CONFIG, "        if self.objective not in OBJECTIVES:", "        if False:", CHECKS),
    ("train config: a DPO reference not of the choices accepted (taken as the base)", TRAIN_CONFIG, "        if self.reference not in REFERENCES:", "        if False:", CHECKS),
    ("train config: beta 0 or below accepted", TRAIN_CONFIG, "        if self.beta <= 0:", "        if False:", CHECKS),
    ("train config: DPO under FSDP accepted", TRAIN_CONFIG, '        if self.objective == "dpo" and self.fsdp:', "        if False:", CHECKS),
    ("train config: --patience without --eval-data accepted", TRAIN_CONFIG, "        if self.patience is not None and (self.patience < 1 or not self.eval_data):", "        if False:", CHECKS),
    ("train config: eval_steps 0 accepted", TRAIN_CONFIG, "        if self.eval_steps < 1:", "        if False:", CHECKS),
    ("train config: neither max_steps nor epochs accepted", TRAIN_CONFIG, "        if self.max_steps <= 0 and self.epochs <= 0:", "        if False:", CHECKS),
    ("train config: unknown YAML options accepted", TRAIN_CONFIG, "        if unknown:\n", "        if False:\n", CHECKS),
    ("cli: a positional-only parameter made a flag", CLI_INIT, "        if param.kind is inspect.Parameter.POSITIONAL_ONLY:\n            parser.add_argument(param.name, help=what, **kw)", "        if False:\n            parser.add_argument(param.name, help=what, **kw)", CLI),
    ("cli: a parameter without default is an optional flag", CLI_INIT, "parser.add_argument(flag, required=True, help=what, **kw)", "parser.add_argument(flag, required=False, help=what, **kw)", CLI),
    ("cli: a parameter's own default dropped", CLI_INIT, "parser.add_argument(flag, default=param.default, help=what, **kw)", "parser.add_argument(flag, help=what, **kw)", CLI),
    ("cli: a missing file escapes as a traceback (not exit 2)", CLI_INIT, "except (ValueError, FileNotFoundError) as err:", "except ValueError as err:", CLI),
    ("cli: a refused value exits 1 (not 2)", CLI_INIT, "        return 2\n    return int(result)", "        return 1\n    return int(result)", CLI),
    ("cli: a command's exit status dropped (always 0)", CLI_INIT, "return int(result) if isinstance(result, int) else 0", "return 0", CLI),
    ("cli: the research wing missing from --help", CLI_INIT, "research = [n for n in table if n not in COMMANDS]", "research = []", CLI),
    ("cli: the research wing's commands dropped from the table", CLI_INIT, "return {**COMMANDS, **plugins.table(plugins.COMMANDS)}", "return dict(COMMANDS)", CLI),
    ("cli: positional arguments not passed to the command", CLI_INIT, "result = fn(*positional, **args)", "result = fn(**args)", CLI),
    ("fields: a flag shared by two dataclasses goes to the last (not the first)", FIELDS, "owner = {f.name: i for i, c in reversed(list(enumerate(configs))) for f in flag_fields(c)}", "owner = {f.name: i for i, c in enumerate(configs) for f in flag_fields(c)}", CLI),
    ("fields: an unknown option passed over silently", FIELDS, "            raise TypeError(f\"unexpected option {key!r}\")", "            continue", CLI),
    ("fields: a base class's field docs override the subclass's", FIELDS, "for klass in reversed(cls.__mro__[:-1]):", "for klass in cls.__mro__[:-1]:", CLI),
    ("fields: an Args: entry's continuation lines dropped", FIELDS, "            docs[name] += \" \" + line.strip()", "            pass", CLI),
    ("fields: Args: entries read at any indent", FIELDS, "if len(line) - len(line.lstrip()) == 4 and colon and head.isidentifier():", "if colon and head.isidentifier():", CLI),
    ("fields: a ~role keeps its whole dotted path", FIELDS, "ROLE.sub(lambda m: m[2].rsplit(\".\", 1)[-1] if m[1] else m[2], text)", "ROLE.sub(lambda m: m[2], text)", CLI),
    ("fields: ``literal`` quotes left in help", FIELDS, "    return LITERAL.sub(r\"\\1\", text)", "    return text", CLI),
    ("fields: % in help not escaped", FIELDS, "    return text.replace(\"%\", \"%%\")", "    return text", CLI),
    ("fields: the default not appended to help", FIELDS, "        text = f\"{text} (default: {shown})\" if text else f\"default: {shown}\"", "        text = text", CLI),
    ("fields: the Args: block kept in the description", FIELDS, "\"\\n\".join(lines[: lines.index(\"Args:\")]).rstrip() if \"Args:\" in lines else doc", "doc", CLI),
    ("fields: a summary cut at \"e.g.\"", FIELDS, "(?<!\\be\\.g)(?<!\\bi\\.e)", "(?<!\\bi\\.e)", CLI),
    ("fields: a bool default shown as True/False", FIELDS, "        return \"on\" if value else \"off\"", "        return str(value)", CLI),
    ("fields: a JSON flag takes a list", FIELDS, "    if not isinstance(value, dict):\n        raise argparse.ArgumentTypeError", "    if False:\n        raise argparse.ArgumentTypeError", CLI),
    ("fields: Literal choices not enforced", FIELDS, "return {\"type\": type(values[0]), \"choices\": values}", "return {\"type\": type(values[0])}", CLI),
    ("fields: X | list[X] given one value stays a list", FIELDS, "convert = lambda v: v[0] if len(v) == 1 else v  # noqa: E731", "convert = lambda v: v  # noqa: E731", CLI),
    ("fields: a bool is --x only (no --no-x)", FIELDS, "        return {\"action\": argparse.BooleanOptionalAction}", "        return {\"action\": \"store_true\"}", CLI),
    ("fields: a tuple flag stored as a list", FIELDS, "return {**_scalar(args[0]), \"nargs\": nargs, \"action\": _Convert, \"convert\": tuple}", "return {**_scalar(args[0]), \"nargs\": nargs}", CLI),
    ("fields: a list flag not repeatable (the last one wins)", FIELDS, "    if kw.get(\"nargs\") == \"+\" and \"action\" not in kw and default is None:", "    if False:", CLI),
    ("fields: a registry's choices not enforced", FIELDS, "            kw[\"choices\"] = list(f.metadata[\"choices\"])", "            pass", CLI),
    ("fields: a field without default is an optional flag", FIELDS, "        if default is dataclasses.MISSING and required:", "        if False:", CLI),
    ("fields: flags not given passed with their defaults (a --config file loses)", FIELDS, "group.add_argument(flag, dest=f.name, default=argparse.SUPPRESS, help=text, **kw)", "group.add_argument(flag, dest=f.name, default=None if default is dataclasses.MISSING else default, help=text, **kw)", CLI),
    ("fields: a preset's values not shown as defaults", FIELDS, "default = _default(f) if config is cls else getattr(config, f.name)", "default = _default(f)", CLI),
    ("fields: a cli=False field made a flag", FIELDS, "if f.init and f.metadata.get(\"cli\") is not False]", "if f.init]", CLI),
    ("fields: a parameter named like a field not refused", FIELDS, "            raise TypeError(f\"{f.name!r} is both a parameter and a {cls.__name__} field\")", "            continue", CLI),
    ("fields: a field's metadata nargs/metavar ignored", FIELDS, "        kw.update({k: f.metadata[k] for k in (\"nargs\", \"metavar\") if k in f.metadata})", "        pass", CLI),
    ("fields: HF metadata help ignored", FIELDS, "return field_docs(_class(config)).get(f.name) or f.metadata.get(\"help\", \"\")", "return field_docs(_class(config)).get(f.name) or \"\"", CLI),
    ("fields: a non-dataclass accepted by options_from", FIELDS, "        if not dataclasses.is_dataclass(config):\n            raise TypeError", "        if False:\n            raise TypeError", CLI),
    ("inspect: the parameter count summed over names, not tensors", COMMAND, "sum(t.numel() for t in state.values())", "len(state)", CLI),
    ("placements: the layers printed for a fixed 28-layer model", COMMAND, "layers = placement_layers(name, num_layers)", "layers = placement_layers(name, 28)", CLI),
    ("chat: /reset drops the system prompt", CHAT_CLI, "conversation = conversation[:1] if system else []", "conversation = []", CLI),
    ("chat: the reply not kept in the history", CHAT_CLI, "        conversation.append({\"role\": \"assistant\", \"content\": answer})\n", "", CLI),
    ("chat: the reply decoded with the prompt", CHAT_CLI, "tok.decode(out[0, batch[\"input_ids\"].shape[1] :], skip_special_tokens=True)", "tok.decode(out[0], skip_special_tokens=True)", CLI),
    ("vllm: a system mask with a gap given bounds", V_SPAN, "    if len(marked) != end - start:\n        raise ValueError", "    if False:\n        raise ValueError", VLLM),
    ("vllm: a chat span the ids would read otherwise served", V_SPAN, "    if markers is not None and prompt_bounds(markers, span.ids) != span.bounds:", "    if False:", VLLM),
    ("vllm: chat messages skip the span policy", V_SPAN, "    conv = apply_span_policy(", "    conv = (lambda conv, policy: conv)(", VLLM),
    ("vllm: a carried span used for ids it was not made for", V_SPAN, "if isinstance(carried, ChatSpan) and carried.ids == tuple(ids):", "if isinstance(carried, ChatSpan):", VLLM),
    ("vllm: the renderer's carried span ignored (ids fallback always)", V_SPAN, "if isinstance(carried, ChatSpan) and carried.ids == tuple(ids):", "if False:", VLLM),
    ("vllm: the prefix-cache salt left without the span", V_SPAN, "    return f\"{salt or ''}|calyrex-span:{bounds[0]}-{bounds[1]}\"", "    return salt", VLLM),
    ("vllm: a client's cache salt dropped", V_SPAN, "    return f\"{salt or ''}|calyrex-span:{bounds[0]}-{bounds[1]}\"", "    return f\"|calyrex-span:{bounds[0]}-{bounds[1]}\"", VLLM),
    ("vllm: a client's extra_args span wins over the processor's", V_SPAN, "return {**(extra or {}), SPAN_ARG: [int(bounds[0]), int(bounds[1])]}", "return {SPAN_ARG: [int(bounds[0]), int(bounds[1])], **(extra or {})}", VLLM),
    ("vllm: a request without carried bounds served with no span", V_SPAN, "    if not (isinstance(value, (list, tuple)) and len(value) == 2):\n        raise RuntimeError(", "    if not (isinstance(value, (list, tuple)) and len(value) == 2):\n        return NO_SPAN\n        raise RuntimeError(", VLLM),
    ("vllm: a span's end token flagged", V_SPAN, "return (pos >= span[:, 0]) & (pos < span[:, 1]) & (index < qsl[-1])", "return (pos >= span[:, 0]) & (pos <= span[:, 1]) & (index < qsl[-1])", VLLM),
    ("vllm: padding tokens flagged", V_SPAN, "return (pos >= span[:, 0]) & (pos < span[:, 1]) & (index < qsl[-1])", "return (pos >= span[:, 0]) & (pos < span[:, 1])", VLLM),
    ("vllm: tokens mapped to the next request", V_SPAN, "request = torch.searchsorted(qsl[1:], index, right=True)", "request = torch.searchsorted(qsl[:-1], index, right=True)", VLLM),
    ("vllm: a ChatSpan outside its prompt accepted", V_SPAN, "        if not 0 <= start <= end <= len(self.ids):\n            raise ValueError", "        if False:\n            raise ValueError", VLLM),
    ("vllm block: the key bias too weak to hide non-span keys", V_BLOCK, "NEG = -30000.0", "NEG = -3.0", VLLM),
    ("vllm block: the query's bias channel off", V_BLOCK, "with_channel(block.queries(x), block.heads, dim, padded, 1.0)", "with_channel(block.queries(x), block.heads, dim, padded, 0.0)", VLLM),
    ("vllm block: the value channel always 1 (rows that see no key pass)", V_BLOCK, "with_channel(v, kv_heads, dim, padded, on.to(v.dtype))", "with_channel(v, kv_heads, dim, padded, 1.0)", VLLM),
    ("vllm block: every row kept (no identity without span keys)", V_BLOCK, "keep = a[:, 0, dim : dim + 1] > 0.5", "keep = a[:, 0, dim : dim + 1] > -1.0", VLLM),
    ("vllm block: softmax scaled by the padded head size", V_BLOCK, "            self.head_dim**-0.5,", "            self.padded**-0.5,", VLLM),
    ("vllm block: an fp8 KV cache accepted", V_BLOCK, "if cache_config is not None and str(cache_config.cache_dtype).startswith(\"fp8\"):", "if False:", VLLM),
    ("vllm block: a head size with no room for the channel", V_BLOCK, "fits = sorted(s for s in supported if s > head_dim)", "fits = sorted(s for s in supported if s >= head_dim)", VLLM),
    ("vllm model: the CAL layer reads the host output without its residual", V_MODELS, "x = h if r is None else h + r", "x = h", VLLM),
    ("vllm model: a step's flags outlive its forward", V_MODELS, "        _STEP_FLAGS.reset(token)", "        pass", VLLM),
    ("vllm model: a compiled forward accepted", V_MODELS, "        if not vllm_config.model_config.enforce_eager:\n            raise ValueError(", "        if False:\n            raise ValueError(", VLLM),
    ("vllm model: adapter tensors that do not match the blocks accepted", V_MODELS, "        if missing or unexpected:\n            raise ValueError(", "        if False:\n            raise ValueError(", VLLM),
    ("vllm model: the CAL weights not loaded", V_MODELS, "                param.copy_(value.to(param.dtype))", "                pass", VLLM),
    ("vllm inputs: the request's cache salt not set", V_INPUTS, "    request.cache_salt = span_salt(bounds, request.cache_salt)", "    pass", VLLM),
    ("vllm inputs: the renderer's span not taken", V_INPUTS, "carried = prompt.get(CHAT_SPAN) if isinstance(prompt, dict) else None", "carried = None", VLLM),
    ("vllm inputs: a streaming-input request accepted", V_INPUTS, "    if getattr(request, \"resumable\", False):\n        raise ValueError", "    if False:\n        raise ValueError", VLLM),
    ("vllm renderer: a request chat_template accepted", V_RENDERER, "        if kwargs.get(\"chat_template\"):\n            raise ValueError", "        if False:\n            raise ValueError", VLLM),
    ("vllm renderer: the span not copied into the engine input", V_RENDERER, "        engine_input[CHAT_SPAN] = prompt[CHAT_SPAN]", "        pass", VLLM),
    ("vllm renderer: add_generation_prompt ignored", V_RENDERER, "add_generation_prompt=kwargs.get(\"add_generation_prompt\", True)", "add_generation_prompt=True", VLLM),
    ("vllm runner: requests' spans in sorted (not batch) order", V_RUNNER, "for rid in runner.input_batch.req_ids[:num_reqs]:", "for rid in sorted(runner.input_batch.req_ids[:num_reqs]):", VLLM),
    ("vllm runner: query_start_loc shifted by one request", V_RUNNER, "self.query_start_loc.cpu[: n + 1]", "self.query_start_loc.cpu[1 : n + 2]", VLLM),
    ("vllm export: a LoRA adapter exported", V_EXPORT, "    if record[\"method\"] != \"calyrex\":\n        raise AdapterError(", "    if False:\n        raise AdapterError(", VLLM),
    ("vllm export: an adapter for another base exported", V_EXPORT, "    check_base(record, base, adapter_dir)", "    pass", VLLM),
    ("vllm export: a CALYREX variant exported", V_EXPORT, "    if variant:\n        raise AdapterError(", "    if False:\n        raise AdapterError(", VLLM),
    ("vllm export: the index not told of the adapter file", V_EXPORT, "            index[\"weight_map\"].update({k: ADAPTER_FILE for k in tensors})", "            pass", VLLM),
    ("vllm export: an existing --out overwritten", V_EXPORT, "    if target.exists():\n        raise ValueError", "    if False:\n        raise ValueError", VLLM),
    ("vllm: another vLLM minor version accepted", V_INIT, "    if version.split(\".\")[:2] != SUPPORTED.split(\".\"):", "    if version.split(\".\")[:1] != SUPPORTED.split(\".\")[:1]:", VLLM),
]  # fmt: skip
# the scorers', server's, mix's, training's, analysis' and study's (breaks_*.py)
BREAKS += EVAL + SERVE_BREAKS + MIX_BREAKS + TRAIN_BREAKS + ANALYSIS_BREAKS + STUDY_BREAKS
BREAKS += RUN_BREAKS + REPORT_BREAKS + BENCH_BREAKS + LIBRARY_BREAKS + CASES_BREAKS


def break_once(tree: Path, name: str, file: str, old: str, new: str, tests: list[str]) -> dict:
    """Apply one break in ``tree``, run its tests there, revert; the record of what failed."""
    path = tree / "src" / "calyrex" / file
    text = path.read_text(encoding="utf-8")
    if text.count(old) != 1:
        raise SystemExit(f"{file}: the text of {name!r} occurs {text.count(old)} times, not once")
    env = dict(os.environ, PYTHONPATH=str(tree / "src"))
    start = time.time()
    path.write_text(text.replace(old, new), encoding="utf-8")
    try:
        run = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--no-header"]
        done = subprocess.run([*run, *tests], cwd=tree, env=env, capture_output=True, text=True)
    finally:
        path.write_text(text, encoding="utf-8")
    tail = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-300:]
    failed = re.search(r"(\d+) failed", tail)
    errors = re.search(r"(\d+) error", tail)
    return {
        "break": name,
        "file": f"src/calyrex/{file}",
        "tests": " ".join(tests),
        "failed": int(failed.group(1)) if failed else 0,
        "errors": int(errors.group(1)) if errors else 0,
        "summary": tail,
        "seconds": round(time.time() - start),
    }


def read_records(path: Path) -> list[dict]:
    """The records of ``path`` (one JSON object a line), in the order they were written."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _stop(signum: int, frame: object) -> None:
    raise SystemExit(f"stopped by signal {signum}")  # so the break in hand is reverted


def run(tree: Path, out: Path, only: list[str], tests: list[str] | None = None) -> None:
    """Each break not yet in ``out`` (of ``only``'s, when given) on its own test list, or on
    ``tests`` (a second pass on the tests written for a first pass's survivors)."""
    dirty = subprocess.run(["git", "-C", str(tree), "status", "--porcelain", "--", "src"],
                           capture_output=True, text=True, check=True).stdout  # fmt: skip
    if dirty:
        raise SystemExit(f"{tree}/src differs from its commit (a break left behind?):\n{dirty}")
    signal.signal(signal.SIGTERM, _stop)
    done = {r["break"] for r in read_records(out)} if out.exists() else set()
    out.parent.mkdir(parents=True, exist_ok=True)
    for name, *rest in BREAKS:
        if name in done or (only and not any(o in name for o in only)):
            continue
        record = break_once(tree, name, *rest[:-1], tests or rest[-1])
        print(f"{record['failed']:3d} failed  {name}", flush=True)
        with out.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")


# how the table names a record's test list (the lists many breaks share)
NAMED = {
    " ".join(CORE): "the core's files",
    " ".join(STATS): "the statistics' files",
    " ".join(CHECKS): "the config checks' tests",
    " ".join(CLI): "the CLI's files",
    " ".join(VLLM): "the vLLM plugin's files (-x)",
    " ".join(SCORERS): "the scorers' files",
    " ".join(SERVE): "the server's files",
    " ".join(MIX_TESTS): "`test_mix.py`",
    " ".join(TRAIN_TESTS): "the training files (-x)",
    " ".join(ANALYSIS_TESTS): "`test_analysis.py`",
    " ".join(STUDY_TESTS): "the study's tests (not the quick study)",
    " ".join(RUN_TESTS): "the evaluation runs' files (-x)",
    " ".join(REPORT_TESTS): "the study's and report's tests (not the quick study)",
    " ".join(BENCH_TESTS): "`test_bench.py`",
    " ".join(LIBRARY_TESTS): "the adapter layer's files (-x)",
    " ".join(CASES_TESTS): "the cases' and per-item scores' files",
}


def _files(record: dict) -> str:
    return NAMED.get(record["tests"], f"`{record['tests']}`")


def table(records: list[dict]) -> str:
    """The markdown table of ``records``: each break, its test files, the tests that failed."""
    rows = [f"| {r['break']} | {_files(r)} | {r['failed'] + r['errors']} |" for r in records]
    return "\n".join(["| break | files run | tests failed |", "|---|---|---|", *rows])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", help="run only the breaks whose description holds one")
    parser.add_argument("--tree", type=Path, help="a scratch checkout to break")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "breaks" / "code.jsonl")
    parser.add_argument("--table", type=Path, help="write docs/testing.md's block from this record")
    parser.add_argument("--check", action="store_true", help="with --table: exit 1 when stale")
    parser.add_argument(
        "--tests", help="pytest arguments run instead of each break's own list (a second pass)"
    )
    args = parser.parse_args()
    if args.table:
        records = read_records(args.table)
        order = {b[0]: i for i, b in enumerate(BREAKS)}
        records.sort(key=lambda r: order[r["break"]])
        block = f"<!-- BEGIN code-breaks -->\n{table(records)}\n<!-- END code-breaks -->"
        page = ROOT / "docs" / "testing.md"
        return rewrite(
            {(page, "code-breaks"): block}, ROOT, args.check, "scripts/break_code.py --table"
        )
    if args.tree is None:
        parser.error("give --tree (a scratch checkout) or --table")
    if args.tree.resolve() == ROOT:
        parser.error("--tree must be a scratch checkout, not this one (breaks are written into it)")
    run(args.tree.resolve(), args.out, args.names, shlex.split(args.tests) if args.tests else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
