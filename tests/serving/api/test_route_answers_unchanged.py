"""``POST /v1/route`` gives, byte for byte, the answers the decision path gave before it was cut
down for speed (main at ``a94bc71``, which routes a prompt with no full block by load), on a
fixed stream of requests through the HTTP protocol,
and leaves the service's books (in-flight counts, usage, credit counters, prefix index, metrics)
as they were left then.

The stream is the route bench's fixture in small (80 replicas, 4,000 prefix groups): planned
requests, unseen prefixes, spills and fallbacks past unhealthy, stale and full replicas, leases
expiring unreported, with odd requests among them (no key, an unknown key, a prompt, bad JSON,
an unknown class, hashes a plain read must refuse, a request split across reads). The expected
answers are in ``data/route_answers.json``; after a change that is meant to change decisions,
rewrite it with ``python tests/serving/api/test_route_answers_unchanged.py`` and say why.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import uvicorn
import uvloop
from uvicorn.server import ServerState

from bench.http_route import BENCH_KEY, fixture_runtime, request_body
from bench.route import synthetic_instance
from bench.route_instructions import LoopbackTransport, request_bytes
from serving.api.main import create_app
from serving.api.route_protocol import route_protocol

EXPECTED = Path(__file__).with_name("data") / "route_answers.json"
STEP_S = 0.0005
ODD_EVERY = 37


class _Keep(LoopbackTransport):
    """A transport that keeps what is written."""

    def __init__(self) -> None:
        super().__init__()
        self.out: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.out.append(bytes(data))


def _odd(k: int, body: dict[str, Any]) -> list[bytes]:
    """The ``k``-th odd request (as reads), made from a plain body."""
    plain = json.dumps(body)
    kind = k % 10
    if kind == 0:
        return [request_bytes(plain).replace(BENCH_KEY.encode(), b"nobody-0123456789")]
    if kind == 1:
        return [request_bytes(json.dumps({**body, "request_class": "vip"}))]
    if kind == 2:
        return [request_bytes(plain[:-3])]
    if kind == 3:
        prompt = {k: v for k, v in body.items() if k != "block_hashes"}
        return [request_bytes(json.dumps({**prompt, "prompt": "hello " * (k % 50 + 1)}))]
    if kind == 4:
        return [request_bytes(json.dumps({**body, "block_hashes": [*body["block_hashes"], 1.0]}))]
    if kind == 5:
        return [request_bytes(json.dumps({**body, "block_hashes": [True, *body["block_hashes"]]}))]
    if kind == 6:
        return [request_bytes(json.dumps({**body, "block_hashes": [2**63, 1]}))]
    if kind == 7:
        return [request_bytes(json.dumps({**body, "input_tokens": -1}))]
    if kind == 8:
        whole = request_bytes(plain)
        return [whole[:40], whole[40:]]  # split: the parser takes it
    return [request_bytes(json.dumps({**body, "max_output_tokens": 7, "block_hashes": []}))]


def answers() -> dict[str, Any]:
    """The stream's answers (status, replica and reason of each; a digest of every byte) and
    the books after it."""
    instance = synthetic_instance(replicas=80, groups=4_000, queries=1_500, seed=7)
    runtime = fixture_runtime(instance.states, instance.plan)
    service = runtime.service
    service._id_prefix = "d-"
    now = [1_000.0]
    service.clock = lambda: now[0]
    protocol_class = route_protocol(runtime)
    config = uvicorn.Config(create_app(runtime), http=protocol_class, log_level="error")
    config.load()
    loop = uvloop.new_event_loop()
    protocol = protocol_class(config=config, server_state=ServerState(), app_state={}, _loop=loop)
    sink = _Keep()
    protocol.connection_made(sink)
    digest = hashlib.sha256()
    each: list[str] = []
    for k, query in enumerate(instance.queries):
        now[0] += STEP_S
        body = json.loads(request_body(query))
        reads = _odd(k // ODD_EVERY, body) if k % ODD_EVERY == ODD_EVERY - 1 else None
        for data in reads or [request_bytes(json.dumps(body))]:
            protocol.data_received(data)
        if reads is not None and len(reads) > 1:
            loop.run_until_complete(asyncio.sleep(0))  # the application path's task
            for _ in range(50):
                if sink.out:
                    break
                loop.run_until_complete(asyncio.sleep(0.001))
        answer = b"".join(sink.out)
        sink.out.clear()
        digest.update(answer)
        head, _, payload = answer.partition(b"\r\n\r\n")
        status = head.split(b" ", 2)[1].decode()
        decided = json.loads(payload) if payload else {}
        each.append(f"{status} {decided.get('replica_id', '-')} {decided.get('reason', '-')}")
    path = service.route_path
    prefixes = path._prefixes
    books = {
        "in_flight": service.admission.in_flight,
        "by_tenant": dict(sorted(service.admission.in_flight_by_tenant.items())),
        "credit_counters": {t: repr(c) for t, c in sorted(service.credit_counters().items())},
        "usage": sorted((t, f, repr(v)) for (t, f), v in service.usage._local.items()),
        "by_reason": dict(sorted(service.metrics.decision_stats.by_reason.items())),
        "lease_expiries": service.metrics.decision_stats.lease_expiries,
        "leases": len(service.leases),
        "replicas": [
            [
                s.id,
                s.in_flight,
                s.in_flight_prefill_tokens,
                prefixes.blocks(s.id) if prefixes else 0,
            ]
            for s in path.replicas
        ],
    }
    loop.close()
    return {"digest": digest.hexdigest(), "books": books, "answers": each}


def test_the_same_answers_and_books_as_before() -> None:
    want = json.loads(EXPECTED.read_text())
    got = json.loads(json.dumps(answers()))
    for k, (g, w) in enumerate(zip(got["answers"], want["answers"], strict=True)):
        assert g == w, f"request {k}: {g!r}, before {w!r}"
    assert got["books"] == want["books"]
    assert got["digest"] == want["digest"]  # every byte of every answer


def test_the_stream_covers_the_paths() -> None:
    want = json.loads(EXPECTED.read_text())
    statuses = {a.split()[0] for a in want["answers"]}
    reasons = {a.split()[2] for a in want["answers"]}
    assert {"200", "401", "422"} <= statuses
    assert {"plan", "fallback:unseen-prefix", "fallback:unhealthy"} <= reasons
    assert want["books"]["lease_expiries"] > 0


if __name__ == "__main__":
    EXPECTED.parent.mkdir(exist_ok=True)
    EXPECTED.write_text(json.dumps(answers(), indent=0) + "\n")
    print(f"wrote {EXPECTED}", file=sys.stderr)
