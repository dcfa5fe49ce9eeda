"""The analysis figure: one panel per measure over depth, eighths shaded, the band highlighted."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _shade(ax: Any, num_layers: int, band: list[int] | None) -> None:
    """Alternate eighths of depth in grey; the recommended band in orange."""
    for j in range(8):
        if j % 2 == 0:
            ax.axvspan(
                j * num_layers / 8 - 0.5,
                (j + 1) * num_layers / 8 - 0.5,
                color="0.92",
                lw=0,
                zorder=0,
            )
    if band:
        ax.axvspan(band[0] - 0.5, band[-1] + 0.5, color="tab:orange", alpha=0.18, lw=0, zorder=0)
    ax.set_xlim(-0.5, num_layers - 0.5)
    ax.set_xlabel("layer (block after it)")


def _curve(
    ax: Any, layers: list[int], stat: dict[str, list[float]], title: str, color: str
) -> None:
    mean, std = stat["mean"], stat["std"]
    ax.plot(layers, mean, marker="o", ms=3, color=color)
    ax.fill_between(
        layers,
        [m - s for m, s in zip(mean, std, strict=True)],
        [m + s for m, s in zip(mean, std, strict=True)],
        color=color,
        alpha=0.2,
    )
    ax.set_title(title, fontsize=10)


def _blocks(ax: Any, blocks: dict[str, Any] | None) -> None:
    if not blocks:
        ax.text(0.5, 0.5, "no adapter given", ha="center", va="center", transform=ax.transAxes)
        ax.set_title("adapter blocks", fontsize=10)
        return
    _curve(ax, blocks["layers"], blocks["relative_output_norm"], "adapter blocks", "tab:red")
    ax.set_ylabel("relative output norm", color="tab:red")
    if blocks.get("attention_entropy_normalized"):
        twin = ax.twinx()
        twin.plot(
            blocks["layers"],
            blocks["attention_entropy_normalized"]["mean"],
            marker="s",
            ms=3,
            color="tab:blue",
        )
        twin.set_ylabel("span attention entropy / log|S|", color="tab:blue")
        twin.set_ylim(0, 1.05)


def plot_analysis(result: dict[str, Any], path: str | Path, title: str = "") -> Path:
    """Write the figure of an ``analyze_model`` result to ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    c, n = result["curves"], result["num_layers"]
    layers = list(range(n))
    band = result.get("recommended_layers")
    fig, axes = plt.subplots(2, 3, figsize=(14, 7.5))
    ax = axes.flat
    _curve(
        ax[0],
        layers,
        c["system_prompt_effect"],
        "system-prompt effect (relative change)",
        "tab:blue",
    )
    ax[1].plot(layers, c["rule_probe_accuracy"], marker="o", ms=3, color="tab:green")
    ax[1].axhline(c["rule_probe_chance"], ls="--", color="0.4", label="chance")
    ax[1].set_ylim(0, 1.05)
    ax[1].set_title("rule probe accuracy (held out)", fontsize=10)
    _curve(ax[2], layers, c["system_attention"], "attention share on the system span", "tab:purple")
    ax[2].axhline(c["system_attention_uniform"], ls="--", color="0.4", label="uniform attention")
    _curve(
        ax[3],
        layers,
        c["patching_drop"],
        "patching: drop of response log-lik (nats/token)",
        "tab:brown",
    )
    ax[3].axhline(0, color="0.4", lw=0.8)
    ax[4].bar(layers, c["score"], color="tab:orange")
    ax[4].set_title("combined score", fontsize=10)
    _blocks(ax[5], result.get("blocks"))
    for a in ax:
        _shade(a, n, band)
    for a in (ax[1], ax[2]):
        a.legend(fontsize=8, loc="best")
    rec = result.get("recommended_placement") or "none"
    fig.suptitle(f"{title}  recommended: {rec}  (grey: eighths of depth; orange: band)".strip())
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
