"""The endpoint picker records each response it saw end into the telemetry store and its
tenant's usage, as the gateway mode and ``POST /v1/outcomes`` do."""

from __future__ import annotations

import asyncio
from pathlib import Path

from epp_harness import make_service

from serving.epp import EndpointPicker
from serving.epp.body import parse_body
from serving.epp.picker import Pick
from serving.telemetry_sink import TelemetrySink
from training.telemetry.store import read_requests


def test_a_finished_response_is_a_telemetry_row_and_counts_in_usage(tmp_path: Path) -> None:
    service = make_service(["10.0.0.1:8000", "10.0.0.2:8000"])
    sink = TelemetrySink(tmp_path / "telemetry")
    picker = EndpointPicker(service, telemetry=sink)
    body = parse_body(b'{"model": "llama-3-8b", "prompt": "hello there", "max_tokens": 16}')
    headers = {"x-gateway-inference-fairness-id": "acme"}
    served = picker.pick(body, headers, None)
    failed = picker.pick(body, headers, None)
    assert isinstance(served, Pick) and isinstance(failed, Pick)
    picker.first_token(served)
    picker.finish(served, ok=True, output_tokens=16)
    picker.finish(failed, ok=False, output_tokens=0)
    asyncio.run(sink.flush())
    rows = read_requests(tmp_path / "telemetry")
    assert len(rows) == 2 and set(rows["tenant"]) == {"acme"}
    assert sorted(rows["error"]) == ["", "upstream error"]
    assert rows["ttft_s"].notna().sum() == 1 and rows["output_tokens"].max() == 16
    usage = service.usage.view("acme", credit_share=0.0)
    assert (usage.requests, usage.completed, usage.failed, usage.slo_judged) == (2, 1, 1, 1)
