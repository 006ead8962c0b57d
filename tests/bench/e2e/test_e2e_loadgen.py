"""aiperf's per-request export read into records; the command it is run with."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.e2e.loadgen import aiperf_command, read_records
from placement.errors import InputError


def _line(phase: str, metrics: dict[str, object], error: object = None) -> str:
    raw: dict[str, object] = {
        "metadata": {"benchmark_phase": phase, "request_start_ns": 2_000_000_000},
        "metrics": {k: {"value": v, "unit": u} for k, (v, u) in metrics.items()},
    }
    if error is not None:
        raw["error"] = error
    return json.dumps(raw)


def test_records_are_read_in_seconds_and_failures_kept(tmp_path: Path) -> None:
    path = tmp_path / "profile_export.jsonl"
    ok = {
        "time_to_first_token": (250.0, "ms"),
        "request_latency": (1250.0, "ms"),
        "inter_token_latency": (10.0, "ms"),
        "output_sequence_length": (101, "tokens"),
    }
    path.write_text(
        "\n".join(
            [
                _line("warmup", ok),
                _line("profiling", ok),
                _line("profiling", {}, error={"code": 503, "message": "no replica can serve"}),
                "",
            ]
        )
    )
    records = read_records(path)
    assert len(records) == 2  # the warm-up request is not measured
    first, failed = records
    assert first.ok and first.ttft_s == pytest.approx(0.25)
    assert first.latency_s == pytest.approx(1.25) and first.output_tokens == 101
    assert first.start_s == pytest.approx(2.0)
    assert not failed.ok and failed.error == "no replica can serve"


def test_a_file_that_is_not_aiperf_records_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "profile_export.jsonl"
    path.write_text(_line("profiling", {}) + "\nnot json\n")
    with pytest.raises(InputError, match=r"jsonl:2: not an aiperf record"):
        read_records(path)


def test_several_urls_are_taken_round_robin_and_the_key_is_sent(tmp_path: Path) -> None:
    args = aiperf_command(
        tmp_path,
        urls=["http://a:1", "http://b:2"],
        model="m",
        trace=tmp_path / "t.jsonl",
        tokenizer=tmp_path / "tok",
        artifacts=tmp_path / "art",
        api_key="k",
        timeout_s=60,
    )
    assert args[args.index("--url-strategy") + 1] == "round_robin"
    assert [args[i + 1] for i, a in enumerate(args) if a == "--url"] == ["http://a:1", "http://b:2"]
    assert args[args.index("--api-key") + 1] == "k"
    assert "--fixed-schedule" in args and "--streaming" in args


def test_a_refusal_is_a_failed_record_even_when_it_carries_timings(tmp_path: Path) -> None:
    # as aiperf writes a 429 of the SLO gate (metrics are empty there; timings would not help)
    path = tmp_path / "profile_export.jsonl"
    refusal = {"code": 429, "type": "Too Many Requests", "message": "refused (slo)"}
    timed = {"time_to_first_token": (5.0, "ms"), "request_latency": (5.0, "ms")}
    path.write_text(
        "\n".join([_line("profiling", {}, error=refusal), _line("profiling", timed, refusal)])
    )
    records = read_records(path)
    assert [r.ok for r in records] == [False, False]
    assert records[0].error == "refused (slo)"


def test_request_headers_go_as_one_json_object_of_strings(tmp_path: Path) -> None:
    headers = {"x-gateway-inference-fairness-id": "t", "x-gateway-inference-objective": "a,b"}
    args = aiperf_command(
        tmp_path,
        urls=["http://a:1"],
        model="m",
        trace=tmp_path / "t.jsonl",
        tokenizer=tmp_path / "tok",
        artifacts=tmp_path / "art",
        api_key=None,
        timeout_s=60,
        headers=headers,
    )
    assert args.count("--header") == 1
    assert json.loads(args[args.index("--header") + 1]) == headers
    assert "--api-key" not in args
