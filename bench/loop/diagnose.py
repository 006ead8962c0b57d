"""Why a target holds or not: queues, cache hits and per-replica load over time, side by side.

One column per run (ours and the best peer at the same load, or the failure runs): the top
panel shows every replica's requests in its engine (running + waiting, from the simulator's
samples, as its ``/metrics`` would show them), the bottom one the fleet's prefix-cache hit rate
per sample interval (cached prompt tokens / prompt tokens computed in that interval).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from sim.simulator import SimResult


def plot_diagnostics(
    runs: Sequence[tuple[str, SimResult]], path: Path, *, title: str, mark_s: float | None = None
) -> Path:
    fig, axes = plt.subplots(2, len(runs), figsize=(6 * len(runs), 6), squeeze=False)
    for col, (label, result) in enumerate(runs):
        ax_q, ax_h = axes[0][col], axes[1][col]
        samples = result.samples
        for replica, spec in enumerate(result.fleet.replicas):
            mine = [s for s in samples if s.replica == replica]
            t = [s.time_s for s in mine]
            ax_q.plot(t, [s.num_running + s.num_waiting for s in mine], lw=0.8, label=spec.id)
        times = sorted({s.time_s for s in samples})
        prompt = np.zeros(len(times))
        cached = np.zeros(len(times))
        index = {t: i for i, t in enumerate(times)}
        for s in samples:
            prompt[index[s.time_s]] += s.prompt_tokens
            cached[index[s.time_s]] += s.prefix_cache_hit_tokens
        d_prompt, d_cached = np.diff(prompt), np.diff(cached)
        hit = np.where(d_prompt > 0, d_cached / np.maximum(d_prompt, 1), np.nan)
        ax_h.plot(times[1:], hit, color="tab:green")
        ax_q.set_title(label, fontsize=10)
        ax_q.set_ylabel("requests in engine (running + waiting)")
        ax_h.set_ylabel("prefix-cache hit rate")
        ax_h.set_xlabel("simulated time (s)")
        ax_h.set_ylim(0, 1)
        for ax in (ax_q, ax_h):
            ax.grid(alpha=0.3)
            if mark_s is not None:
                ax.axvline(mark_s, color="red", ls="--", lw=0.8)
        if len(result.fleet.replicas) <= 12:
            ax_q.legend(fontsize=6, ncol=2)
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
