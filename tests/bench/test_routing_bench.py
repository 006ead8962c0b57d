"""``placement bench routing``: the policy × load table, its JSON and its plot."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from placement.cli import app
from placement.paths import shared_data

pytestmark = pytest.mark.skipif(
    not (shared_data() / "traces/mooncake").exists(), reason="shared data missing"
)

RUN_KEYS = {
    "policy",
    "load",
    "goodput_rps",
    "slo_attainment",
    "ttft_p50_s",
    "ttft_p99_s",
    "tpot_p99_s",
    "prefix_hit_rate",
    "jain",
}


@pytest.fixture(scope="module")
def bench_output(tmp_path_factory):
    out = tmp_path_factory.mktemp("routing") / "routing.json"
    result = CliRunner().invoke(
        app,
        [
            "bench",
            "routing",
            "--workload",
            "mooncake",
            "--fleet",
            "data/fleets/h100x8.yaml",
            "--policies",
            "round_robin,sglang_cache_aware",
            "--loads",
            "0.4,2.0",
            "--duration",
            "120",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    return out, json.loads(out.read_text()), result.output


def test_json_has_a_row_per_policy_and_load(bench_output):
    _, payload, _ = bench_output
    runs = payload["runs"]
    assert {(r["policy"], r["load"]) for r in runs} == {
        (p, load) for p in ("round_robin", "sglang_cache_aware") for load in (0.4, 2.0)
    }
    assert all(set(r) >= RUN_KEYS for r in runs)
    assert all(0.0 <= r["slo_attainment"] <= 1.0 for r in runs)


def test_overload_hurts_attainment_and_cache_awareness_raises_hits(bench_output):
    _, payload, _ = bench_output
    by = {(r["policy"], r["load"]): r for r in payload["runs"]}
    for policy in ("round_robin", "sglang_cache_aware"):
        assert by[(policy, 2.0)]["slo_attainment"] < by[(policy, 0.4)]["slo_attainment"]
        assert by[(policy, 2.0)]["ttft_p99_s"] > by[(policy, 0.4)]["ttft_p99_s"]
    assert (
        by[("sglang_cache_aware", 0.4)]["prefix_hit_rate"]
        > by[("round_robin", 0.4)]["prefix_hit_rate"]
    )


def test_plot_is_written_beside_the_json(bench_output):
    out, _, text = bench_output
    png = out.with_suffix(".png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "goodput" in text


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--workload", "moon"], "unknown workload"),
        (["--fleet", "no/such.yaml"], "no/such.yaml"),
        (["--loads", "1,x"], "--loads"),
        (["--loads", "-1"], "--loads"),
        (["--policies", "best"], "unknown policy best"),
    ],
)
def test_bad_options_get_one_line_errors(args, needle):
    result = CliRunner().invoke(app, ["bench", "routing", "--duration", "10", *args])
    assert result.exit_code == 2
    assert needle in result.output
    assert "Traceback" not in result.output


def test_sim_speed_reports_its_figures(tmp_path):
    out = tmp_path / "speed.json"
    result = CliRunner().invoke(
        app, ["bench", "sim-speed", "--requests", "3000", "--replicas", "4", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    row = json.loads(out.read_text())
    assert row["replicas"] == 4 and row["requests"] >= 2000
    assert row["requests_per_s"] == pytest.approx(row["requests"] / row["wall_s"])


def test_fault_schedule_loses_no_request(tmp_path):
    out = tmp_path / "faults.json"
    result = CliRunner().invoke(
        app,
        [
            "bench",
            "routing",
            "--workload",
            "mooncake",
            "--policies",
            "least_outstanding",
            "--loads",
            "0.5",
            "--duration",
            "300",
            "--faults",
            "data/faults/kill_and_straggler.yaml",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    run = json.loads(out.read_text())["runs"][0]
    assert run["failed"] == 0 and run["unfinished"] == 0
    assert run["retries"] > 0
    assert run["utilisation_by_replica"]["h100-3"] < run["utilisation_by_replica"]["h100-0"]


def test_bad_fault_file_names_the_field(tmp_path):
    bad = tmp_path / "f.yaml"
    bad.write_text("- {at_s: 5, replica: h100-0, kind: melt}\n")
    result = CliRunner().invoke(app, ["bench", "routing", "--duration", "10", "--faults", str(bad)])
    assert result.exit_code == 2
    assert "faults.0.kind" in result.output
