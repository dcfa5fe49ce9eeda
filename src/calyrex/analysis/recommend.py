"""From per-layer curves to a placement: the eighth-of-depth band where the effects concentrate.

Placement is a question of *where*, so each measure becomes a contrast over layers: how far a
layer's value rises above the measure's lowest layer, less two standard errors (over examples;
the widest binomial error over the held-out split for the probe), clipped at 0 and scaled to a
maximum of 1. A measure that is the same at every layer (a rule decodable everywhere, attention
uniform everywhere) or whose largest rise stays under its floor (:data:`FLOORS`, in its own
units) says nothing about where, and counts nowhere. Uniform attention is no reference for the
attention share: trained models put most of their mass on recent and sink tokens. Measures:

- ``system_prompt_effect``: the mean relative change of the residual;
- ``rule_probe``: held-out probe accuracy;
- ``system_attention``: the share of attention on the system span;
- ``patching_drop``: the drop of the rule-following response's log-likelihood.

The score of a layer is the mean of the profiles. The recommended band is the window of
``k = ceil(L/8) + 1`` consecutive layers (the width of the ``*8th`` presets) with the highest
mean score; on a tie the earliest, where the effects first reach their strength. The
recommended preset is the one whose layers overlap the band most (Jaccard).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..core.placement import PRESETS

# a smaller rise across layers is negligible: 1 % relative change of the residual, 5 points of
# probe accuracy, 1 point of attention mass, 0.01 nats per response token
FLOORS: dict[str, float] = {
    "system_prompt_effect": 0.01,
    "rule_probe": 0.05,
    "system_attention": 0.01,
    "patching_drop": 0.01,
}


def band_width(num_layers: int) -> int:
    return min(num_layers, math.ceil(num_layers / 8) + 1)


def _rise(mean: list[float], se: torch.Tensor) -> torch.Tensor:
    """Per layer: the rise above the lowest layer, less two standard errors, clipped at 0."""
    x = torch.tensor(mean).double()
    return (x - x.min() - 2 * se).clamp_min(0)


def profiles(curves: dict[str, Any], count: int) -> dict[str, list[float]]:
    """Per-layer contrast profiles of each measure, each scaled to a maximum of 1 (or all 0).

    ``count``: the number of examples the curves' means and standard deviations come from.
    """

    def se(name: str) -> torch.Tensor:
        return torch.tensor(curves[name]["std"]).double() / math.sqrt(max(count, 1))

    probe_se = torch.tensor(0.5 / math.sqrt(max(curves["rule_probe_test_size"], 1)))
    raw = {
        "system_prompt_effect": _rise(
            curves["system_prompt_effect"]["mean"], se("system_prompt_effect")
        ),
        "rule_probe": _rise(curves["rule_probe_accuracy"], probe_se),
        "system_attention": _rise(curves["system_attention"]["mean"], se("system_attention")),
        "patching_drop": _rise(curves["patching_drop"]["mean"], se("patching_drop")),
    }
    out = {}
    for name, x in raw.items():
        top = float(x.max())
        out[name] = [round(float(v), 6) for v in (x / top if top >= FLOORS[name] else 0 * x)]
    return out


def jaccard(a: list[int], b: list[int]) -> float:
    return len(set(a) & set(b)) / len(set(a) | set(b))


def best_band(score: list[float], width: int) -> list[int]:
    means = [sum(score[s : s + width]) / width for s in range(len(score) - width + 1)]
    top = max(means)
    start = next(s for s, m in enumerate(means) if m >= top - 1e-9)
    return list(range(start, start + width))


def onset(profile: list[float]) -> int | None:
    """First layer where a profile reaches half its maximum."""
    return next((i for i, v in enumerate(profile) if v >= 0.5), None)


def recommend(curves: dict[str, Any], num_layers: int, count: int) -> dict[str, Any]:
    """``recommended_placement``, ``recommended_layers`` and the evidence behind them."""
    prof = profiles(curves, count)
    score = [sum(p[i] for p in prof.values()) / len(prof) for i in range(num_layers)]
    if max(score) <= 0:
        return {
            "recommended_placement": None,
            "recommended_layers": None,
            "score": score,
            "evidence": {"reason": "no layer shows any system-prompt effect"},
        }
    band = best_band(score, band_width(num_layers))
    presets = {name: layers(num_layers) for name, layers in PRESETS.items()}
    overlaps = {name: jaccard(band, got) for name, got in presets.items() if got}  # every4 of 2: []
    preset = max(overlaps, key=lambda n: (overlaps[n], -len(presets[n])))
    evidence: dict[str, Any] = {"band_depth_share": round(len(band) / num_layers, 4)}
    for name, p in prof.items():
        total = sum(p)
        evidence[name] = {
            "band_mass_share": round(sum(p[i] for i in band) / total, 4) if total else 0.0,
            "peak_layer": max(range(num_layers), key=lambda i: p[i]) if total else None,
            "onset_layer": onset(p),
        }
    return {
        "recommended_placement": preset,
        "recommended_layers": band,
        "preset_overlap": round(overlaps[preset], 4),
        "score": [round(s, 6) for s in score],
        "profiles": prof,
        "evidence": evidence,
    }


def summary(result: dict[str, Any]) -> str:
    """The printed recommendation, with the evidence."""
    if result["recommended_placement"] is None:
        return f"no recommendation: {result['evidence']['reason']}"
    band = result["recommended_layers"]
    ev = result["evidence"]
    lines = [
        f"recommended placement: {result['recommended_placement']} "
        f"(band: layers {band[0]}-{band[-1]}, overlap {result['preset_overlap']:.2f})",
        f"the band is {ev['band_depth_share']:.0%} of the depth; of each measure it holds:",
    ]
    for name in ("system_prompt_effect", "rule_probe", "system_attention", "patching_drop"):
        e = ev[name]
        if e["peak_layer"] is None:
            lines.append(
                f"  {name:21s} flat over depth (rise under {FLOORS[name]} + 2 SE): no location"
            )
            continue
        lines.append(
            f"  {name:21s} {e['band_mass_share']:6.1%} of the mass, "
            f"peak at layer {e['peak_layer']}, half-max from layer {e['onset_layer']}"
        )
    return "\n".join(lines)
