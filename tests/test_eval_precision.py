"""benchmarks/eval_precision.py's comparison of two evaluations of one model: seconds, replies
identical by id, metrics side by side."""

import importlib.util
import json
from pathlib import Path

FILE = Path(__file__).parents[1] / "benchmarks" / "eval_precision.py"
spec = importlib.util.spec_from_file_location("eval_precision", FILE)
eval_precision = importlib.util.module_from_spec(spec)
spec.loader.exec_module(eval_precision)


def _suite(run, folder, seconds, replies, metrics):
    where = run / folder
    where.mkdir(parents=True)
    name = folder.removesuffix("-nosys")
    record = {"suite": name, "status": "ok", "seconds": seconds, "metrics": metrics}
    (where / f"{name}.json").write_text(json.dumps(record))
    rows = [{"id": k, "response": v} for k, v in replies.items()]
    (where / f"{name}.responses.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_replies_are_matched_by_id_and_only_common_suites_compared(tmp_path):
    ref, new = tmp_path / "fp32", tmp_path / "bf16"
    _suite(ref, "struq", 100.0, {"1": "a", "2": "b", "3": "c"}, {"asr": 0.5, "n": 3})
    _suite(new, "struq", 40.0, {"3": "c", "2": "B", "1": "a", "9": "z"}, {"asr": 0.25, "n": 3})
    _suite(ref, "sep", 10.0, {"x": "y"}, {"rate": 1.0})  # not run again: left out
    (rows,) = eval_precision.compare(ref, new)
    assert rows["suite"] == "struq" and rows["seconds"] == (100.0, 40.0)
    assert rows["replies"] == 3 and rows["identical"] == 2 / 3
    assert rows["metrics"] == {"asr": (0.5, 0.25), "n": (3, 3)}
