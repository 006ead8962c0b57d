"""A telemetry store, an MLflow registry holding a trained, promoted champion and a plan solved
with it, built once per session for every test that needs them (training and capacity tables
from the predictor take seconds). Imported by name (tests/ is on sys.path); the fixtures are in
tests/conftest.py."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from typer.testing import Result

from placement.paths import repo_root, shared_data
from placement.plan import Plan
from training.tracking import tracking_to

# the width `placement train` prints its table at in the shared run (a common terminal)
TRAIN_COLUMNS = 80


def shared_traces_present() -> bool:
    return (shared_data() / "traces/mooncake").exists()


def make_store(folder: Path, *, duration_s: float = 120.0, load: float = 0.8) -> Path:
    """Two simulated minutes of Mooncake on 8 × H100 (≈340 requests), as a telemetry store."""
    from placement.domain.fleet import load_fleet
    from sim.workloads.registry import load_workload
    from training.telemetry.simulated import simulate_for_telemetry, telemetry_frames
    from training.telemetry.store import write_telemetry

    workload = load_workload("mooncake", seed=0, duration_s=duration_s)
    fleet = load_fleet(repo_root() / "data" / "fleets" / "h100x8.yaml")
    result = simulate_for_telemetry(workload, fleet, load=load, seed=0)
    requests, samples = telemetry_frames(result)
    write_telemetry(folder, requests, samples)
    return folder


@dataclass(frozen=True, slots=True)
class Registry:
    """A SQLite MLflow store where `placement train` registered version 1 of both predictors
    (experiment ``test``, with the Splitwise measurements) and version 1 was promoted."""

    uri: str
    train: Result  # what `placement train` printed, at TRAIN_COLUMNS columns


def train_and_promote(store: Path, database: Path) -> Registry:
    from typer.testing import CliRunner

    from placement.cli import app
    from training.promote import promote

    uri = f"sqlite:///{database}"
    with tracking_to(uri):
        outcome = CliRunner().invoke(
            app,
            [
                "train",
                "--telemetry",
                str(store),
                "--experiment",
                "test",
                "--measurements",
                "splitwise",
            ],
            env={"COLUMNS": str(TRAIN_COLUMNS)},
        )
        assert outcome.exit_code == 0, outcome.output
        assert promote("1").promoted
    return Registry(uri=uri, train=outcome)


PLAN_WINDOW_S = 20.0


def solve_with_champion(registry: Registry) -> Plan:
    """A plan solved for real for 20 s of Mooncake on 8 × H100, with the default capacity
    source (the registry's champion)."""
    from placement.domain.fleet import load_fleet
    from placement.solver import build_instance, solve_plan
    from sim.workloads.registry import load_workload

    fleet = load_fleet(repo_root() / "data" / "fleets" / "h100x8.yaml")
    workload = load_workload("mooncake", seed=0, duration_s=PLAN_WINDOW_S)
    with tracking_to(registry.uri):
        instance = build_instance(
            fleet, workload.requests, workload.tenants, workload.classes, window_s=PLAN_WINDOW_S
        )
    return solve_plan(instance, time_limit_s=5.0, version=1)
