"""`calyrex ablate --quick`: one adapter per placement, well-formed table and plot."""

import json

from calyrex.cli import main


def test_quick_ablation_writes_well_formed_files(tmp_path):
    out = tmp_path / "ablate"
    assert main(["ablate", "--quick", "--presets", "late8th", "last", "--out", str(out)]) == 0
    results = json.loads((out / "ablation.json").read_text())
    rows = results["placements"]
    assert list(rows) == ["base", "late8th", "last"]
    assert rows["last"]["layers"] == [11] and rows["late8th"]["layers"] == [9, 10, 11]
    assert rows["last"]["trainable_params"] < rows["late8th"]["trainable_params"]
    for row in rows.values():
        assert 0.0 <= row["rule_adherence_single"] <= 1.0 and 0.0 <= row["task_accuracy"] <= 1.0
    table = (out / "ablation.md").read_text().splitlines()
    assert len(table) == 2 + 3 and table[0].startswith("| placement | layers |")
    assert (out / "ablation.png").stat().st_size > 1000
