"""The training path broken on purpose: the breaks ``scripts/break_code.py`` runs on the
Trainer's adapter-only checkpoints and resume, the metrics log, the run's clock, the best
adapter and patience, the training arguments, the chat data's reading and encoding, and DPO's
pairs, collator and free reference. Same shape as its ``BREAKS``."""

from __future__ import annotations

# -x: a caught break stops at its first failure (the study shares the cores)
TRAIN_TESTS = ["-x", "tests/test_training.py", "tests/test_dpo.py"]
TRAINER, RUN = "training/trainer.py", "training/run.py"
DATA, DPO = "training/data.py", "training/dpo.py"
# (what the break does, file under src/calyrex, the text it replaces, the bug, the tests run)
TRAIN_BREAKS: list[tuple[str, str, str, str, list[str]]] = [
    ("trainer: a checkpoint without its adapter", TRAINER, "            model.save_adapter(output_dir or self.args.output_dir, state)", "            pass", TRAIN_TESTS),
    ("trainer: a resumed run does not load its checkpoint's adapter", TRAINER, "        target.load_adapter_state_dict(read_adapter(Path(resume_from_checkpoint))[1])", "        pass", TRAIN_TESTS),
    ("trainer: a checkpoint copied out of staging, the staging left", TRAINER, "            os.replace(os.path.join(staging, name), final)", "            shutil.copytree(os.path.join(staging, name), final)", TRAIN_TESTS),
    ("trainer: old checkpoints never rotated out", TRAINER, "            rotate_checkpoints(run_dir, save_total_limit=self.args.save_total_limit)", "            pass", TRAIN_TESTS),
    ("metrics log: validation losses not written", TRAINER, 'not ({"loss", "eval_loss"} & set(logs))', 'not ({"loss"} & set(logs))', TRAIN_TESTS),
    ("metrics log: tokens/s counts every token since the start", TRAINER, "round((seen - self._last[1]) / (now - self._last[0]), 1)", "round(seen / (now - self._last[0]), 1)", TRAIN_TESTS),
    ("metrics log: the last step not logged", TRAINER, "        if state.global_step >= state.max_steps:", "        if False:", TRAIN_TESTS),
    ("clock: a resumed run starts its seconds from 0", TRAINER, "        stored = (kept.get(name) or {}) if state.global_step > 0 else {}", "        stored = {}", TRAIN_TESTS),
    ("clock: a checkpoint stores this attempt's seconds only", TRAINER, '"seconds": round(self.seconds, 2)', '"seconds": round(self.this_attempt, 2)', TRAIN_TESTS),
    ("best: the first evaluation kept whatever follows", TRAINER, '        if best is None or loss < best["eval_loss"]:', "        if best is None:", TRAIN_TESTS),
    ("best: earlier best adapters left on disk", TRAINER, "                    if old != where:", "                    if False:", TRAIN_TESTS),
    ("best: a resumed run forgets the best so far", TRAINER, "        self.best = read_best(self.out)", "        self.best = None", TRAIN_TESTS),
    ("patience: one evaluation more than asked", TRAINER, 'state.global_step - best["step"] >= self.patience * args.eval_steps', 'state.global_step - best["step"] > self.patience * args.eval_steps', TRAIN_TESTS),
    ("forget_best: best.json of an earlier attempt kept", TRAINER, "    (out / BEST).unlink(missing_ok=True)", "    pass", TRAIN_TESTS),
    ("trim_metrics: the checkpoint's own step dropped", TRAINER, 'json.loads(line)["step"] <= last_step', 'json.loads(line)["step"] < last_step', TRAIN_TESTS),
    ("run: a resumed run evaluates again at its start", RUN, "eval_on_start=bool(cfg.eval_data) and cfg.eval_on_start and not resuming", "eval_on_start=bool(cfg.eval_data) and cfg.eval_on_start", TRAIN_TESTS),
    ("run: --group-by-length ignored", RUN, 'train_sampling_strategy="group_by_length" if cfg.group_by_length else "random"', 'train_sampling_strategy="random"', TRAIN_TESTS),
    ("run: --weight-decay ignored", RUN, "        weight_decay=cfg.weight_decay,", "        weight_decay=0.0,", TRAIN_TESTS),
    ("run: --scheduler ignored", RUN, "        lr_scheduler_type=cfg.scheduler,", '        lr_scheduler_type="linear",', TRAIN_TESTS),
    ("run: --grad-accum ignored", RUN, "        gradient_accumulation_steps=cfg.grad_accum,", "        gradient_accumulation_steps=1,", TRAIN_TESTS),
    ("run: --warmup-ratio ignored", RUN, "        warmup_steps=cfg.warmup_ratio,", "        warmup_steps=0,", TRAIN_TESTS),
    ("run: tokens seen count the padding", RUN, 'include_num_input_tokens_seen="non_padding"', 'include_num_input_tokens_seen="all"', TRAIN_TESTS),
    ("run: an --init-adapter of another method accepted", RUN, "    if model.method != cfg.method:", "    if False:", TRAIN_TESTS),
    ("run: the start reference of a DPO run from SFT is the base", RUN, 'snapshot = cfg.reference == "start" and cfg.init_adapter is not None', "snapshot = False", TRAIN_TESTS),
    ("run: the span markers not recorded with the adapter", RUN, "    if model.uses_span:  # the input_ids-only fallback", "    if False:  # the input_ids-only fallback", TRAIN_TESTS),
    ("run: a resumed run keeps the log lines after its checkpoint", RUN, 'int(resume_from.rsplit("-", 1)[1]) if resume_from else -1', "10**9 if resume_from else -1", TRAIN_TESTS),
    ("run: a restarted run keeps an earlier attempt's best", RUN, "        if resume_from is None:  # a run from step 0", "        if False:  # a run from step 0", TRAIN_TESTS),
    ("run: OUT/adapter is the last step's, not the best", RUN, "        best = _load_best(model, out)", "        best = read_best(out)", TRAIN_TESTS),
    ("run: stopped_early true for a run that ran every step", RUN, "trainer.state.global_step < trainer.state.max_steps", "trainer.state.global_step <= trainer.state.max_steps", TRAIN_TESTS),
    ("run: a resumed run takes the precision asked, not its own", RUN, "    if resume_from and file.is_file():", "    if False:", TRAIN_TESTS),
    ("run: the summary's DPO rewards from the first log", RUN, "summary[\"rewards\"] = last_rewards(trainer.state.log_history)", "summary[\"rewards\"] = last_rewards(trainer.state.log_history[:1])", TRAIN_TESTS),
    ("data: ShareGPT's gpt turns read as the user's", DATA, '    "gpt": "assistant",', '    "gpt": "user",', TRAIN_TESTS),
    ("data: a pair's system field dropped", DATA, '[{"role": "system", "content": str(row["system"])}] if row.get("system") else []', "[]", TRAIN_TESTS),
    ("data: an instruction's input dropped", DATA, "f\"{row['instruction']}\\n\\n{extra}\" if str(extra).strip() else row[\"instruction\"]", "row[\"instruction\"]", TRAIN_TESTS),
    ("data: a source's #N ignored", DATA, "int(limit) if limit else None", "None", TRAIN_TESTS),
    ("data: #N keeps one row more", DATA, "        if limit is not None and i >= limit:", "        if limit is not None and i > limit:", TRAIN_TESTS),
    ("data: a second system turn added to a conversation that has one", DATA, '            if messages[0]["role"] != "system" and system_pool:', "            if system_pool:", TRAIN_TESTS),
    ("data: the system pool's draw not seeded", DATA, "    rng = random.Random(seed)\n    stats = stats or EncodeStats()\n    out = []", "    rng = random.Random()\n    stats = stats or EncodeStats()\n    out = []", TRAIN_TESTS),
    ("data: a row without assistant tokens after truncation kept", DATA, '        if all(label == IGNORE_INDEX for label in row["labels"]):', "        if False:", TRAIN_TESTS),
    ("data: a conversation without an assistant turn accepted", DATA, '            if not any(m["role"] == "assistant" for m in messages):', "            if False:", TRAIN_TESTS),
    ("data: kept counts the conversations read, not encoded", DATA, '    stats.kept = len(rows)\n    if not rows:\n        raise DataError(f"every conversation', '    stats.kept = len(conversations)\n    if not rows:\n        raise DataError(f"every conversation', TRAIN_TESTS),
    ("data: a cut system prompt kept", DATA, "        except SystemPromptTruncatedError as err:\n            if on_truncate == \"error\":", "        except KeyError as err:\n            if on_truncate == \"error\":", TRAIN_TESTS),
    ("dpo: a non-assistant message in chosen accepted", DPO, '        if any(m["role"] != "assistant" for m in pair[key]):', "        if False:", TRAIN_TESTS),
    ("dpo: a prompt ending with an assistant turn accepted", DPO, '    if pair["prompt"][-1]["role"] == "assistant":', "    if False:", TRAIN_TESTS),
    ("dpo: a prompt without a system turn gets none", DPO, '            if pair["prompt"][0]["role"] != "system" and system_pool:', "            if False:", TRAIN_TESTS),
    ("dpo: a system span past the shared prompt accepted", DPO, '    if any(head["system_mask"][n:]):', "    if False:", TRAIN_TESTS),
    ("dpo: the span as long as the prompt with its generation prompt", DPO, '        "system_mask": head["system_mask"][:n],', '        "system_mask": head["system_mask"],', TRAIN_TESTS),
    ("dpo: a pair whose system prompt is cut kept", DPO, "        if any(span[max_length:]):", "        if False:", TRAIN_TESTS),
    ("dpo: a prompt that fills max_length kept", DPO, '        if len(row["prompt_ids"]) >= max_length:', '        if len(row["prompt_ids"]) > max_length:', TRAIN_TESTS),
    ("dpo: the start snapshot never used (the base as reference)", DPO, "        if self.weights is not None:  # the snapshot", "        if False:  # the snapshot", TRAIN_TESTS),
    ("dpo: the reference with the adapters on", DPO, "        with self.policy.disable_adapter():\n            return self.policy(**kwargs)", "        with torch.no_grad():\n            return self.policy(**kwargs)", TRAIN_TESTS),
    ("dpo: rejected rows without the span", DPO, "torch.tensor(rows + rows, dtype=torch.long)", "torch.tensor(rows + [[0] * width] * len(rows), dtype=torch.long)", TRAIN_TESTS),
    ("dpo: the span padded with ones", DPO, "    rows = [r + [0] * (width - len(r)) for r in rows]", "    rows = [r + [1] * (width - len(r)) for r in rows]", TRAIN_TESTS),
    ("dpo: every position scored by the fused head on CPU", DPO, 'lambda d: d.type == "cpu" or chosen(d)', "chosen", TRAIN_TESTS),
    ("dpo: TRL's fused head left on the calyrex wrapper", DPO, '        if vars(model).pop("forward", None) is not None:', "        if False:", TRAIN_TESTS),
    ("dpo: --beta ignored", DPO, "        beta=cfg.beta,", "        beta=0.1,", TRAIN_TESTS),
    ("dpo: replies cut from their start", DPO, '        truncation_mode="keep_start",', '        truncation_mode="keep_end",', TRAIN_TESTS),
    ("dpo: the rebuilt reference forgets the start snapshot", DPO, "            self.ref_model = FreeReference(model, reference_weights)", "            self.ref_model = FreeReference(model, None)", TRAIN_TESTS),
    ("dpo: validation rewards' steps off by one", DPO, '        {"step": r["step"]} | {k: r[f"eval_{k}"]', '        {"step": r["step"] - 1} | {k: r[f"eval_{k}"]', TRAIN_TESTS),
    ("command: a finished run's process group left to the exit", "training/command.py", "    leave_process_group()  # the command's process", "    pass  # the command's process", TRAIN_TESTS),
]  # fmt: skip
