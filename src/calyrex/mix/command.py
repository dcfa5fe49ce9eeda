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
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .access import ROTATIONS
from .leaks import BENCHMARK_FILES
from .preference import PREFERENCE_N, build_preference, preference_config
from .sft import MixConfig, build_sft
from .sources import real_dir, source_files

DEFAULT_N = {"sft": MixConfig().n, "preference": PREFERENCE_N}


def _sha256s(root: Path, files: list[Path]) -> dict[str, str]:
    from ..core.adapter_io import file_sha256

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
    from ..core.adapter_io import atomic_write

    def write(tmp: str) -> None:
        Path(tmp).write_text(text, encoding="utf-8")
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600

    atomic_write(path, write)


def mix(
    out: str,
    kind: str = "sft",
    n: int | None = None,
    seed: int = 0,
    access: str = "default",
    stats: bool = False,
) -> int:
    """Write a training mix from the real public data (shared/data/real) as JSONL.

    ``--kind sft``: OpenAI-messages rows (instruction / rule / injection / access-code examples
    with the instruction, rule or defence in the system turn); ``--kind preference``: TRL
    conversational preference rows (SecAlign injection pairs, Tensor Trust access-code pairs).
    Writes FILE.stats.json beside it (the recipe); ``--stats`` also prints that recipe.

    Args:
        access: the access-code dialogues' outcome rotation: ``default`` (a third "Access
            Granted") or ``fewer-granted`` (a sixth; another sixth refuses a foreign defence's
            rules pasted as the user's text). SFT only.
    """
    if kind not in DEFAULT_N:
        raise ValueError(f"--kind must be one of {sorted(DEFAULT_N)}, not {kind!r}")
    if access not in ROTATIONS:
        raise ValueError(f"--access must be one of {', '.join(ROTATIONS)}, not {access!r}")
    if kind != "sft" and access != "default":
        raise ValueError("--access sets the SFT mix's access dialogues; --kind preference has none")
    root = real_dir()
    n = DEFAULT_N[kind] if n is None else n
    if kind == "sft":
        config = MixConfig(n=n, seed=seed, access=access)
        rows = build_sft(root, config)
    else:
        config = preference_config(n, seed)
        rows = build_preference(root, config)
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    _write(path, text)
    record = recipe(rows, kind, config, root)
    record["sha256"] = hashlib.sha256(text.encode("utf-8")).hexdigest()  # of FILE.jsonl
    _write(path.with_suffix(".stats.json"), json.dumps(record, indent=2, ensure_ascii=False))
    print(f"calyrex mix: {len(rows)} {kind} rows → {path} (seed {seed})")
    for source, count in record["sources"].items():
        print(f"  source {source:20s} {count:6d}")
    for name, count in record["counts"].items():
        tags = ", ".join(f"{t} {c}" for t, c in record["tags"][name].items())
        print(f"  kind   {name:20s} {count:6d}  ({tags})")
    if stats:
        print(json.dumps(record, indent=2, ensure_ascii=False))
    return 0
