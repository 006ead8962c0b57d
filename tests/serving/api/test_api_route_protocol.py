"""``POST /v1/route`` answered inside the HTTP protocol (serving.api.route_protocol) gives the
same answers, over real sockets, as the application path (FastRoute under plain uvicorn)."""

from __future__ import annotations

import json
import socket
import time
from typing import Any, BinaryIO

from api_fakes import ACME_KEY, ROUTE_KEY, TELEMETRY_KEY, make_plan, make_runtime
from live_server import serve_app

from serving.api.main import create_app
from serving.api.route_protocol import route_protocol

BODY = {"tenant": "acme", "model": "llama-3-8b", "input_tokens": 64, "block_hashes": [1, 2, 3]}


def _raw(method: str, body: bytes, headers: dict[str, str], path: str = "/v1/route") -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return head.encode() + b"\r\n" + body


def _post(body: Any, key: str | None = ROUTE_KEY, **headers: str) -> bytes:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    h = {"Content-Type": "application/json", **headers}
    if key is not None:
        h["Authorization"] = f"Bearer {key}"
    return _raw("POST", raw, h)


CASES = {
    "routed": _post(BODY),
    "no key": _post(BODY, key=None),
    "unknown key": _post(BODY, key="nobody-0123456789"),
    "lacks the scope": _post(BODY, key=TELEMETRY_KEY),
    "another tenant": _post({**BODY, "tenant": "globex"}, key=ACME_KEY),
    "bad body": _post({**BODY, "input_tokens": -1}),
    "not json": _post(b"{nope"),
    "unknown class": _post({**BODY, "request_class": "vip"}),
    "unknown model": _post({**BODY, "model": "gpt-9"}),
    "media type": _raw("POST", b"{}", {"Content-Type": "text/plain", "Authorization": "Bearer x"}),
    "too large": _post({**BODY, "prompt": "x" * 2_000_000}),
    "wrong method": _raw("GET", b"", {"Authorization": f"Bearer {ROUTE_KEY}"}),
}


def _read(stream: BinaryIO) -> tuple[int, dict[str, str], Any]:
    """One answer from a buffered reader of the connection (answers may arrive together)."""
    status = int(stream.readline().split()[1])
    headers: dict[str, str] = {}
    while (line := stream.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode().partition(":")
        headers[name.lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    body = stream.read(length)
    return status, headers, json.loads(body) if length else None


def _exchange(url: str, request: bytes) -> tuple[int, dict[str, str], Any]:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request)
        status, headers, body = _read(sock.makefile("rb"))
    # the same decision but its id; the date may tick between the two servers
    headers = {k: v for k, v in headers.items() if k not in {"date", "x-placement-decision-id"}}
    if isinstance(body, dict):
        body.pop("decision_id", None)
    return status, headers, body


def test_every_answer_as_the_application_gives_it() -> None:
    runtime = make_runtime(plan=make_plan(4))
    with serve_app(create_app(runtime), http=route_protocol(runtime)) as fast:
        got = {name: _exchange(fast, r) for name, r in CASES.items()}
    runtime = make_runtime(plan=make_plan(4))
    with serve_app(create_app(runtime), http="httptools") as asgi:
        want = {name: _exchange(asgi, r) for name, r in CASES.items()}
    for name in CASES:
        assert got[name] == want[name], name
    assert {name: answer[0] for name, answer in got.items()} == {
        "routed": 200,
        "no key": 401,
        "unknown key": 401,
        "lacks the scope": 403,
        "another tenant": 403,
        "bad body": 422,
        "not json": 422,
        "unknown class": 422,
        "unknown model": 404,
        "media type": 415,
        "too large": 413,
        "wrong method": 405,
    }


def test_keep_alive_pipelining_and_expect_continue() -> None:
    runtime = make_runtime(plan=make_plan(4))
    with serve_app(create_app(runtime), http=route_protocol(runtime)) as url:
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            stream = sock.makefile("rb")
            # three requests in one write: answered in order on the kept-alive connection
            sock.sendall(_post(BODY) + _raw("GET", b"", {}, "/readyz") + _post(BODY))
            first, second, third = _read(stream), _read(stream), _read(stream)
            assert [first[0], second[0], third[0]] == [200, 200, 200]
            assert first[2]["plan_version"] == 4 and "replica_id" in third[2]
            assert first[2]["decision_id"] != third[2]["decision_id"]
            # a client waiting for 100 Continue gets it before sending the body
            body = json.dumps(BODY).encode()
            head = _post(body, Expect="100-continue")[: -len(body)]
            sock.sendall(head)
            assert stream.readline() == b"HTTP/1.1 100 Continue\r\n"
            assert stream.readline() == b"\r\n"
            sock.sendall(body)
            assert _read(stream)[0] == 200
            # Connection: close is honoured: answered, then closed
            sock.sendall(_post(BODY, Connection="close"))
            status, headers, _ = _read(stream)
            assert status == 200 and headers["connection"] == "close"
            assert stream.read(1) == b""


def _send_in_pieces(request: bytes, cut: int | None) -> tuple[Any, bool]:
    """The answer of a fresh service to ``request``, sent whole or in two writes, and whether
    it was answered without the parser."""
    runtime = make_runtime(plan=make_plan(4))
    plain: list[bool] = []

    class Spy(route_protocol(runtime)):  # type: ignore[misc]
        def _plain(self, data: bytes) -> bool:
            plain.append(super()._plain(data))
            return plain[-1]

    with serve_app(create_app(runtime), http=Spy) as url:
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            stream = sock.makefile("rb")
            if cut is None:
                sock.sendall(request)
            else:
                sock.sendall(request[:cut])
                time.sleep(0.05)
                sock.sendall(request[cut:])
            status, headers, body = _read(stream)
            stream.close()
    body.pop("decision_id", None)
    headers = {k: v for k, v in headers.items() if k not in {"date", "x-placement-decision-id"}}
    return (status, headers, body), any(plain)


def test_a_request_in_one_read_or_split_gets_the_same_answer() -> None:
    """One read holding exactly one plain request is answered without the parser; a split,
    odd or malformed request goes through it: the answers agree."""
    request = _post(BODY, **{"X-Trailing-Space": "yes  ", "CONNECTION": "keep-alive"})
    whole, plainly = _send_in_pieces(request, None)
    split, split_plainly = _send_in_pieces(request, 40)
    assert whole[0] == 200 and whole == split
    assert plainly and not split_plainly
    runtime = make_runtime(plan=make_plan(4))
    with serve_app(create_app(runtime), http=route_protocol(runtime)) as url:
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            stream = sock.makefile("rb")
            sock.sendall(_post(BODY, **{"X-Bad": "a\x01b"}))  # a control character: 400
            assert int(stream.readline().split()[1]) == 400
            stream.close()


def test_a_connection_answered_within_the_keep_alive_time_stays_open_then_idles_out() -> None:
    runtime = make_runtime(plan=make_plan(4))
    app = create_app(runtime)
    with serve_app(app, http=route_protocol(runtime), timeout_keep_alive=1.0) as url:
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            stream = sock.makefile("rb")
            # an answer through uvicorn's path first: its keep-alive timer gives way to ours
            sock.sendall(_raw("GET", b"", {}, "/readyz"))
            assert _read(stream)[0] == 200
            for _ in range(4):  # 2.4 s in all, never 1 s idle: the connection stays
                time.sleep(0.6)
                sock.sendall(_post(BODY))
                assert _read(stream)[0] == 200
            started = time.monotonic()
            assert stream.read(1) == b""  # idle past 1 s: closed by the server
            assert 0.2 < time.monotonic() - started < 3.0
            stream.close()


def test_a_header_block_seen_before_reads_as_it_did_the_first_time() -> None:
    """Header lines are read once per distinct block and kept: the same request again, on a
    fresh connection, gets the same answer; a block that is not plain reads as such."""
    from serving.api import route_protocol as protocol

    request = _post(BODY, **{"X-Seen-Twice": "yes"})
    head = request[len(b"POST /v1/route HTTP/1.1\r\n") : request.index(b"\r\n\r\n") + 2]
    protocol._heads.pop(head, None)
    first, plainly = _send_in_pieces(request, None)
    assert plainly and head in protocol._heads
    again, plainly_again = _send_in_pieces(request, None)
    assert plainly_again and again == first and first[0] == 200
    chunked = _raw("POST", b"0\r\n\r\n", {"Transfer-Encoding": "chunked"})
    odd = chunked[len(b"POST /v1/route HTTP/1.1\r\n") : chunked.index(b"\r\n\r\n") + 2]
    assert protocol._plain_head(odd) is None
