"""``placement bench e2e`` on a few seconds of the Mooncake slice: aiperf replays it through our
gateway (the live planner and the SLO gate on) and through the real sglang-router, and every
request lands and is measured."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from e2e_venv import e2e_venv

from bench.e2e import E2EOptions, run_e2e_bench

pytestmark = pytest.mark.slow


def test_requests_go_through_the_gateway_and_sglang_router_and_figures_come_out(
    tmp_path: Path,
) -> None:
    venv = e2e_venv()
    out = tmp_path / "e2e.json"
    payload = run_e2e_bench(
        E2EOptions(
            loads=(1.0,),
            duration_s=3.0,
            routers=("gateway", "sglang-router"),
            probe_rate=50.0,
            probe_duration_s=2.0,
            e2e_venv=venv,
            workdir=tmp_path / "work",
        ),
        out=out,
    )
    assert json.loads(out.read_text())["summary"] == payload["summary"]
    assert out.with_suffix(".png").exists()
    trace = {r["router"]: r for r in payload["rows"] if r["phase"] == "trace"}
    assert set(trace) == {"gateway", "sglang-router"}
    for row in trace.values():
        assert row["requests"] > 0
        assert row["completed"] == row["requests"], row
        assert row["goodput_rps"] > 0 and 0 < row["attainment"] <= 1
        assert 0 < row["ttft_p50_s"] <= row["ttft_p99_s"]
        assert row["cpu_us_per_request"] > 0
    probe = {r["router"]: r for r in payload["rows"] if r["phase"] == "probe"}
    assert set(probe) == {"gateway", "sglang-router"}
    for row in probe.values():
        assert row["failed"] == 0
        assert math.isfinite(row["added_latency_p50_ms"])
        assert row["cpu_us_per_request"] > 0
    summary = payload["summary"]
    assert summary["ratio_load"] == 1.0 and summary["ratio_vs_sglang_router"] > 0
    assert summary["ratio_ceiling"] == pytest.approx(1 / summary["sglang_router_attainment"])
    # the gateway ran as an operator runs it: its planner solved and stored a plan
    assert payload["ours"].startswith("planner every")
    assert list((tmp_path / "work" / "gateway-1" / "plans").glob("plan-*.json"))
    assert summary["added_latency_p50_ms"] == probe["gateway"]["added_latency_p50_ms"]
    assert summary["cpu_ratio_vs_sglang_router"] > 0
