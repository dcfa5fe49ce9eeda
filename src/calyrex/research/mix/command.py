"""``calyrex mix``: write a training mix from the real public data, with its recipe beside it.

``FILE.jsonl`` appears whole or not at all (written beside it, then renamed); ``FILE.stats.json``
records the recipe: the counts per kind and tag, the seed and configuration, and the sha256 of
every source file read and every benchmark file kept out.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from ...cli.fields import options_from
from .access import ROTATIONS
from .example import Example
from .leaks import BENCHMARK_FILES
from .preference import PREFERENCE_N, preference_config, preference_split
from .sft import MixConfig, build_split
from .sources import real_dir, source_files

DEFAULT_N = {"sft": MixConfig().n, "preference": PREFERENCE_N}
# the flags' choices, read from the registries (calyrex mix --help lists them)
Kind = Literal[tuple(DEFAULT_N)]
Rotation = Literal[tuple(ROTATIONS)]
SPLIT_KEYS = ("rows", "counts", "tags", "sources", "sha256")  # the validation split's, in stats


def _sha256s(root: Path, files: list[Path]) -> dict[str, str]:
    from ...core.adapter_io import file_sha256

    return {str(f.relative_to(root)): file_sha256(f) for f in files}


def recipe(rows: list[dict[str, Any]], kind: str, config: MixConfig, root: Path) -> dict[str, Any]:
    """The stats sidecar: counts per kind/tag and per source, configuration and file hashes."""
    by_kind: dict[str, Counter] = {}
    for row in rows:
        by_kind.setdefault(row["kind"], Counter())[row["tag"]] += 1
    sources = [f for files in source_files(root).values() for f in files]
    held_out = [root / name for names in BENCHMARK_FILES.values() for name in names]
    return {
        "kind": kind,
        "rows": len(rows),
        "seed": config.seed,
        "config": asdict(config),
        "counts": {k: sum(c.values()) for k, c in sorted(by_kind.items())},
        "tags": {k: dict(sorted(c.items())) for k, c in sorted(by_kind.items())},
        "sources": dict(sorted(Counter(row["source"] for row in rows).items())),
        "source_files": _sha256s(root, sources),
        "benchmark_files_kept_out": _sha256s(root, held_out),
    }


def _write(path: Path, text: str) -> None:
    """Write beside ``path`` and rename over it; readable by all, like any data file."""
    from ...core.adapter_io import atomic_write

    def write(tmp: str) -> None:
        Path(tmp).write_text(text, encoding="utf-8")
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600

    atomic_write(path, write)


def val_path(path: str | Path) -> Path:
    """Where ``calyrex mix --val`` writes the validation split of ``path`` (``FILE.val.jsonl``)."""
    path = Path(path)
    return path.with_name(f"{path.stem}.val{path.suffix}")


@dataclass
class MixOptions:
    """``calyrex mix``'s options (the recipe they make: :class:`MixConfig`)."""

    out: str
    """The JSONL file to write (FILE; its recipe goes to FILE.stats.json)."""
    kind: Kind = "sft"
    """sft (conversations) or preference (chosen/rejected pairs)."""
    n: int | None = None
    """Rows to write (default: the kind's recipe size)."""
    seed: int = 0
    """The draw of rows from each source."""
    access: Rotation = "default"
    """The access-code dialogues' outcome rotation: ``default`` (a third "Access Granted"),
    ``fewer-granted`` (a sixth; another sixth refuses a foreign defence's rules pasted as the
    user's text) or ``every-outcome`` (each defence with its wrong code, a hijack and an
    extraction refused and its right code granted, in a row)."""
    val: int = 0
    """Also hold out this many rows, same shares, as the validation split ``FILE.val.jsonl``;
    no defence or prompt is in both files."""
    balance_grants: bool = False
    """Preference only: repeat the right-code pairs until "Access Granted" is the preferred
    reply about as often as the rejected one (twice with ``every-outcome``), in both splits, so
    that DPO cannot win by lowering it everywhere."""
    stats: bool = False
    """Also print the recipe (the shares of each source)."""


@options_from(MixOptions)
def mix(**options: Any) -> int:
    """Write a training mix from the real public data (shared/data/real) as JSONL.

    ``--kind sft``: OpenAI-messages rows (instruction / rule / injection / access-code examples
    with the instruction, rule or defence in the system turn); ``--kind preference``: TRL
    conversational preference rows (SecAlign injection pairs, Tensor Trust access-code pairs).
    Writes FILE.stats.json beside it (the recipe); ``--stats`` also prints that recipe.
    """
    opts = MixOptions(**options)
    kind, seed, access, val = opts.kind, opts.seed, opts.access, opts.val
    if kind not in DEFAULT_N:
        raise ValueError(f"--kind must be one of {sorted(DEFAULT_N)}, not {kind!r}")
    if access not in ROTATIONS:
        raise ValueError(f"--access must be one of {', '.join(ROTATIONS)}, not {access!r}")
    if val < 0:
        raise ValueError(f"--val must be 0 or more, not {val}")
    root = real_dir()
    n = DEFAULT_N[kind] if opts.n is None else opts.n
    if kind == "sft":
        if opts.balance_grants:
            raise ValueError("--balance-grants balances preference pairs: give --kind preference")
        config, to_row = MixConfig(n=n, seed=seed, access=access, val=val), Example.sft_row
        parts = build_split(root, config)
    else:
        config = preference_config(n, seed, access, val, opts.balance_grants)
        to_row, parts = Example.preference_row, preference_split(root, config)
    path = Path(opts.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    files = {"train": path, "validation": val_path(path)} if val else {"train": path}
    record: dict[str, Any] = {}
    for part, file in reversed(files.items()):  # FILE.jsonl last: it marks the mix finished
        rows = [to_row(ex) for ex in parts[part]]
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        _write(file, text)
        record[part] = recipe(rows, kind, config, root)
        record[part]["sha256"] = hashlib.sha256(text.encode("utf-8")).hexdigest()
    stats_record = record["train"]
    if val:
        stats_record["validation"] = {k: record["validation"][k] for k in SPLIT_KEYS}
    _write(path.with_suffix(".stats.json"), json.dumps(stats_record, indent=2, ensure_ascii=False))
    for part, file in files.items():
        print(f"calyrex mix: {record[part]['rows']} {kind} rows → {file} (seed {seed}, {part})")
    for source, count in stats_record["sources"].items():
        print(f"  source {source:20s} {count:6d}")
    for name, count in stats_record["counts"].items():
        tags = ", ".join(f"{t} {c}" for t, c in stats_record["tags"][name].items())
        print(f"  kind   {name:20s} {count:6d}  ({tags})")
    if opts.stats:
        print(json.dumps(stats_record, indent=2, ensure_ascii=False))
    return 0
