"""The picker's gRPC health services, on the ext_proc port and on the health port."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import grpc
import pytest
from epp_harness import RunningPicker, make_service, wait_until
from grpc_health.v1 import health_pb2, health_pb2_grpc

from serving.epp.protocol import EXT_PROC_SERVICE

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
SERVICES = ("liveness", "readiness", EXT_PROC_SERVICE, "")


@pytest.fixture
def running() -> Iterator[RunningPicker]:
    picker = RunningPicker(make_service([f"127.0.0.1:{8100 + i}" for i in range(2)]))
    yield picker
    picker.stop()


def _checker(port: int) -> Callable[[str], int]:
    stub = health_pb2_grpc.HealthStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
    return lambda service: int(
        stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5).status
    )


@pytest.mark.parametrize("which", ["health port", "ext_proc port"])
def test_every_service_serves_when_ready(running: RunningPicker, which: str) -> None:
    port = running.server.health_port if which == "health port" else running.server.port
    assert running.server.health_port != running.server.port
    check = _checker(port)
    assert {name: check(name) for name in SERVICES} == dict.fromkeys(SERVICES, SERVING)


CHANGES = [
    # (case, what happens to the service)
    ("no healthy replica", lambda s: [s.mark_health(r, False) for r in list(s.replicas)]),
    ("no plan and greedy routing not allowed", lambda s: setattr(s, "no_plan_fallback", False)),
]


@pytest.mark.parametrize(("case", "change"), CHANGES, ids=[c[0] for c in CHANGES])
def test_not_ready_but_alive(
    running: RunningPicker, case: str, change: Callable[..., object]
) -> None:
    check = _checker(running.server.health_port)
    running.on_loop(lambda: change(running.service))
    assert wait_until(lambda: check("readiness") == NOT_SERVING)
    assert check(EXT_PROC_SERVICE) == NOT_SERVING
    assert check("") == NOT_SERVING
    assert check("liveness") == SERVING


def test_an_unknown_service_is_not_found(running: RunningPicker) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        _checker(running.server.health_port)("no.such.Service")
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
