"""A routed request's answer as bytes: the JSON body and the header lines of ``POST /v1/route``.

Building the answer's dictionary (a dictionary per fallback inside), serialising it, then
building the decision's headers as pairs and joining them into lines took a tenth of a
decision's instructions. Most of it names replicas, and a service routes to the same few
thousand replicas again and again: the pieces that name one (its id and address as JSON, its
fallback object, its header line, its address) are encoded once and kept, and an answer is
joined from them. :func:`answer_bytes` gives exactly the bytes of
``orjson.dumps(routers.route._answer(...))`` and of the lines of
:func:`~serving.api.routers.route.raw_headers` (content type and length first), which remain
the definition (a test compares the two on many decisions).
"""

from __future__ import annotations

import orjson

from serving.service import Routed

# replica id → (its address, '"replica_id":…,"address":…', '{…}' as a fallback, its
# x-placement-replica line, its address as bytes); bounded: a fleet of made-up ids cannot
# grow it
_Pieces = tuple[str, bytes, bytes, bytes, bytes]
_replicas: dict[str, _Pieces] = {}
_MAX_REPLICAS_KEPT = 65_536
# reason → ('"reason":…', its x-placement-reason line); reasons are a handful of labels
_reasons: dict[str, tuple[bytes, bytes]] = {}
_MAX_REASONS_KEPT = 256
_HEAD = b"content-type: application/json\r\ncontent-length: %d\r\n"


def _replica(replica_id: str, address: str) -> _Pieces:
    kept = _replicas.get(replica_id)
    if kept is not None and kept[0] == address:
        return kept
    pair = b'"replica_id":' + orjson.dumps(replica_id) + b',"address":' + orjson.dumps(address)
    kept = (
        address,
        pair,
        b"{" + pair + b"}",
        b"x-placement-replica: " + replica_id.encode() + b"\r\n",
        address.encode(),
    )
    if len(_replicas) >= _MAX_REPLICAS_KEPT:
        _replicas.clear()
    _replicas[replica_id] = kept
    return kept


def _reason(reason: str) -> tuple[bytes, bytes]:
    kept = _reasons.get(reason)
    if kept is None:
        kept = (
            b'"reason":' + orjson.dumps(reason),
            b"x-placement-reason: " + reason.encode() + b"\r\n",
        )
        if len(_reasons) >= _MAX_REASONS_KEPT:
            _reasons.clear()
        _reasons[reason] = kept
    return kept


def answer_bytes(routed: Routed) -> tuple[bytes, bytes]:
    """The header lines (each ending in CRLF; content type and length first) and the JSON
    body of the answer that places ``routed``."""
    d = routed.decision
    ids, addresses = routed.replica_ids, routed.addresses
    if len(ids) != len(addresses):
        raise ValueError(f"{len(ids)} replica ids for {len(addresses)} addresses")
    kept = _replicas  # looked up here, not through _replica: a call per replica is dearer
    destination: list[bytes] = []
    fallbacks: list[bytes] = []
    for replica_id, address in zip(ids, addresses):  # noqa: B905 — lengths checked
        pieces = kept.get(replica_id)
        if pieces is None or pieces[0] != address:
            pieces = _replica(replica_id, address)
        destination.append(pieces[4])
        fallbacks.append(pieces[2])
    first = kept.get(d.replica_id)
    if first is None or first[0] != d.address:
        first = _replica(d.replica_id, d.address)
    reason = _reasons.get(d.reason)
    reason_json, reason_line = reason if reason is not None else _reason(d.reason)
    version = d.plan_version
    decision_id = routed.decision_id
    priority = routed.priority
    body = b"".join(
        (
            b'{"decision_id":',
            orjson.dumps(decision_id),
            b",",
            first[1],
            b",",
            reason_json,
            b',"plan_version":',
            b"null" if version is None else b"%d" % version,
            b',"predicted_ttft_s":',
            orjson.dumps(d.predicted_ttft_s),
            b',"fallbacks":[',
            b",".join(fallbacks[1:]),
            b"]}" if priority is None else b'],"priority":%d}' % priority,
        )
    )
    head = b"".join(
        (
            _HEAD % len(body),
            b"x-gateway-destination-endpoint: ",
            b",".join(destination),
            b"\r\n",
            first[3],
            reason_line,
            b"x-placement-plan-version: ",
            b"" if version is None else b"%d" % version,
            b"\r\nx-placement-decision-id: ",
            decision_id.encode(),
            b"\r\n" if priority is None else b"\r\nx-placement-priority: %d\r\n" % priority,
        )
    )
    return head, body
