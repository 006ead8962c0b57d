"""``placement bench flow`` on a small slice: the rows and summary it writes, and the flow
queue against refusing at once on the same traffic."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bench.flow.cases import DEFAULT, Setting, choose, setting_of, simulate
from bench.flow.run import h100_fleet, refine
from bench.flow.workload import CLASSES, diurnal, overload
from placement.cli import app
from placement.paths import shared_data

pytestmark = pytest.mark.skipif(
    not (shared_data() / "traces/mooncake").exists(), reason="shared data missing"
)


def test_flow_control_beats_refusing_at_once_on_an_overloaded_slice() -> None:
    fleet = h100_fleet(2)
    traffic = overload(fleet, 2.0, start=0.0, end=0.06, backlog_s=60, seed=3)
    assert traffic.batch > 0 and traffic.interactive > 200
    flow = simulate(traffic, fleet, DEFAULT, seed=3, drain_s=30)
    refuse = simulate(traffic, fleet, Setting(queue="refuse"), seed=3, drain_s=30)
    assert flow["queued"] > 0 and refuse["queued"] == 0
    assert refuse["refused_at_door"] > 0 and refuse["deadline_misses"] == 0
    # the top band waits ahead of the others instead of being refused: more of it at SLO
    assert flow["attainment_premium"] > refuse["attainment_premium"] + 0.02
    assert flow["goodput_rps"] >= 0.97 * refuse["goodput_rps"]
    for row in (flow, refuse):
        assert row["batch_failed"] == 0  # batch work waits, it is never refused
        assert 0 <= row["attainment_premium"] <= row["attainment_premium_feasible"] <= 1
        assert set(row["goodput_share_by_tenant"]) == {"acme", "globex", "initech"}
    assert choose([flow, refuse]) is flow


def test_a_backfilled_queue_behind_the_route_path_is_a_row_of_its_own() -> None:
    fleet = h100_fleet(2)
    traffic = overload(fleet, 2.0, start=0.0, end=0.03, backlog_s=0, seed=3)
    setting = Setting(queue="fifo", band_headroom=0.4, backfill=4, router="placement")
    row = simulate(traffic, fleet, setting, seed=3, drain_s=30)
    assert row["setting"].endswith("/backfill4/placement") and setting_of(row) == setting
    assert row["queued"] > 0 and row["goodput_rps"] > 0
    plain = simulate(traffic, fleet, Setting(queue="fifo", band_headroom=0.4), seed=3, drain_s=30)
    assert row["goodput_rps"] != plain["goodput_rps"]  # it did route and queue differently


def test_the_day_runs_batch_on_idle_capacity() -> None:
    fleet = h100_fleet(1)
    day = diurnal(fleet, 1.0, backlog_s=300, seed=2, day_s=1800)
    arrivals = [r.arrival_s for r in day.workload.requests if r.request_class != "batch"]
    assert max(arrivals) < 1800 and day.batch > 10
    assert {r.request_class for r in day.workload.requests} == set(CLASSES)
    row = simulate(day, fleet, DEFAULT, seed=2, drain_s=600, window_s=1800)
    assert row["batch_failed"] == 0
    assert 0 < row["batch_done_in_window"] <= row["batch_done"] <= row["batch_requests"]


def test_refine_climbs_one_factor_at_a_time_from_the_best_row() -> None:
    def row(setting: Setting, top: float, goodput: float) -> dict[str, object]:
        return {**asdict(setting), "attainment_premium_feasible": top, "goodput_rps": goodput}

    rows = [
        row(DEFAULT, 0.96, 5.0),
        row(Setting(queue="edf"), 0.90, 6.0),  # more goodput, misses the top band
        row(Setting(slack=0.75), 0.97, 5.5),  # the best: holds the band, more goodput
        row(Setting(queue="refuse"), 0.99, 9.0),  # refusing at once is never chosen
    ]
    tried: list[Setting] = []

    def evaluate(s: Setting) -> dict[str, object]:
        tried.append(s)
        return row(s, 0.96, 7.0 if s.queue == "edf" and s.slack == 0.75 else 1.0)

    added = refine(rows, evaluate)
    # from slack 0.75: edf (kept, it ranks better); slack 1.0 with edf was already a row
    assert tried == [Setting(queue="edf", slack=0.75)]
    assert setting_of(choose(rows + added)) == Setting(queue="edf", slack=0.75)


def test_the_command_writes_rows_and_summary(tmp_path: Path) -> None:
    out = tmp_path / "flow.json"
    result = CliRunner().invoke(
        app,
        [
            "bench",
            "flow",
            "--quick",
            "--no-emulated",
            "--replicas",
            "2",
            "--day-replicas",
            "1",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(out.read_text())
    summary = payload["summary"]
    for key in (
        "interactive_attainment",
        "goodput_vs_refuse",
        "batch_done_in_window",
        "batch_lost",
    ):
        assert key in summary
    assert summary["batch_lost"] is None  # not measured without the emulated fleet
    versus = summary["goodput_vs_refuse"]
    assert 0 < versus["ratio"] < 10 and 0 <= summary["batch_done_in_window"] <= 1
    # it names its baseline: the chosen setting refusing at once behind the same admission
    admission = summary["chosen"].split("/")[2]
    assert versus["baseline"].startswith("refuse/") and f"({admission})" in versus["baseline"]
    assert set(summary["by_family"]) == {"gate", "cap", "prefill"}
    # the load is a multiple of the capacity at SLO measured on the head, not of nominal
    assert summary["capacity_at_slo_vs_nominal"] > 0
    by_router = summary["capacity_at_slo_vs_nominal_by_router"]
    assert set(by_router) == {"least_outstanding", "placement"} and by_router["placement"] > 0
    assert by_router["least_outstanding"] == summary["capacity_at_slo_vs_nominal"]
    assert summary["offered_vs_nominal"] == pytest.approx(
        summary["load"] * summary["capacity_at_slo_vs_nominal"]
    )
    assert {r["phase"] for r in payload["rows"]} == {"capacity", "head", "tail", "day"}
    assert out.with_suffix(".png").stat().st_size > 0
    bad = CliRunner().invoke(app, ["bench", "flow", "--load", "0", "--out", str(out)])
    assert bad.exit_code != 0 and "--load" in bad.output
