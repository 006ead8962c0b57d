"""Step one of the loop: telemetry from the tuning window → trained predictors → capacity at SLO.

The tuning window is run through the incumbent router (least outstanding requests) at a few
loads, as a fleet in production would have been, sampling every replica each second. Its
request records and samples go to a telemetry store; :func:`training.train.train` fits the
latency quantile models on them, logs the run to MLflow and registers a new version of
``placement-latency``; the registered version is loaded back from the registry (not the
in-memory object) so the loop plans with exactly what a data scientist would promote. The
project's champion alias is left alone: the benchmark never promotes.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from models.capacity import DEFAULT_SLOS, Slo
from placement.domain.fleet import Fleet
from placement.plan.capacity_source import ROOFLINE_SOURCE
from placement.solver.capacity import TableCapacity
from sim.workloads.base import Workload
from training.telemetry.simulated import DEFAULT_START, simulate_for_telemetry, telemetry_frames

# The loads the tuning window is simulated at. Capacity at SLO is read at steady states from idle
# up (models.capacity), so the telemetry must hold each replica kind at a sustained light load
# too: with 0.6 / 1.0 / 1.4 alone, a lightly loaded row is a passing trough of a busy run, whose
# TPOT is that of the load that follows, and the L40S's learned capacity on kv-bound fell to
# 0.01–0.15 of what the engine sustains (bench/RESULTS.md, "Why the learned capacity at SLO of
# an L40S collapses").
TRAINING_LOADS = (0.3, 0.6, 1.0, 1.4)
LOOP_EXPERIMENT = "placement-loop"


@dataclass(frozen=True, slots=True, kw_only=True)
class Learned:
    capacity: TableCapacity
    model_uri: str
    heldout_metrics: dict[str, float]
    telemetry_rows: int


def roofline_capacity(slos: tuple[Slo, ...] = DEFAULT_SLOS) -> TableCapacity:
    """The ablation without learned predictors: capacity at SLO from the roofline prior."""
    return TableCapacity(None, ROOFLINE_SOURCE, slos=slos)


def fresh_telemetry(store: Path) -> Path:
    """The case's telemetry store under ``store``, emptied: a re-run simulates the same
    window again and must replace its records, not repeat them."""
    telemetry = store / "telemetry"
    if telemetry.exists():
        shutil.rmtree(telemetry)
    telemetry.mkdir(parents=True)
    return telemetry


def learn_capacity(
    tune: Workload,
    fleet: Fleet,
    store: Path,
    *,
    loads: Sequence[float] = TRAINING_LOADS,
    seed: int = 0,
    experiment: str = LOOP_EXPERIMENT,
    say: Callable[[str], None] = lambda _m: None,
    slos: tuple[Slo, ...] = DEFAULT_SLOS,
    less_slot_wait: bool = False,
) -> Learned:
    """Simulate ``tune`` at ``loads`` into a fresh telemetry store under ``store``, train,
    register, and return capacity at SLO (at levels ``slos``) from the registered model.
    ``less_slot_wait``: the TTFT trained on leaves out each request's wait for a LoRA slot
    (:func:`training.telemetry.simulated.telemetry_frames`), so the capacity is the replica's."""
    import mlflow

    from training.pyfunc import unwrap
    from training.telemetry.store import write_telemetry
    from training.train import train

    telemetry = fresh_telemetry(store)
    rows = 0
    for i, load in enumerate(loads):
        say(f"telemetry: {tune.name} on {fleet.name} at load {load}")
        result = simulate_for_telemetry(tune, fleet, load=load, seed=seed)
        # each load's run is dated a day apart, so the store's time split stays per run order
        requests, samples = telemetry_frames(
            result, start=DEFAULT_START + timedelta(days=i), less_slot_wait=less_slot_wait
        )
        write_telemetry(telemetry, requests, samples)
        rows += len(requests)
    say(f"training on {rows} request records (MLflow experiment {experiment!r})")
    trained = train(telemetry, experiment=experiment)
    uri = f"models:/placement-latency/{trained.latency_version}"
    predictor = unwrap(mlflow.pyfunc.load_model(uri))
    return Learned(
        capacity=TableCapacity(predictor, uri, slos=slos),
        model_uri=uri,
        heldout_metrics=dict(trained.metrics),
        telemetry_rows=rows,
    )
