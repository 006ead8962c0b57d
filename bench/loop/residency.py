"""Where each LoRA adapter lived over a run: one panel per run (ours and the best peer).

A row per adapter (busiest at the top); a segment from each load of the adapter on a replica to
its eviction (or the run's end), coloured by replica. Replicas serving no adapters (other base
models) hold their one model for the whole run and are named in the title. Also the summary
figures the benchmark reports beside the plot: loads per run and per replica. A second row
shows each replica's base model over the run (:mod:`bench.loop.model_residency`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from bench.loop.model_residency import draw_models
from sim.simulator import SimResult


def residency_intervals(result: SimResult) -> list[tuple[str, int, float, float]]:
    """(adapter, replica, loaded at, evicted at or the run's end) for every residency."""
    open_at: dict[tuple[str, int], float] = {}
    out: list[tuple[str, int, float, float]] = []
    for e in result.adapter_events:
        key = (e.adapter, e.replica)
        if e.loaded:
            open_at[key] = e.time_s
        elif key in open_at:
            out.append((e.adapter, e.replica, open_at.pop(key), e.time_s))
    out += [(a, r, t0, result.end_s) for (a, r), t0 in open_at.items()]
    return out


def residency_figures(result: SimResult) -> dict[str, Any]:
    """Adapter loads in the run, per replica, and the adapters resident per replica on average."""
    loads = Counter(result.fleet.replicas[e.replica].id for e in result.adapter_events if e.loaded)
    span = max(result.end_s, 1e-9)
    held: dict[str, float] = {}
    for _, replica, t0, t1 in residency_intervals(result):
        rid = result.fleet.replicas[replica].id
        held[rid] = held.get(rid, 0.0) + (t1 - t0) / span
    return {
        "adapter_loads": sum(loads.values()),
        "adapter_loads_by_replica": dict(loads),
        "mean_resident_by_replica": {k: round(v, 2) for k, v in held.items()},
    }


def plot_residency(runs: Sequence[tuple[str, SimResult]], path: Path, *, title: str) -> Path:
    fig, axes = plt.subplots(
        2,
        len(runs),
        figsize=(7 * len(runs), 10),
        squeeze=False,
        gridspec_kw={"height_ratios": [7, 3]},
    )
    for col, (label, result) in enumerate(runs):
        ax = axes[0][col]
        intervals = residency_intervals(result)
        busy = Counter(r.adapter for r in result.requests if r.adapter)
        adapters = sorted(busy, key=lambda a: (-busy[a], a))
        row = {a: i for i, a in enumerate(adapters)}
        n = max(len(result.fleet.replicas), 1)
        cmap = plt.get_cmap("tab10")
        for adapter, replica, t0, t1 in intervals:
            if adapter not in row:
                continue
            y = row[adapter] + (replica + 0.5) / n - 0.5
            ax.plot([t0, t1], [y, y], color=cmap(replica % 10), lw=1.2)
        for replica, spec in enumerate(result.fleet.replicas):
            if spec.max_loras:
                ax.plot([], [], color=cmap(replica % 10), label=spec.id)
        ax.set_yticks(range(len(adapters)))
        ax.set_yticklabels(adapters, fontsize=5)
        ax.invert_yaxis()
        loads = sum(1 for e in result.adapter_events if e.loaded)
        ax.set_title(f"{label}: {loads} adapter loads", fontsize=10)
        ax.set_xlabel("simulated time (s)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6, loc="lower right")
        draw_models(axes[1][col], result, label)
    others = sorted({s.id for r in runs for s in r[1].fleet.replicas if not s.max_loras})
    suffix = ""
    if others:
        suffix = f" (no adapters: {', '.join(others)} hold their base model throughout)"
    fig.suptitle(title + suffix, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
