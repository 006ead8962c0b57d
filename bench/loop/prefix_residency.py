"""Which replica holds which prefix groups over time: the prefixes each plan keeps warm (KV)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def plot_prefix_residency(solves: Sequence[dict[str, Any]], path: Path, *, title: str) -> bool:
    """One dot per (solve, group) at the solve's time, the group's row (groups in order of
    first residency, the largest first within a solve), coloured by the replica holding it
    (a group kept warm on several replicas has a dot per replica, side by side); the dot's
    area is the prefix's tokens. False (and no file) when no plan kept a prefix warm."""
    held = [(float(s["at_s"]), r) for s in solves for r in s.get("residency", ())]
    if not held:
        return False
    row: dict[int, int] = {}
    for _, (_, key, _tokens) in sorted(held, key=lambda h: (h[0], -h[1][2])):
        row.setdefault(int(key), len(row))
    replicas = sorted({r for _, (r, _, _) in held})
    colour = {r: plt.get_cmap("tab10")(i % 10) for i, r in enumerate(replicas)}
    span = max((t for t, _ in held), default=0.0) or 1.0
    fig, ax = plt.subplots(figsize=(10, 6))
    for i, replica in enumerate(replicas):
        pts = [(t, row[int(k)], tok) for t, (r, k, tok) in held if r == replica]
        ax.scatter(
            [t + (i - len(replicas) / 2) * span * 0.004 for t, _, _ in pts],
            [y for _, y, _ in pts],
            s=[max(tok / 2000.0, 2.0) for _, _, tok in pts],
            color=colour[replica],
            label=replica,
            alpha=0.8,
        )
    ax.set_xlabel("re-solve time (s of simulated time)")
    ax.set_ylabel("prefix group (order of first residency)")
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
