"""Retraining on a schedule: due after N new request records in the store (any process's) or N
hours; run off the event loop; a promotion handed on; a failure counted, never fatal; and once
for real in the worker process against an MLflow store holding a champion."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from registry_builders import Registry

from placement.errors import InputError
from placement.paths import repo_root
from serving.api.settings import load_settings
from serving.retraining import NewRecords, RetrainJob, RetrainOutcome, RetrainSchedule
from training.telemetry.store import read_requests, write_telemetry
from training.tracking import CHAMPION, LATENCY_MODEL, TRACKING_URI_ENV


def _add_records(store: Path, source: Path, n: int) -> None:
    """``n`` request rows of ``source`` appended to ``store`` as new files."""
    write_telemetry(store, read_requests(source).head(n), None)


def test_new_records_count_only_files_not_seen(tmp_path: Path, telemetry_store: Path) -> None:
    store = tmp_path / "store"
    _add_records(store, telemetry_store, 30)
    records = NewRecords(store)
    records.reset()
    assert records.count() == 0  # what was there at the start is not new
    _add_records(store, telemetry_store, 20)
    assert records.count() == 20
    _add_records(store, telemetry_store, 5)
    assert records.count() == 25
    records.reset()
    assert records.count() == 0


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _schedule(store: Path, **kwargs: object) -> tuple[RetrainSchedule, list[object]]:
    events: list[object] = []

    async def promoted() -> None:
        events.append("on_promoted")

    defaults: dict[str, object] = {
        "every_hours": None,
        "every_records": None,
        "window_hours": 24.0,
        "experiment": "test",
        "on_promoted": promoted,
        "observe": lambda result, seconds: events.append(result),
    }
    schedule = RetrainSchedule(store, **{**defaults, **kwargs})  # type: ignore[arg-type]
    return schedule, events


def test_due_after_n_new_records_then_counted_afresh(tmp_path: Path, telemetry_store: Path) -> None:
    store = tmp_path / "store"
    jobs: list[RetrainJob] = []

    def job(j: RetrainJob) -> RetrainOutcome:
        jobs.append(j)
        return RetrainOutcome("promoted", "better", 0.1, "2", "2")

    schedule, events = _schedule(store, every_records=50, run_job=job)

    async def scenario() -> None:
        await schedule.start()
        _add_records(store, telemetry_store, 40)
        assert await schedule.due() is None
        _add_records(store, telemetry_store, 10)
        reason = await schedule.due()
        assert reason == "50 new records"
        outcome = await schedule.run_once(reason)
        assert outcome.result == "promoted"
        assert await schedule.due() is None  # counted from the run

    asyncio.run(scenario())
    assert events == ["promoted", "on_promoted"]
    assert jobs == [RetrainJob(str(store), 24 * 3600.0, "test")]


def test_due_after_n_hours(tmp_path: Path) -> None:
    clock = _Clock()
    schedule, events = _schedule(
        tmp_path,
        every_hours=2.0,
        clock=clock,
        run_job=lambda j: RetrainOutcome("kept", "worse", 0.1, "3", "2"),
    )

    async def scenario() -> None:
        await schedule.start()
        clock.now = 7199.0
        assert await schedule.due() is None
        clock.now = 7200.0
        reason = await schedule.due()
        assert reason is not None and "2 h" in reason
        await schedule.run_once(reason)
        assert await schedule.due() is None

    asyncio.run(scenario())
    assert events == ["kept"]  # kept the champion: nothing to reload


def test_a_crashing_retraining_is_counted_as_failed_not_raised(tmp_path: Path) -> None:
    def crash(job: RetrainJob) -> RetrainOutcome:
        raise RuntimeError("disk full")

    schedule, events = _schedule(tmp_path, every_hours=1.0, run_job=crash)
    outcome = asyncio.run(schedule.run_once("test"))
    assert outcome.result == "failed" and "disk full" in outcome.reason
    assert events == ["failed"]


def test_a_schedule_without_a_telemetry_store_is_refused() -> None:
    with pytest.raises(InputError, match="PLACEMENT_TELEMETRY_DIR"):
        load_settings(environment="development", retrain_every_records=1000)


def test_a_scheduled_retraining_runs_in_the_worker_and_logs_both_versions(
    champion_registry: Registry,
    telemetry_store: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    database = tmp_path / "mlflow.db"  # a copy: version 1 is champion
    shutil.copy(champion_registry.uri.removeprefix("sqlite:///"), database)
    uri = f"sqlite:///{database}"
    monkeypatch.setenv(TRACKING_URI_ENV, uri)  # the spawned worker inherits it
    store = tmp_path / "store"
    schedule, events = _schedule(store, every_records=100, window_hours=None)

    async def scenario() -> RetrainOutcome:
        await schedule.start()
        shutil.copytree(telemetry_store, store, dirs_exist_ok=True)  # telemetry arrives
        reason = await schedule.due()
        assert reason is not None and reason.endswith("new records")
        return await schedule.run_once(reason)

    outcome = asyncio.run(scenario())
    assert outcome.result in ("promoted", "kept"), outcome.reason
    assert outcome.candidate_version == "2"
    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    champion = client.get_model_version_by_alias(LATENCY_MODEL, CHAMPION).version
    assert str(champion) == ("2" if outcome.result == "promoted" else "1")
    assert events[-1] == ("on_promoted" if outcome.result == "promoted" else "kept")
    # the candidate's run holds both versions' scores on the same held-out rows
    run = client.get_run(client.get_model_version(LATENCY_MODEL, "2").run_id)
    assert run.data.tags["promotion.champion_version"] == "1"
    for who in ("candidate", "champion"):
        assert run.data.metrics[f"promotion.{who}.ttft.mape_p50"] > 0


def test_the_service_schedules_retraining_from_its_settings(tmp_path: Path) -> None:
    from serving.wiring import build_app

    settings = load_settings(
        environment="development",
        fleet=repo_root() / "data" / "fleets" / "h100x8.yaml",
        plan_dir=tmp_path / "plans",
        telemetry_dir=tmp_path / "telemetry",
        retrain_every_records=500,
        retrain_window_hours=6,
    )
    runtime = build_app(settings).state.runtime
    schedule = runtime.retraining
    assert schedule is not None and schedule.every_records == 500 and schedule.every_s is None
    assert schedule.job == RetrainJob(
        str(tmp_path / "telemetry"), 6 * 3600.0, "placement-predictors"
    )
    assert runtime.scraper.sink is runtime.telemetry  # scraped samples go to the same store
    assert runtime.champion is not None  # a promotion re-solves at once
    unscheduled = load_settings(environment="development", telemetry_dir=tmp_path / "t")
    assert build_app(unscheduled).state.runtime.retraining is None
