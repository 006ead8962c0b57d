"""``placement serve --epp``: a real process serving the endpoint picker on the demo fleet,
and ``--print-envoy-config``."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import grpc
import httpx
import pytest
from envoy.config.core.v3 import base_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as ext_proc
from envoy.service.ext_proc.v3 import external_processor_pb2_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from typer.testing import CliRunner

from placement.cli import app

runner = CliRunner()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _fleet(tmp_path: Path, addresses: list[str]) -> Path:
    groups = [
        {
            "kind": f"h100-{i}",
            "accelerator": "H100-SXM",
            "count": 1,
            "model": "llama-3-8b",
            "labels": {"address": address},
        }
        for i, address in enumerate(addresses)
    ]
    path = tmp_path / "fleet.json"
    path.write_text(json.dumps({"name": "two", "replicas": groups}))
    return path


@pytest.mark.parametrize(
    ("fallbacks", "cluster_type"), [(["--epp-fallbacks", "0"], "ORIGINAL_DST"), ([], "STATIC")]
)
def test_print_envoy_config(tmp_path: Path, fallbacks: list[str], cluster_type: str) -> None:
    fleet = _fleet(tmp_path, ["10.0.0.1:8000", "10.0.0.2:8000"])
    res = runner.invoke(
        app,
        ["serve", "--fleet", str(fleet), "--epp-port", "9100", "--print-envoy-config", *fallbacks],
    )
    assert res.exit_code == 0, res.output
    bootstrap = json.loads(res.output)
    clusters = {c["name"]: c for c in bootstrap["static_resources"]["clusters"]}
    assert clusters["inference-replicas"]["type"] == cluster_type
    picker = clusters["inference-picker"]["load_assignment"]["endpoints"][0]["lb_endpoints"][0]
    assert picker["endpoint"]["address"]["socket_address"]["port_value"] == 9100
    if cluster_type == "STATIC":
        listed = clusters["inference-replicas"]["load_assignment"]["endpoints"][0]["lb_endpoints"]
        ports = [(e["endpoint"]["address"]["socket_address"]["address"]) for e in listed]
        assert ports == ["10.0.0.1", "10.0.0.2"]


def test_print_envoy_config_refuses_hostnames_naming_the_replica(tmp_path: Path) -> None:
    fleet = _fleet(tmp_path, ["10.0.0.1:8000", "gpu-box:8000"])
    res = runner.invoke(app, ["serve", "--fleet", str(fleet), "--print-envoy-config"])
    assert res.exit_code == 2
    assert "gpu-box:8000" in res.output and "not ip:port" in res.output


def test_serve_epp_runs_the_picker_on_the_demo_fleet(tmp_path: Path) -> None:
    ports = {name: _free_port() for name in ("epp", "health", "metrics")}
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLACEMENT_")}
    env["PLACEMENT_PLANNER"] = "false"  # no solver worker for this test
    command = [
        sys.executable,
        "-c",
        "from placement.cli import app; app()",
        "serve",
        "--demo",
        "--epp",
        "--plan-dir",
        str(tmp_path / "plans"),
        "--epp-port",
        str(ports["epp"]),
        "--epp-health-port",
        str(ports["health"]),
        "--epp-metrics-port",
        str(ports["metrics"]),
    ]
    process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        assert process.stderr is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = process.stderr.readline()
            lines.append(line)
            if "endpoint picker:" in line or not line:
                break
        banner = "".join(lines)
        assert "endpoint picker:" in banner, banner
        assert "emulating 8 replicas" in banner, banner
        with grpc.insecure_channel(f"127.0.0.1:{ports['health']}") as channel:
            health = health_pb2_grpc.HealthStub(channel)
            request = health_pb2.HealthCheckRequest(service="readiness")
            status = health.Check(request, timeout=5).status
        assert status == health_pb2.HealthCheckResponse.SERVING
        headers = base_pb2.HeaderMap(
            headers=[base_pb2.HeaderValue(key=":path", raw_value=b"/v1/completions")]
        )
        requests = [
            ext_proc.ProcessingRequest(request_headers=ext_proc.HttpHeaders(headers=headers)),
            ext_proc.ProcessingRequest(
                request_body=ext_proc.HttpBody(
                    body=b'{"model": "llama-3-8b", "prompt": "hello"}', end_of_stream=True
                )
            ),
        ]
        with grpc.insecure_channel(f"127.0.0.1:{ports['epp']}") as channel:
            stub = external_processor_pb2_grpc.ExternalProcessorStub(channel)
            answers = list(stub.Process(iter(requests), timeout=10))
        mutation = answers[0].request_headers.response.header_mutation
        destination = {h.header.key: h.header.raw_value.decode() for h in mutation.set_headers}
        endpoints = destination["x-gateway-destination-endpoint"].split(",")
        # the emulated replicas, one port each on this machine
        assert endpoints and all(re.fullmatch(r"127\.0\.0\.1:\d+", e) for e in endpoints)
        assert len(set(endpoints)) == len(endpoints)

        metrics = httpx.get(f"http://127.0.0.1:{ports['metrics']}/metrics", timeout=5).text
        assert 'placement_epp_requests_total{outcome="routed"} 1.0' in metrics
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(timeout=20)
        finally:
            if process.poll() is None:
                process.kill()
            if process.stderr is not None:
                process.stderr.close()
    assert code == 0
