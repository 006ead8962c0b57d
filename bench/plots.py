"""Plots for benchmark reports (matplotlib, headless)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def plot_goodput_curves(runs: Sequence[dict[str, Any]], path: Path, *, title: str) -> Path:
    """Goodput at SLO and p99 TTFT against load, one line per policy."""
    by_policy: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in runs:
        by_policy[str(r["policy"])].append(r)
    fig, (ax_g, ax_t) = plt.subplots(1, 2, figsize=(12, 4.5))
    for policy, unsorted in sorted(by_policy.items()):
        rows = sorted(unsorted, key=lambda r: float(r["load"]))
        loads = [float(r["load"]) for r in rows]
        ax_g.plot(loads, [float(r["goodput_rps"]) for r in rows], marker="o", label=policy)
        ax_t.plot(loads, [float(r["ttft_p99_s"]) for r in rows], marker="o", label=policy)
    ax_g.set_xlabel("offered load (× nominal fleet capacity)")
    ax_g.set_ylabel("goodput at SLO (requests/s)")
    ax_g.grid(alpha=0.3)
    ax_t.set_xlabel("offered load (× nominal fleet capacity)")
    ax_t.set_ylabel("p99 TTFT (s)")
    ax_t.set_yscale("log")
    ax_t.grid(alpha=0.3)
    ax_g.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
