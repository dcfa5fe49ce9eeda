"""Capability benchmarks through lm-evaluation-harness on local files, no hub: ARC-Easy,
ARC-Challenge, HellaSwag, PIQA, BoolQ and MMLU (the forgetting check).

Each task is lm-eval's official task YAML, read from the installed package (prompt, choices,
target, metrics: ``acc`` and, where the official task has it, ``acc_norm``, each with its
stderr), with the dataset swapped for the local file (``dataset_path: json``/``csv`` plus
``data_files``) and a ``process_docs`` that maps the local rows to the hub schema the YAML
expects, then runs the YAML's own ``process_docs`` (HellaSwag's). Zero-shot; run by
:class:`calyrex.eval.harness_tasks.HarnessTask` (chat template, ``--system-prompt`` as the
system message, ``--limit N`` the first N documents of each task, see ``mmlu_local``).

Data (default ``<shared>/real/capability/<folder>``; ``--data NAME=DIR`` a folder in the same
layout):

* ``arc_easy`` / ``arc_challenge``: ``arc/arc_{easy,challenge}_test.jsonl`` (ARC's official
  jsonl: ``question.stem``, ``question.choices``, ``answerKey``; the added ``para`` field is
  ignored). 2,376 / 1,170 items (this copy's Challenge test lacks 2 of the official 1,172).
* ``hellaswag``: ``hellaswag/hellaswag_val_full.txt.bz2``, 10,042 validation items, 6 lines each
  (``activity_label: ctx``, gold label, 4 endings), converted once to a jsonl cache under
  ``$CALYREX_HOME/data``. The file's maker already dropped ``[header]``/``[step]`` markup, which
  lm-eval's preprocessing removes anyway, but merged ``ctx_a`` and ``ctx_b``: ``ctx_b`` (which
  lm-eval capitalises) is recovered as the lower-case fragment after the last sentence end
  (ActivityNet items; WikiHow items have an empty ``ctx_b``).
* ``piqa``: ``piqa/valid.jsonl`` + ``valid-labels.lst``, 1,838 items.
* ``boolq``: ``boolq/dev.jsonl`` (``answer`` true/false → SuperGLUE's ``label``), 3,270 items.
* ``mmlu_local``: ``mmlu/test/<subject>_test.csv`` (``question, choice0..3, answer``), 57
  subjects, 14,042 items: the official 57 subtasks in one group, ``acc`` weighted by size (the
  micro average, as lm-eval's ``mmlu``). ``--limit N`` takes the first ⌈N / 57⌉ questions of
  every subject (``n`` says how many ran). A separate suite from ``mmlu`` (the hub task) so a
  run never silently switches data source with the network.
"""

from __future__ import annotations

import bz2
import json
import re
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

from .bench import Context
from .data import DataFormatError, shared_data_dir
from .harness_tasks import HarnessTask

Doc = dict[str, Any]
SPLIT_KEYS = ("training_split", "validation_split", "test_split", "fewshot_split")


def official(yaml: str) -> dict[str, Any]:
    """lm-eval's own task config (includes and ``!function`` resolved)."""
    import lm_eval.tasks
    from lm_eval.tasks._yaml_loader import load_yaml  # what its TaskManager reads YAMLs with

    return load_yaml(Path(lm_eval.tasks.__file__).parent / yaml, resolve_func=True)


def _process(to_hub: Callable[[Doc, int], Doc] | None, after: Any, dataset: Any) -> Any:
    if to_hub is not None:
        dataset = dataset.map(to_hub, with_indices=True, remove_columns=dataset.column_names)
    return after(dataset) if after is not None else dataset


def local_config(
    name: str,
    yaml: str,
    split: str,
    data_files: str | Path,
    to_hub: Callable[[Doc, int], Doc] | None,
    builder: str = "json",
    **dataset_kwargs: Any,
) -> dict[str, Any]:
    """The official ``yaml`` task renamed ``name``, reading ``split`` from ``data_files``."""
    cfg = official(yaml)
    for key in ("tag", "group", "dataset_name", "fewshot_config", *SPLIT_KEYS):
        cfg.pop(key, None)
    after = cfg.pop("process_docs", None)
    return cfg | {
        "task": name,
        "dataset_path": builder,
        "dataset_kwargs": {"data_files": {split: str(data_files)}, **dataset_kwargs},
        f"{split}_split": split,
        "process_docs": partial(_process, to_hub, after),
    }


def arc_doc(row: Doc, index: int) -> Doc:
    """ARC's official jsonl row → ``allenai/ai2_arc``'s schema."""
    choices = row["question"]["choices"]
    return {
        "id": row["id"],
        "question": row["question"]["stem"],
        "choices": {"text": [c["text"] for c in choices], "label": [c["label"] for c in choices]},
        "answerKey": row["answerKey"],
    }


def boolq_doc(row: Doc, index: int) -> Doc:
    """BoolQ's jsonl row → SuperGLUE ``boolq``'s schema."""
    return {
        "question": row["question"],
        "passage": row["passage"],
        "idx": index,
        "label": int(row["answer"]),
    }


def piqa_doc(labels: list[int], row: Doc, index: int) -> Doc:
    return {"goal": row["goal"], "sol1": row["sol1"], "sol2": row["sol2"], "label": labels[index]}


def mmlu_doc(subject: str, row: Doc, index: int) -> Doc:
    """An MMLU CSV row → ``cais/mmlu``'s schema."""
    choices = [row[f"choice{j}"] for j in range(4)]
    return {
        "question": row["question"],
        "subject": subject,
        "choices": choices,
        "answer": int(row["answer"]),
    }


def hellaswag_items(text: str) -> list[Doc]:
    """The 6-lines-per-item text → ``Rowan/hellaswag``'s schema (see the module docstring)."""
    lines = text.rstrip("\n").split("\n")
    if len(lines) % 6:
        raise DataFormatError(f"HellaSwag text has {len(lines)} lines, not 6 per item")
    items = []
    for i in range(0, len(lines), 6):
        label, _, ctx = lines[i].partition(": ")
        split = re.fullmatch(r"(.*[.!?]) ([a-z][^.!?]*)", ctx, re.DOTALL)
        ctx_a, ctx_b = (split[1], split[2]) if split else (ctx, "")
        items.append(
            {
                "ind": i // 6,
                "activity_label": label,
                "ctx_a": ctx_a,
                "ctx_b": ctx_b,
                "ctx": ctx,
                "endings": lines[i + 2 : i + 6],
                "label": lines[i + 1],
            }
        )
    return items


def hellaswag_cache(source: Path) -> Path:
    """The jsonl conversion of ``source``, written once (atomically) under ``$CALYREX_HOME``."""
    from ..backbones.smollm2 import calyrex_home
    from ..core.adapter_io import atomic_write, file_sha256

    target = calyrex_home() / "data" / f"hellaswag_val-{file_sha256(source)[:12]}.jsonl"
    if not target.is_file():
        items = hellaswag_items(bz2.decompress(source.read_bytes()).decode("utf-8"))
        target.parent.mkdir(parents=True, exist_ok=True)
        text = "".join(json.dumps(it, ensure_ascii=False) + "\n" for it in items)
        atomic_write(target, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
    return target


def mmlu_subjects(folder: Path) -> list[str]:
    return sorted(p.name.removesuffix("_test.csv") for p in folder.glob("*_test.csv"))


class LocalTask(HarnessTask):
    folder: ClassVar[str]  # under <shared>/real/capability

    def config(self, root: Path) -> Any:
        """lm-eval's inline task config (or a ``Group`` of them) on the files under ``root``."""
        raise NotImplementedError

    def root(self, ctx: Context) -> Path:
        data = ctx.config.data.get(self.name)
        return Path(data) if data else shared_data_dir() / "real" / "capability" / self.folder

    def task_specs(self, ctx: Context) -> tuple[list[Any], Any]:
        from lm_eval.tasks import TaskManager

        return [self.config(self.root(ctx))], TaskManager(include_defaults=False)  # no scan


class ARCEasy(LocalTask):
    name = task = "arc_easy"
    folder = "arc"
    source = "allenai ARC-Easy test (official jsonl), lm-eval task arc_easy"

    def config(self, root: Path) -> dict[str, Any]:
        file = root / f"{self.name}_test.jsonl"
        return local_config(self.name, "arc/arc_easy.yaml", "test", file, arc_doc)


class ARCChallenge(ARCEasy):
    name = task = "arc_challenge"
    source = "allenai ARC-Challenge test (official jsonl), lm-eval task arc_challenge"


class HellaSwag(LocalTask):
    name = task = "hellaswag"
    folder = "hellaswag"
    source = "HellaSwag validation (klosax/hellaswag_text_data), lm-eval task hellaswag"

    def config(self, root: Path) -> dict[str, Any]:
        file = hellaswag_cache(root / "hellaswag_val_full.txt.bz2")
        return local_config(self.name, "hellaswag/hellaswag.yaml", "validation", file, None)


class PIQA(LocalTask):
    name = task = "piqa"
    folder = "piqa"
    source = "PIQA validation (ybisk.github.io), lm-eval task piqa"

    def config(self, root: Path) -> dict[str, Any]:
        labels = [int(x) for x in (root / "valid-labels.lst").read_text().split()]
        to_hub = partial(piqa_doc, labels)
        return local_config(self.name, "piqa/piqa.yaml", "validation", root / "valid.jsonl", to_hub)


class BoolQ(LocalTask):
    name = task = "boolq"
    folder = "boolq"
    source = "BoolQ dev, lm-eval task boolq (SuperGLUE)"

    def config(self, root: Path) -> dict[str, Any]:
        yaml = "super_glue/boolq/default.yaml"
        return local_config(self.name, yaml, "validation", root / "dev.jsonl", boolq_doc)


class MMLULocal(LocalTask):
    name = task = "mmlu_local"
    folder = "mmlu"
    source = "MMLU test CSVs (hendrycks), lm-eval's 57 mmlu subtasks in one group"

    def doc_limit(self, ctx: Context) -> int | None:
        """``--limit N``: the first ⌈N / 57⌉ questions of every subject (lm-eval's limit is per
        subtask), a stratified subset of about N questions."""
        limit, subjects = ctx.config.limit, len(mmlu_subjects(self.root(ctx) / "test"))
        return -(-limit // subjects) if limit and subjects else limit

    def config(self, root: Path) -> Any:
        """The 57 subtasks in one lm-eval ``Group`` (built here: lm-eval 0.4.13 passes an inline
        group dict's own keys on to its inline tasks, which then refuse them)."""
        from datasets import Features, Value
        from lm_eval.api.group import Group
        from lm_eval.api.task import ConfigurableTask

        columns = ("question", "choice0", "choice1", "choice2", "choice3", "answer")
        strings = Features({c: Value("string") for c in columns})
        subjects = mmlu_subjects(root / "test")
        if not subjects:
            raise FileNotFoundError(f"no MMLU *_test.csv files under {root / 'test'}")
        aggregate = [{"metric": "acc", "weight_by_size": True}]  # lm-eval's mmlu: micro average
        group = Group.from_config({"group": self.name, "aggregate_metric_list": aggregate})
        for s in subjects:
            cfg = local_config(
                f"mmlu_{s}",
                f"mmlu/default/mmlu_{s}.yaml",
                "test",
                root / "test" / f"{s}_test.csv",
                partial(mmlu_doc, s),
                builder="csv",
                features=strings,  # every field as text: no number or NA guessing
                keep_default_na=False,
            )
            group.add(ConfigurableTask(config=cfg))
        return group
