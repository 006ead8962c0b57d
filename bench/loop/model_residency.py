"""Which base model each replica held over a run, from the simulator's swap events.

A replica holds its fleet-file model from the start; a swap (:mod:`sim.model_swap`) shows as
its drain and its load (serving nothing new), then the new model until the next swap or the
run's end.
"""

from __future__ import annotations

from typing import Any

from matplotlib.axes import Axes
from matplotlib.patches import Patch

from sim.simulator import SimResult

DRAINING = "(draining)"
LOADING = "(loading)"


def model_intervals(result: SimResult) -> list[tuple[int, str, float, float]]:
    """(replica, model or :data:`DRAINING` / :data:`LOADING`, from, to) covering every replica
    from 0 to the run's end."""
    state = {i: (spec.model.name, 0.0) for i, spec in enumerate(result.fleet.replicas)}
    out: list[tuple[int, str, float, float]] = []
    for e in sorted(result.model_events, key=lambda e: (e.time_s, e.replica)):
        held, since = state[e.replica]
        out.append((e.replica, held, since, e.time_s))
        now = {"drain": DRAINING, "load": LOADING, "serve": e.model}[e.stage]
        state[e.replica] = (now, e.time_s)
    end = max(result.end_s, max((t for _, (_, t) in state.items()), default=0.0))
    out += [(i, held, since, end) for i, (held, since) in state.items()]
    return sorted((iv for iv in out if iv[3] > iv[2]), key=lambda iv: (iv[0], iv[2]))


def model_figures(result: SimResult) -> dict[str, Any]:
    """Swaps started and finished in the run, and each model's replica-seconds served."""
    held: dict[str, float] = {}
    for _, model, t0, t1 in model_intervals(result):
        held[model] = held.get(model, 0.0) + (t1 - t0)
    return {
        "swaps": sum(1 for e in result.model_events if e.stage == "drain"),
        "swaps_done": sum(1 for e in result.model_events if e.stage == "serve"),
        "replica_seconds": {k: round(v, 1) for k, v in sorted(held.items())},
    }


def draw_models(ax: Axes, result: SimResult, label: str) -> None:
    """One band per replica, coloured by the model it held (grey: draining, black: loading)."""
    intervals = model_intervals(result)
    models = sorted({m for _, m, _, _ in intervals if m not in (DRAINING, LOADING)})
    colours = {m: f"C{i}" for i, m in enumerate(models)}
    colours[DRAINING] = "0.7"
    colours[LOADING] = "k"
    for replica, model, t0, t1 in intervals:
        ax.barh(replica, t1 - t0, left=t0, height=0.8, color=colours[model])
    handles = [Patch(color=colour, label=name) for name, colour in colours.items()]
    ids = [s.id for s in result.fleet.replicas]
    ax.set_yticks(range(len(ids)))
    ax.set_yticklabels(ids, fontsize=6)
    ax.invert_yaxis()
    swaps = model_figures(result)["swaps"]
    ax.set_title(f"{label}: base model per replica, {swaps} swaps", fontsize=10)
    ax.set_xlabel("simulated time (s)")
    ax.legend(handles=handles, fontsize=6, loc="lower right")
