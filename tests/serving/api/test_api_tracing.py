"""A span per decision, sent by OTLP/HTTP to a real receiver (an HTTP server here decoding the
protobuf requests as a collector does); none without an endpoint."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from api_fakes import ROUTE_KEY, auth, make_plan, make_runtime
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from starlette.testclient import TestClient

from serving.api.main import create_app
from serving.tracing import OTEL_ENDPOINT_VARS, SPAN, decision_tracer


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    spans: list[dict[str, Any]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            request = ExportTraceServiceRequest.FromString(body)
            for resource in request.resource_spans:
                for scope in resource.scope_spans:
                    for span in scope.spans:
                        attrs = {a.key: a.value for a in span.attributes}
                        spans.append({"path": self.path, "name": span.name, "attributes": attrs})
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", spans
    finally:
        server.shutdown()
        thread.join()
        server.server_close()


def test_a_span_per_decision_reaches_the_collector(
    receiver: tuple[str, list[dict[str, Any]]],
) -> None:
    url, spans = receiver
    runtime = make_runtime(plan=make_plan(7), otlp_endpoint=url)
    tracer = runtime.service.tracer
    assert tracer is not None
    with TestClient(create_app(runtime)) as client:
        ids = []
        for tenant in ("acme", "globex"):
            r = client.post(
                "/v1/route",
                json={"tenant": tenant, "model": "llama-3-8b", "input_tokens": 64},
                headers=auth(ROUTE_KEY),
            )
            assert r.status_code == 200, r.text
            ids.append(r.json()["decision_id"])
    tracer.close()  # (the app's shutdown does it too) the batch goes out now
    assert [s["path"] for s in spans] == ["/v1/traces"] * 2
    by_id = {s["attributes"]["placement.decision_id"].string_value: s for s in spans}
    assert set(by_id) == set(ids)
    first = by_id[ids[0]]
    assert first["name"] == SPAN
    attrs = first["attributes"]
    assert attrs["placement.tenant"].string_value == "acme"
    assert attrs["placement.reason"].string_value == "plan"
    assert attrs["placement.plan_version"].int_value == 7
    assert attrs["placement.predicted_ttft_s"].double_value > 0
    assert attrs["placement.replica_id"].string_value.startswith("h100-")


def test_no_tracer_without_an_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in OTEL_ENDPOINT_VARS:
        monkeypatch.delenv(name, raising=False)
    assert decision_tracer(None) is None
    assert make_runtime(plan=make_plan(1)).service.tracer is None
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    tracer = decision_tracer(None)
    assert tracer is not None
    tracer.close()
