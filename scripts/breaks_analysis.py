"""The analysis broken on purpose: the breaks ``scripts/break_code.py`` runs on ``calyrex
analyze``'s streaming statistics, rule probe, residual capture and patching, block meter and
placement recommendation. Same shape as its ``BREAKS``."""

from __future__ import annotations

ANALYSIS_TESTS = ["tests/test_analysis.py"]
STAT, PROBE, CAPTURE = "analysis/stats.py", "analysis/probe.py", "analysis/capture.py"
BLOCKS, RECOMMEND, RUN = "analysis/blocks.py", "analysis/recommend.py", "analysis/run.py"
# (what the break does, file under src/calyrex, the text it replaces, the bug, the tests run)
ANALYSIS_BREAKS: list[tuple[str, str, str, str, list[str]]] = [
    ("stats: Welford's spread from the old mean", STAT, "        self._m2 += delta * (x - self.mean)", "        self._m2 += delta * delta", ANALYSIS_TESTS),
    ("stats: the population spread, not the sample's", STAT, "        return (self._m2 / max(self.count - 1, 1)).sqrt()", "        return (self._m2 / max(self.count, 1)).sqrt()", ANALYSIS_TESTS),
    ("probe: a class of one held out", PROBE, "        n_test = min(max(n_test, 1 if len(idx) > 1 else 0), len(idx) - 1)", "        n_test = max(n_test, 1)", ANALYSIS_TESTS),
    ("probe: the split unseeded", PROBE, "    g = torch.Generator().manual_seed(seed)", "    g = torch.Generator()", ANALYSIS_TESTS),
    ("probe: features not standardised", PROBE, "    a, b = (x_train - mean) / std, (x_test - mean) / std", "    a, b = x_train, x_test", ANALYSIS_TESTS),
    ("probe: scored on its training split", PROBE, "        acc.append(round(float((pred == y[test]).double().mean()), 6))", "        acc.append(round(float((fit_predict(features[train, layer], y[train], features[train, layer], k, l2) == y[train]).double().mean()), 6))", ANALYSIS_TESTS),
    ("probe: chance is the minority share", PROBE, "    chance = float(torch.bincount(y[test], minlength=k).max()) / len(test)", "    chance = float(torch.bincount(y[test], minlength=k).min()) / len(test)", ANALYSIS_TESTS),
    ("capture: positions are the response tokens, not the tokens before them", CAPTURE, "        (targets - 1).to(device),", "        targets.to(device),", ANALYSIS_TESTS),
    ("capture: a run whose template dropped the system prompt accepted", CAPTURE, "    if not rule.system_mask.any():", "    if False:", ANALYSIS_TESTS),
    ("capture: the system share counts every key", CAPTURE, "    return rows[..., run.system_mask[0]].sum(-1).mean()", "    return rows.sum(-1).mean()", ANALYSIS_TESTS),
    ("capture: the uniform share over all positions, not the causal ones", CAPTURE, "    return float((seen / (run.positions + 1).float()).mean())", "    return float((seen / run.system_mask.shape[1]).mean())", ANALYSIS_TESTS),
    ("capture: the residual kept of layer 0 for every layer", CAPTURE, "    stacked = torch.stack([hidden[i] for i in range(len(hidden))])  # (L, n, D)", "    stacked = torch.stack([hidden[0] for i in range(len(hidden))])  # (L, n, D)", ANALYSIS_TESTS),
    ("capture: the patch written into every row", CAPTURE, "            h[rows[i], run.positions] = donor[i].to(h.dtype)", "            h[:, run.positions] = donor[i].to(h.dtype)", ANALYSIS_TESTS),
    ("capture: the attention implementation left eager", CAPTURE, "        if before not in (None, \"eager\"):\n            base.set_attn_implementation(before)", "        if False:\n            base.set_attn_implementation(before)", ANALYSIS_TESTS),
    ("blocks: the entropy over the keys of every span token", BLOCKS, "    return torch.softmax(scores.masked_fill(~visible, float(\"-inf\")), -1).nan_to_num(0.0)", "    return torch.softmax(scores, -1).nan_to_num(0.0)", ANALYSIS_TESTS),
    ("blocks: the normalised entropy over log(S), not the visible keys", BLOCKS, "    keys = visible.sum(-1).clamp_min(2).float().log()  # (n,)", "    keys = torch.tensor(float(visible.shape[-1])).clamp_min(2).log()  # (n,)", ANALYSIS_TESTS),
    ("blocks: the output norm absolute where relative is asked", BLOCKS, "                (norm / h[0, run.positions].float().norm(dim=-1)).mean()", "                norm.mean()", ANALYSIS_TESTS),
    ("recommend: the rise not less its standard errors", RECOMMEND, "    return (x - x.min() - 2 * se).clamp_min(0)", "    return (x - x.min()).clamp_min(0)", ANALYSIS_TESTS),
    ("recommend: a rise under its floor still locates", RECOMMEND, "(x / top if top >= FLOORS[name] else 0 * x)", "(x / top if top > 0 else 0 * x)", ANALYSIS_TESTS),
    ("recommend: a band one layer wider", RECOMMEND, "    return min(num_layers, math.ceil(num_layers / 8) + 1)", "    return min(num_layers, math.ceil(num_layers / 8) + 2)", ANALYSIS_TESTS),
    ("recommend: a tie goes to the latest band", RECOMMEND, "    start = next(s for s, m in enumerate(means) if m >= top - 1e-9)", "    start = max(s for s, m in enumerate(means) if m >= top - 1e-9)", ANALYSIS_TESTS),
    ("recommend: the preset of least overlap", RECOMMEND, "    preset = max(overlaps, key=lambda n: (overlaps[n], -len(presets[n])))", "    preset = min(overlaps, key=lambda n: (overlaps[n], -len(presets[n])))", ANALYSIS_TESTS),
    ("recommend: onset at a quarter of the maximum", RECOMMEND, "    return next((i for i, v in enumerate(profile) if v >= 0.5), None)", "    return next((i for i, v in enumerate(profile) if v >= 0.25), None)", ANALYSIS_TESTS),
    ("run: the effect not relative to the residual", RUN, "    acc.effect.add((diff.norm(dim=-1) / r.hidden.norm(dim=-1).clamp_min(1e-12)).mean(-1))", "    acc.effect.add(diff.norm(dim=-1).mean(-1))", ANALYSIS_TESTS),
    ("run: the probe reads the rule run, not what the rule put in", RUN, "    acc.features.append(diff.mean(1).cpu())  # (L, D), pooled over the response", "    acc.features.append(n.hidden.mean(1).cpu())  # (L, D), pooled over the response", ANALYSIS_TESTS),
    ("run: the last chunk of patched layers dropped", RUN, "            for s in range(0, num_layers, cfg.patch_chunk)", "            for s in range(0, num_layers - cfg.patch_chunk + 1, cfg.patch_chunk)", ANALYSIS_TESTS),
    ("run: the patching drop's sign turned", RUN, "    acc.drop.add(r.logprobs.mean() - patched.mean(-1))", "    acc.drop.add(patched.mean(-1) - r.logprobs.mean())", ANALYSIS_TESTS),
    ("run: --max-examples ignored", RUN, "    examples = list(examples)[: cfg.max_examples]", "    examples = list(examples)", ANALYSIS_TESTS),
    ("run: one rule accepted", RUN, "    if len({e.rule_id for e in examples}) < 2:", "    if len({e.rule_id for e in examples}) < 1:", ANALYSIS_TESTS),
    ("run: the model left in eval mode", RUN, "        model.train(was_training)", "        pass", ANALYSIS_TESTS),
]  # fmt: skip
