"""Retraining figures: the time ``placement retrain`` takes on N rows of telemetry (train a
candidate, score it and the champion on the same held-out rows, log to MLflow, promote or not),
and the time from a promotion to the running service's plan recording the new version.

Telemetry: Mooncake on 8 × H100 at load 0.8 through least-outstanding, simulated for each span
(:func:`training.telemetry.simulated.simulate_for_telemetry`). Everything is tracked into a
temporary MLflow SQLite store, never the project's own. The reload is measured through the
service as ``placement serve`` wires it (its planner's worker process included): a version is
promoted, and the clock runs until ``GET /v1/plan`` names it; the champion poll interval is
part of that time and is reported beside it.
"""

from __future__ import annotations

import math
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from placement.paths import repo_root
from placement.report import print_table, write_json
from training.tracking import CHAMPION, LATENCY_MODEL, TRACKING_URI_ENV, tracking_to

FLEET = repo_root() / "data" / "fleets" / "h100x8.yaml"
KEY = "bench-retrain-key-0123456789"


@dataclass(frozen=True, slots=True)
class RetrainBench:
    spans_s: tuple[float, ...] = (120.0, 480.0, 1920.0)  # simulated seconds of telemetry
    reloads: int = 3
    poll_s: float = 1.0

    @classmethod
    def quick(cls) -> RetrainBench:
        return cls(spans_s=(120.0,), reloads=1)


def _store(folder: Path, span_s: float) -> Path:
    from placement.domain.fleet import load_fleet
    from sim.workloads.registry import load_workload
    from training.telemetry.simulated import simulate_for_telemetry, telemetry_frames
    from training.telemetry.store import write_telemetry

    workload = load_workload("mooncake", seed=0, duration_s=span_s)
    result = simulate_for_telemetry(workload, load_fleet(FLEET), load=0.8, seed=0)
    requests, samples = telemetry_frames(result)
    write_telemetry(folder, requests, samples)
    return folder


def _retrain_runs(
    bench: RetrainBench, root: Path, say: Callable[[str], None]
) -> list[dict[str, Any]]:
    from training.retrain import retrain
    from training.train import load_frame

    runs: list[dict[str, Any]] = []
    for i, span in enumerate(bench.spans_s):
        store = _store(root / f"telemetry-{i}", span)
        rows = len(load_frame(store))
        for attempt in ("first", "again") if i == 0 else ("again",):
            say(f"retraining on {rows} rows ({span:g} s simulated, {attempt})")
            started = time.perf_counter()
            done = retrain(store, window_s=None, experiment="bench-retrain")
            seconds = time.perf_counter() - started
            runs.append(
                {
                    "span_s": span,
                    "rows": rows,
                    "run": "cold (no champion, MLflow store created)"
                    if attempt == "first" and i == 0
                    else "vs champion",
                    "seconds": seconds,
                    "promoted": done.decision.promoted,
                    "candidate_version": done.decision.candidate_version,
                }
            )
    return runs


def _reloads(bench: RetrainBench, root: Path, say: Callable[[str], None]) -> list[float]:
    from fastapi.testclient import TestClient
    from mlflow.tracking import MlflowClient

    from serving.api.security import hash_key
    from serving.api.settings import ApiKey, Settings
    from serving.wiring import build_app

    uri = os.environ[TRACKING_URI_ENV]
    registry = MlflowClient(tracking_uri=uri, registry_uri=uri)
    settings = Settings(
        environment="development",
        api_keys=(ApiKey(name="bench", digest=hash_key(KEY), scopes=("admin", "route")),),
        fleet=FLEET,
        plan_dir=root / "plans",
        solve_period_s=3600,
        solve_time_limit_s=5,
        scrape_interval_s=3600,
        champion_poll_s=bench.poll_s,
    )
    app = build_app(settings)  # the planner's real worker process
    for state in app.state.runtime.service.replicas.values():
        state.scraped_at = math.inf
    headers = {"X-API-Key": KEY}
    seconds: list[float] = []
    with TestClient(app) as client:
        for i in range(200):
            body = {
                "tenant": f"t{i % 4}",
                "model": "llama-3-8b",
                "request_class": "interactive",
                "block_hashes": [i % 20 + 1, 1000 + i],
                "input_tokens": 2000,
                "max_output_tokens": 200,
            }
            client.post("/v1/route", json=body, headers=headers)
        client.post("/v1/plan:solve", headers=headers)  # the worker warm, the plan in
        source = registry.get_model_version_by_alias(LATENCY_MODEL, CHAMPION)
        for _ in range(bench.reloads):
            version = registry.create_model_version(
                LATENCY_MODEL, str(source.source), run_id=source.run_id
            ).version
            wanted = f"models:/{LATENCY_MODEL}/{version} (@{CHAMPION})"
            started = time.monotonic()
            registry.set_registered_model_alias(LATENCY_MODEL, CHAMPION, str(version))
            while time.monotonic() - started < 300:
                plan = client.get("/v1/plan", headers=headers)
                if plan.status_code == 200 and plan.json()["capacity_source"] == wanted:
                    break
                time.sleep(0.05)
            else:
                raise RuntimeError(f"no plan from version {version} within 300 s")
            seconds.append(time.monotonic() - started)
            say(f"version {version} promoted → in the plan after {seconds[-1]:.2f} s")
    return seconds


def run_retrain_bench(
    bench: RetrainBench, out: Path | None, progress: Callable[[str], None] | None = None
) -> dict[str, Any]:
    say = progress or (lambda _m: None)
    with tempfile.TemporaryDirectory(prefix="placement-bench-retrain-") as tmp:
        root = Path(tmp)
        with tracking_to(f"sqlite:///{root / 'mlflow.db'}"):
            from training.tracking import mlflow_warnings_only

            mlflow_warnings_only()
            runs = _retrain_runs(bench, root, say)
            reloads = _reloads(bench, root, say)
    payload: dict[str, Any] = {
        "retrain": runs,
        "reload_s": reloads,
        "reload_median_s": statistics.median(reloads),
        "champion_poll_s": bench.poll_s,
    }
    print_table(
        "placement retrain",
        [
            {
                "rows": r["rows"],
                "run": r["run"],
                "seconds": round(r["seconds"], 1),
                "promoted": r["promoted"],
            }
            for r in runs
        ],
        ["rows", "run", "seconds", "promoted"],
    )
    print(
        f"promotion → plan with the new version: median {payload['reload_median_s']:.2f} s "
        f"({', '.join(f'{s:.2f}' for s in reloads)}; champion polled every {bench.poll_s:g} s)"
    )
    if out is not None:
        write_json(out, payload)
    return payload
