"""Which accelerators served which request class over a run: one panel per run and class (ours
and the best peer at the ratio load), the share of the class's requests each accelerator kind
served per time bin, stacked; and the figures beside it — per class and kind, the requests
served there and the share of them that met the class's SLO (``tiers``: interactive on the fast
accelerators, batch on the cheap ones, or mixed everywhere).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib
import numpy as np
import numpy.typing as npt

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from placement.domain.requests import RequestClass
from sim.metrics import request_table
from sim.simulator import SimResult

BINS = 20
REFUSED = "refused"  # requests no replica served (refused or failed before one)


def served_kinds(result: SimResult) -> npt.NDArray[np.str_]:
    """Per request, the accelerator kind of the replica that served it, else :data:`REFUSED`."""
    kinds = [r.accelerator.kind for r in result.fleet.replicas]
    out = [
        kinds[r.replica] if isinstance(r.replica, int) and 0 <= r.replica < len(kinds) else REFUSED
        for r in result.requests
    ]
    return np.asarray(out, dtype=np.str_)


def class_placement_figures(
    result: SimResult, classes: Mapping[str, RequestClass]
) -> dict[str, dict[str, dict[str, float]]]:
    """``{class: {kind: {"requests": n, "share": of the class, "attainment": met share}}}``."""
    t = request_table(result.requests, dict(classes))
    kind = served_kinds(result)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for c in sorted(set(t.request_class.tolist())):
        mine = t.request_class == c
        total = int(mine.sum())
        out[c] = {}
        for k in sorted(set(kind[mine].tolist())):
            here = mine & (kind == k)
            out[c][k] = {
                "requests": int(here.sum()),
                "share": float(here.sum()) / max(total, 1),
                "attainment": float(t.met[here].mean()),
            }
    return out


def plot_class_placement(
    runs: Sequence[tuple[str, SimResult]],
    classes: Mapping[str, RequestClass],
    path: Path,
    *,
    title: str,
) -> None:
    """A panel per (run, class): the share of the class's requests per accelerator kind over
    time (stacked; refused requests on top)."""
    names = sorted({r.request_class for _, res in runs for r in res.requests})
    kinds = sorted({r.accelerator.kind for _, res in runs for r in res.fleet.replicas})
    order = [*kinds, REFUSED]
    colour = {k: plt.get_cmap("tab10")(i % 10) for i, k in enumerate(order)}
    fig, axes = plt.subplots(
        len(runs), len(names), figsize=(5 * len(names), 3 * len(runs)), squeeze=False
    )
    for row, (label, result) in enumerate(runs):
        t = request_table(result.requests, dict(classes))
        kind = served_kinds(result)
        span = float(t.arrival.max()) if len(t.arrival) else 1.0
        edges = np.linspace(0.0, max(span, 1e-9), BINS + 1)
        mids = (edges[:-1] + edges[1:]) / 2
        for col, c in enumerate(names):
            ax = axes[row][col]
            mine = t.request_class == c
            counts = np.asarray(
                [np.histogram(t.arrival[mine & (kind == k)], edges)[0] for k in order], float
            )
            shares = counts / np.maximum(counts.sum(axis=0), 1.0)
            ax.stackplot(mids, shares, labels=order, colors=[colour[k] for k in order])
            ax.set_ylim(0, 1)
            ax.set_title(f"{label}: {c}", fontsize="small")
            ax.set_xlabel("arrival (s)")
            if col == 0:
                ax.set_ylabel("share of the class's requests")
    axes[0][-1].legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def several_classes_on_several_kinds(runs: Sequence[tuple[str, SimResult]]) -> bool:
    """Whether the placement of classes on accelerators is a question for these runs."""
    classes = {r.request_class for _, res in runs for r in res.requests}
    kinds = {r.accelerator.kind for _, res in runs for r in res.fleet.replicas}
    return len(classes) > 1 and len(kinds) > 1
