"""The endpoint picker protocol over a real gRPC channel: destination header and metadata,
body modes, fallbacks and subsets, refusals, the response side and the lease it closes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from epp_harness import (
    BUFFERED,
    FULL_DUPLEX,
    MODEL,
    NONE,
    STREAMED,
    RecordingService,
    RunningPicker,
    completion,
    kinds,
    make_service,
    metadata_destination,
    request_body,
    request_headers,
    request_trailers,
    response_body,
    response_headers,
    set_headers,
    streamed,
    wait_until,
)

from serving.api.routers.route import to_query
from serving.api.schemas import RouteRequest
from serving.epp import PickerConfig
from serving.epp.protocol import DESTINATION, SERVED

ADDRESSES = [f"127.0.0.1:{8100 + i}" for i in range(4)]


def _picker(service: RecordingService | None = None, **config: Any) -> RunningPicker:
    return RunningPicker(service or make_service(ADDRESSES), PickerConfig(**config))


@pytest.fixture
def picker() -> Iterator[RunningPicker]:
    running = _picker()
    yield running
    running.stop()


def _routed_answer(answers: list[Any]) -> Any:
    """The answer that carries the destination (the one with dynamic metadata)."""
    carrying = [a for a in answers if metadata_destination(a) is not None]
    assert len(carrying) == 1, kinds(answers)
    return carrying[0]


def _endpoints(answer: Any) -> list[str]:
    return set_headers(answer)[DESTINATION].split(",")


def _refusal(answers: list[Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
    assert kinds(answers)[-1] == "immediate_response", kinds(answers)
    immediate = answers[-1].immediate_response
    headers = {h.header.key: h.header.raw_value.decode() for h in immediate.headers.set_headers}
    return immediate.status.code, json.loads(immediate.body), headers


# --- the destination ---------------------------------------------------------------------------

MODES = [
    # (case, messages Envoy sends, answer kinds, the part whose answer carries the destination)
    (
        "BUFFERED",
        [request_headers(request_mode=BUFFERED), request_body(completion())],
        ["request_headers", "request_body"],
        "request_body",
    ),
    (
        "FULL_DUPLEX_STREAMED, one chunk",
        [request_headers(request_mode=FULL_DUPLEX), request_body(completion())],
        ["request_headers", "request_body"],
        "request_headers",
    ),
    (
        "FULL_DUPLEX_STREAMED, three chunks",
        [
            request_headers(request_mode=FULL_DUPLEX),
            request_body(completion()[:5], end_of_stream=False),
            request_body(completion()[5:20], end_of_stream=False),
            request_body(completion()[20:]),
        ],
        ["request_headers", "request_body"],
        "request_headers",
    ),
    (
        "FULL_DUPLEX_STREAMED, body ended by trailers",
        [
            request_headers(request_mode=FULL_DUPLEX),
            request_body(completion(), end_of_stream=False),
            request_trailers(),
        ],
        ["request_headers", "request_body", "request_trailers"],
        "request_headers",
    ),
    (
        "no protocol_config: the configured default (FULL_DUPLEX_STREAMED)",
        [request_headers(), request_body(completion())],
        ["request_headers", "request_body"],
        "request_headers",
    ),
    (
        "STREAMED: each chunk answered, decided on the last",
        [
            request_headers(request_mode=STREAMED),
            request_body(completion()[:9], end_of_stream=False),
            request_body(completion()[9:]),
        ],
        ["request_headers", "request_body", "request_body"],
        "request_body",
    ),
    (
        "a request without a body",
        [request_headers({":method": "GET"}, path="/v1/models", end_of_stream=True)],
        ["request_headers"],
        "request_headers",
    ),
    (
        "body mode NONE: placed from the headers",
        [request_headers(request_mode=NONE)],
        ["request_headers"],
        "request_headers",
    ),
]


@pytest.mark.parametrize(
    ("case", "messages", "answer_kinds", "carrier"), MODES, ids=[m[0] for m in MODES]
)
def test_the_destination_is_one_value_in_header_and_metadata(
    picker: RunningPicker, case: str, messages: list[Any], answer_kinds: list[str], carrier: str
) -> None:
    answers = picker.exchange(messages)
    assert kinds(answers) == answer_kinds
    routed = _routed_answer(answers)
    assert routed.WhichOneof("response") == carrier
    header = set_headers(routed)[DESTINATION]
    assert metadata_destination(routed) == header
    endpoints = header.split(",")
    # the primary then every fallback the default profile lists (3), each a distinct ip:port
    assert len(endpoints) == 4 == len(set(endpoints))
    assert set(endpoints) <= set(ADDRESSES)
    assert set_headers(routed)["x-placement-replica"] == f"r{ADDRESSES.index(endpoints[0])}"


def test_full_duplex_hands_the_body_back_unchanged_in_chunks(picker: RunningPicker) -> None:
    big = completion("x" * 150_000)
    messages = [request_headers(request_mode=FULL_DUPLEX)]
    messages += [
        request_body(big[i : i + 40_000], end_of_stream=False) for i in range(0, len(big), 40_000)
    ]
    messages.append(request_body(b""))
    answers = picker.exchange(messages)
    body, ends = streamed(answers, "request_body")
    assert body == big
    assert len(ends) == 3  # 150 kB in chunks of at most 64 KiB
    assert ends == [False, False, True]
    assert kinds(answers)[0] == "request_headers"  # headers answered before the body


def test_buffered_headers_are_answered_before_the_body_arrives(picker: RunningPicker) -> None:
    stream = picker.stream()
    stream.send(request_headers(request_mode=BUFFERED))
    (first,) = stream.receive()
    assert first.WhichOneof("response") == "request_headers"
    assert set_headers(first) == {}  # no destination yet: Envoy waits for the body's answer
    stream.send(request_body(completion()))
    (second,) = stream.receive()
    assert DESTINATION in set_headers(second)
    stream.close()


def test_full_duplex_answers_nothing_until_the_body_is_complete(picker: RunningPicker) -> None:
    stream = picker.stream()
    stream.send(
        request_headers(request_mode=FULL_DUPLEX), request_body(b'{"model": ', end_of_stream=False)
    )
    stream.send(request_body(b'"llama-3-8b", "prompt": "hi"}'))
    first, second = stream.receive(2)
    assert kinds([first, second]) == ["request_headers", "request_body"]
    assert DESTINATION in set_headers(first)
    stream.close()


def test_the_client_cannot_choose_or_fake_a_destination(picker: RunningPicker) -> None:
    answers = picker.exchange(
        [
            request_headers(
                {DESTINATION: "10.9.9.9:80", SERVED: "10.9.9.9:80"}, request_mode=BUFFERED
            ),
            request_body(completion()),
        ]
    )
    routed = _routed_answer(answers)
    mutation = routed.request_body.response.header_mutation
    assert "10.9.9.9:80" not in set_headers(routed)[DESTINATION]
    assert SERVED in mutation.remove_headers
    overwrite = {h.header.key: h.append_action for h in mutation.set_headers}
    assert overwrite[DESTINATION] == 2  # OVERWRITE_IF_EXISTS_OR_ADD


# --- fallbacks and subsets ---------------------------------------------------------------------

FALLBACKS = [
    # (case, max_fallbacks, unhealthy replicas, subset hint, expected endpoints (None: 4 any))
    ("no fallbacks (a single-address proxy)", 0, [], None, 1),
    ("one fallback", 1, [], None, 2),
    ("every fallback the decision lists", None, [], None, 4),
    ("an unhealthy replica is never listed", None, ["r1"], None, 3),
    ("a subset hint keeps only its endpoints", None, [], [ADDRESSES[2], ADDRESSES[3]], 2),
    ("a subset of one", None, [], [ADDRESSES[1]], 1),
]


@pytest.mark.parametrize(
    ("case", "max_fallbacks", "unhealthy", "subset", "count"),
    FALLBACKS,
    ids=[f[0] for f in FALLBACKS],
)
def test_fallbacks(
    case: str, max_fallbacks: int | None, unhealthy: list[str], subset: list[str] | None, count: int
) -> None:
    service = make_service(ADDRESSES)
    for replica in unhealthy:
        service.mark_health(replica, False)
    running = _picker(service, max_fallbacks=max_fallbacks)
    try:
        stream = running.stream()
        stream.send(
            request_headers(request_mode=BUFFERED, subset=subset), request_body(completion())
        )
        _, routed = stream.receive(2)
        endpoints = _endpoints(routed)
        assert len(endpoints) == count == len(set(endpoints))
        for replica in unhealthy:
            assert service.replicas[replica].address not in endpoints
        if subset is not None:
            assert set(endpoints) <= set(subset)
        # the lease counts the request on the primary, whatever the route path chose first
        primary = f"r{ADDRESSES.index(endpoints[0])}"
        assert set_headers(routed)["x-placement-replica"] == primary
        in_flight = running.on_loop(lambda: {r: s.in_flight for r, s in service.replicas.items()})
        assert in_flight[primary] == 1 and sum(in_flight.values()) == 1
        stream.close()
    finally:
        running.stop()


@pytest.mark.parametrize(
    "subset", [[], ["10.1.1.1:8000"]], ids=["empty subset", "unknown endpoints"]
)
def test_a_subset_nothing_in_the_fleet_can_serve_is_a_503(subset: list[str]) -> None:
    service = make_service(ADDRESSES)
    running = _picker(service)
    try:
        answers = running.exchange(
            [request_headers(request_mode=BUFFERED, subset=subset), request_body(completion())]
        )
        status, body, _ = _refusal(answers)
        assert status == 503
        assert "subset" in body["error"]["message"]
        assert running.on_loop(lambda: (len(service.leases), service.admission.in_flight)) == (0, 0)
    finally:
        running.stop()


# --- refusals ----------------------------------------------------------------------------------

REFUSALS = [
    # (case, messages, status, error code)
    ("unknown model", [completion(model="no-such-model")], 404, "model_not_found"),
    ("not JSON", [b"{not json"], 400, "invalid_request_body"),
    ("no prompt", [json.dumps({"model": MODEL}).encode()], 400, "invalid_request_body"),
    ("unknown request class", [completion()], 400, "invalid_value"),
    ("fairness id not a tenant name", [completion()], 400, "invalid_value"),
    ("body over the limit, streamed", [b"x" * 3000], 413, "request_too_large"),
]
_HEADERS = {
    "unknown request class": {"x-gateway-inference-objective": "platinum"},
    "fairness id not a tenant name": {"x-gateway-inference-fairness-id": "two words"},
}


@pytest.mark.parametrize("mode", [BUFFERED, FULL_DUPLEX], ids=["BUFFERED", "FULL_DUPLEX_STREAMED"])
@pytest.mark.parametrize(
    ("case", "bodies", "status", "code"), REFUSALS, ids=[r[0] for r in REFUSALS]
)
def test_bad_requests_are_answered_in_openai_error_format(
    case: str, bodies: list[bytes], status: int, code: str, mode: int
) -> None:
    service = make_service(ADDRESSES)
    running = _picker(service, max_body_bytes=2048)
    try:
        answers = running.exchange(
            [request_headers(_HEADERS.get(case), request_mode=mode), *map(request_body, bodies)]
        )
        got_status, body, headers = _refusal(answers)
        assert got_status == status
        assert body["error"]["code"] == code
        assert body["error"]["message"]
        for header in _HEADERS.get(case, {}):  # a bad header is named in the answer
            assert header in body["error"]["message"] and body["error"]["param"] == header
        assert headers["content-type"] == "application/json"
        assert service.outcomes == [] or all(not ok for _, _, ok in service.outcomes)
        assert running.on_loop(lambda: len(service.leases)) == 0
    finally:
        running.stop()


def test_a_declared_body_over_the_limit_is_refused_before_it_arrives() -> None:
    running = _picker(max_body_bytes=1024)
    try:
        stream = running.stream()
        stream.send(request_headers({"content-length": "5000"}, request_mode=BUFFERED))
        (answer,) = stream.receive()
        status, body, _ = _refusal([answer])
        assert status == 413 and "1024 bytes" in body["error"]["message"]
        stream.close()
    finally:
        running.stop()


def test_shed_when_the_fleet_is_full_is_a_429_with_retry_after() -> None:
    service = make_service(ADDRESSES[:2], in_flight_per_replica=1)
    running = _picker(service)
    try:
        held = []
        for _ in range(2):  # fill the fleet's in-flight budget (1 per replica)
            stream = running.stream()
            stream.send(request_headers(request_mode=BUFFERED), request_body(completion()))
            stream.receive(2)
            held.append(stream)
        answers = running.exchange(
            [request_headers(request_mode=BUFFERED), request_body(completion())]
        )
        status, body, headers = _refusal(answers)
        assert status == 429
        assert int(headers["retry-after"]) >= 1
        assert body["error"]["code"] == "rate_limit_exceeded"
        for stream in held:
            stream.close()
        # the held requests' leases are released with their streams: the next one is admitted
        assert wait_until(lambda: running.on_loop(lambda: service.admission.in_flight) == 0)
        answers = running.exchange(
            [request_headers(request_mode=BUFFERED), request_body(completion())]
        )
        assert DESTINATION in set_headers(_routed_answer(answers))
    finally:
        running.stop()


def test_nothing_healthy_is_a_503() -> None:
    service = make_service(ADDRESSES)
    for replica in list(service.replicas):
        service.mark_health(replica, False)
    running = _picker(service)
    try:
        for messages in (
            [request_headers(request_mode=BUFFERED), request_body(completion())],
            [request_headers({":method": "GET"}, end_of_stream=True)],
        ):
            status, body, _ = _refusal(running.exchange(messages))
            assert status == 503
            assert body["error"]["type"] == "service_unavailable"
    finally:
        running.stop()


# --- the request as the service sees it ---------------------------------------------------------


def test_the_decision_is_the_one_post_v1_route_gives() -> None:
    prompts = ["You are a helpful assistant. " * 200 + tail for tail in ("A", "B", "A", "C", "B")]
    direct = make_service(ADDRESSES)
    via_picker = make_service(ADDRESSES)
    running = _picker(via_picker)
    try:
        for prompt in prompts:
            request = RouteRequest(tenant="default", model=MODEL, prompt=prompt)
            expected = direct.route(to_query(request, 2048))
            direct.complete(expected.decision_id, output_tokens=0, ok=True)
            stream = running.stream()
            stream.send(request_headers(request_mode=BUFFERED), request_body(completion(prompt)))
            _, routed = stream.receive(2)
            assert _endpoints(routed) == [a for a in expected.addresses]
            assert running.on_loop(lambda: via_picker.queries[-1]) == to_query(request, 2048)
            stream.close()
            assert wait_until(lambda: running.on_loop(lambda: not via_picker.leases))
    finally:
        running.stop()


QUERIES = [
    # (case, headers, body, tenant, request class, input tokens, prefix blocks)
    ("defaults", {}, completion("x" * 4096), "default", "interactive", 1024, 2),
    (
        "fairness id and objective headers",
        {"x-gateway-inference-fairness-id": "acme", "x-gateway-inference-objective": "batch"},
        completion("hi"),
        "acme",
        "batch",
        0,
        0,
    ),
    (
        "token ids count exactly",
        {},
        completion(list(range(1000))),
        "default",
        "interactive",
        1000,
        1,
    ),
    (
        "chat",
        {},
        json.dumps(
            {"model": MODEL, "messages": [{"role": "user", "content": "y" * 4089}]}
        ).encode(),
        "default",
        "interactive",
        1024,  # "user: " + 4089 characters + newline, 4 per token
        2,  # blocks of 2048 characters, as POST /v1/route cuts a prompt
    ),
]


@pytest.mark.parametrize(
    ("case", "headers", "body", "tenant", "request_class", "tokens", "blocks"),
    QUERIES,
    ids=[q[0] for q in QUERIES],
)
def test_the_route_query(
    case: str,
    headers: dict[str, str],
    body: bytes,
    tenant: str,
    request_class: str,
    tokens: int,
    blocks: int,
) -> None:
    service = make_service(ADDRESSES)
    running = _picker(service)
    try:
        running.exchange([request_headers(headers, request_mode=BUFFERED), request_body(body)])
        query = running.on_loop(lambda: service.queries[-1])
        assert (query.tenant, query.request_class, query.input_tokens) == (
            tenant,
            request_class,
            tokens,
        )
        assert query.model == MODEL and query.max_output_tokens == 256
        assert len(query.block_hashes) == blocks  # the prompt's prefix blocks
    finally:
        running.stop()


# --- the response --------------------------------------------------------------------------------


def _open(running: RunningPicker, response_mode: int = FULL_DUPLEX) -> tuple[Any, str]:
    """A routed request held open; the stream and its primary endpoint."""
    stream = running.stream()
    stream.send(
        request_headers(request_mode=FULL_DUPLEX, response_mode=response_mode),
        request_body(completion(max_tokens=50)),
    )
    routed, _ = stream.receive(2)
    return stream, _endpoints(routed)[0]


def test_the_response_completes_the_lease_with_its_output_tokens() -> None:
    service = make_service(ADDRESSES)
    running = _picker(service)
    try:
        stream, primary = _open(running)
        replica = f"r{ADDRESSES.index(primary)}"
        usage = json.dumps(
            {"choices": [{"text": "ok"}], "usage": {"completion_tokens": 17}}
        ).encode()
        stream.send(response_headers(200), response_body(usage[:10], end_of_stream=False))
        headers_answer, first_chunk = stream.receive(2)
        assert headers_answer.WhichOneof("response") == "response_headers"
        assert running.on_loop(lambda: service.outcomes) == []  # still streaming
        stream.send(response_body(usage[10:]))
        (last_chunk,) = stream.receive()
        body, ends = streamed([first_chunk, last_chunk], "response_body")
        assert body == usage and ends == [False, True]  # FULL_DUPLEX: handed back as it came
        assert running.on_loop(lambda: service.outcomes) == [(replica, 17, True)]
        assert stream.close() == []
        assert running.on_loop(lambda: sum(s.in_flight for s in service.replicas.values())) == 0
    finally:
        running.stop()


OUTCOMES = [
    # (case, response messages, ok, output tokens)
    ("a server error", [response_headers(500), response_body(b"oops")], False, 0),
    (
        "a stream without usage: one token per event",
        [response_headers(200), response_body(b"data: {}\n\ndata: {}\n\ndata: [DONE]\n\n")],
        True,
        2,
    ),
    ("response body mode NONE: done at the headers", [response_headers(200)], True, 50),
    ("no response at all (client gone)", [], False, 0),
    (
        "a response that stops midway",
        [response_headers(200), response_body(b"data: {}\n\n", end_of_stream=False)],
        False,
        1,
    ),
]


@pytest.mark.parametrize(
    ("case", "messages", "ok", "tokens"), OUTCOMES, ids=[o[0] for o in OUTCOMES]
)
def test_every_stream_releases_its_lease(
    case: str, messages: list[Any], ok: bool, tokens: int
) -> None:
    service = make_service(ADDRESSES)
    running = _picker(service)
    try:
        mode = NONE if "NONE" in case else FULL_DUPLEX
        stream, primary = _open(running, response_mode=mode)
        stream.send(*messages)
        stream.close()
        assert wait_until(lambda: running.on_loop(lambda: len(service.outcomes)) == 1)
        replica = f"r{ADDRESSES.index(primary)}"
        assert service.outcomes == [(replica, tokens, ok)]
        assert running.on_loop(lambda: (len(service.leases), service.admission.in_flight)) == (0, 0)
    finally:
        running.stop()


@pytest.mark.parametrize("how", ["metadata", "header"])
def test_a_fallback_that_served_takes_over_the_lease(how: str) -> None:
    service = make_service(ADDRESSES)
    running = _picker(service)
    try:
        stream, primary = _open(running)
        served = next(a for a in ADDRESSES if a != primary)
        served_id = f"r{ADDRESSES.index(served)}"
        if how == "metadata":
            stream.send(response_headers(200, served=served))
        else:
            stream.send(response_headers(200, served_header=served))
        (answer,) = stream.receive()
        in_flight = running.on_loop(lambda: {r: s.in_flight for r, s in service.replicas.items()})
        assert in_flight[served_id] == 1 and sum(in_flight.values()) == 1
        removed = list(answer.response_headers.response.header_mutation.remove_headers)
        assert removed == ([SERVED] if how == "header" else [])  # not for the client's eyes
        stream.send(response_body(b'{"usage": {"completion_tokens": 4}}'))
        stream.close()
        assert running.on_loop(lambda: service.outcomes) == [(served_id, 4, True)]
        assert running.on_loop(lambda: sum(s.in_flight for s in service.replicas.values())) == 0
        metrics = httpx.get(f"http://127.0.0.1:{running.server.metrics_port}/metrics").text
        assert "placement_epp_served_elsewhere_total 1.0" in metrics
    finally:
        running.stop()


def test_metrics_count_outcomes(picker: RunningPicker) -> None:
    picker.exchange([request_headers(request_mode=BUFFERED), request_body(completion())])
    picker.exchange([request_headers(request_mode=BUFFERED), request_body(completion(model="x"))])
    text = httpx.get(f"http://127.0.0.1:{picker.server.metrics_port}/metrics").text
    assert 'placement_epp_requests_total{outcome="routed"} 1.0' in text
    assert 'placement_epp_requests_total{outcome="not_found"} 1.0' in text
    assert "placement_epp_pick_seconds_count 2.0" in text
    assert "placement_decisions_total" in text  # the service's own metrics, same registry
