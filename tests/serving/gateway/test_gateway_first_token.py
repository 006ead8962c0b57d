"""The gateway tells the service a streamed answer's first token when its first byte comes
back, not when the answer ends: the route path stops counting the prompt as queued on the
replica, and the SLO gate's TTFT calibration sees the TTFT, not the whole answer's time."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from gateway_harness import KEY, MODEL, Running, running_gateway

AUTH = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    with running_gateway(tmp_path_factory.mktemp("first-token"), replicas=1) as running:
        yield running


def _held(gateway: Running) -> tuple[int, int, bool]:
    """Leases open, prompt tokens the route path counts as queued, and whether the one open
    lease has its first token."""
    service = gateway.service
    queued = sum(s.in_flight_prefill_tokens for s in service.route_path.replicas)
    leases = list(service.leases._leases.values())
    return len(leases), queued, bool(leases) and all(lease.first_token for lease in leases)


def test_the_first_token_is_reported_while_the_stream_still_runs(gateway: Running) -> None:
    body = {"model": MODEL, "prompt": "Tell a long story. " * 50, "max_tokens": 300, "stream": True}
    with (
        httpx.Client(base_url=gateway.url, headers=AUTH, timeout=60) as c,
        c.stream("POST", "/v1/completions", json=body) as r,
    ):
        assert r.status_code == 200
        chunks = r.iter_bytes()
        next(chunks)  # the first event: the answer has started, and runs on for seconds
        leases, queued, first_token = _held(gateway)
        assert leases == 1
        assert first_token, "the service was not told of the first token"
        assert queued == 0, "the route path still counts the prompt as queued"
        for _ in chunks:
            pass
    assert _held(gateway)[0] == 0  # completed when the stream ended


def test_an_unstreamed_answer_completes_its_lease(gateway: Running) -> None:
    body = {"model": MODEL, "prompt": "Hi", "max_tokens": 5}
    with httpx.Client(base_url=gateway.url, headers=AUTH, timeout=60) as c:
        assert c.post("/v1/completions", json=body).status_code == 200
    leases, queued, _ = _held(gateway)
    assert (leases, queued) == (0, 0)
