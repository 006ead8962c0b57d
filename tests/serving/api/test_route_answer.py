"""The answer joined from kept pieces (serving.api.route_answer) is, byte for byte, the answer's
dictionary serialised by orjson and the decision's headers as lines, whatever the names hold."""

from __future__ import annotations

import math
import random

import orjson
import pytest

from serving.api import route_answer
from serving.api.route_answer import answer_bytes
from serving.api.routers.route import _answer, raw_headers
from serving.route.types import Decision
from serving.service import Routed

NAMES = ["r0001", "10.0.0.1:8000", 'quote"d', "back\\slash", "tab\there", "ünïcödé", "nul\x00", ""]
TTFTS = [0.0, 0.123456789, 1e-7, 3e21, 12.5, math.nan, math.inf, -0.0]


def _expected(routed: Routed) -> tuple[bytes, bytes]:
    body = orjson.dumps(_answer(None, routed))  # type: ignore[arg-type]  # unused there
    pairs = [
        (b"content-type", b"application/json"),
        (b"content-length", b"%d" % len(body)),
        *raw_headers(routed),
    ]
    return b"".join(n + b": " + v + b"\r\n" for n, v in pairs), body


def _routed(rng: random.Random, *, same_objects: bool) -> Routed:
    replica, address = rng.choice(NAMES) + str(rng.randrange(3)), rng.choice(NAMES)
    fallbacks = [(rng.choice(NAMES), rng.choice(NAMES)) for _ in range(rng.randrange(4))]
    decision = Decision(
        replica_id=replica,
        address=address,
        reason=rng.choice(["plan", "fallback:spill", "fallback:unseen-prefix", 'odd "reason"']),
        plan_version=rng.choice([None, 0, 7, 123456789]),
        predicted_ttft_s=rng.choice(TTFTS),
        fallbacks=tuple(r for r, _ in fallbacks),
    )
    first = (replica, address) if same_objects else (replica + "", "" + address)
    return Routed(
        decision_id=rng.choice(["d-1", "abc-64f-12", 'x"y']),
        decision=decision,
        replica_ids=(first[0], *(r for r, _ in fallbacks)),
        addresses=(first[1], *(a for _, a in fallbacks)),
        priority=rng.choice([None, None, 0, 3]),
    )


@pytest.mark.parametrize("same_objects", [True, False])
def test_the_bytes_of_the_dictionary_and_the_header_pairs(same_objects: bool) -> None:
    rng = random.Random(11)
    for _ in range(2_000):
        routed = _routed(rng, same_objects=same_objects)
        assert answer_bytes(routed) == _expected(routed)


def test_a_replica_readdressed_is_named_by_its_new_address() -> None:
    rng = random.Random(3)
    routed = _routed(rng, same_objects=True)
    answer_bytes(routed)
    d = routed.decision
    readdressed = Routed(
        decision_id="d-2",
        decision=Decision(
            replica_id=d.replica_id,
            address="10.9.9.9:1",
            reason=d.reason,
            plan_version=d.plan_version,
            predicted_ttft_s=d.predicted_ttft_s,
        ),
        replica_ids=(d.replica_id,),
        addresses=("10.9.9.9:1",),
    )
    head, body = answer_bytes(readdressed)
    assert (head, body) == _expected(readdressed)
    assert b"10.9.9.9:1" in body


def test_the_kept_pieces_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(route_answer, "_MAX_REPLICAS_KEPT", 5)
    route_answer._replicas.clear()
    rng = random.Random(4)
    for _ in range(200):
        routed = _routed(rng, same_objects=True)
        assert answer_bytes(routed) == _expected(routed)
        assert len(route_answer._replicas) <= 5
