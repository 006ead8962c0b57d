"""Completions answered in the HTTP protocol (:mod:`serving.gateway.protocol`), on a raw
socket: pipelined requests answered in order on one connection, a body over the limit refused
with 413 in OpenAI's format, and a route decision beside them on the same connection."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import httpx
import pytest
from gateway_harness import KEY, MODEL, Running, running_gateway


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    with running_gateway(tmp_path_factory.mktemp("protocol")) as running:
        yield running


def _post(path: str, body: bytes) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nhost: t\r\nauthorization: Bearer {KEY}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
    ).encode() + body


def _answers(sock: socket.socket, count: int) -> list[httpx.Response]:
    """Read ``count`` HTTP/1.1 answers (content-length or chunked) off the socket."""
    data = b""
    answers: list[httpx.Response] = []
    while len(answers) < count:
        chunk = sock.recv(65536)
        assert chunk, "the gateway closed the connection"
        data += chunk
        while b"\r\n\r\n" in data:
            head, rest = data.split(b"\r\n\r\n", 1)
            lines = head.decode().split("\r\n")
            headers = dict(line.split(": ", 1) for line in lines[1:])
            if "content-length" in headers:
                size = int(headers["content-length"])
                if len(rest) < size:
                    break
                body, data = rest[:size], rest[size:]
            else:
                end = rest.find(b"0\r\n\r\n")
                if end < 0:
                    break
                body, data = rest[:end], rest[end + 5 :]
            answers.append(httpx.Response(int(lines[0].split()[1]), headers=headers, content=body))
    return answers


def test_pipelined_requests_are_answered_in_order_on_one_connection(gateway: Running) -> None:
    port = int(gateway.url.rsplit(":", 1)[1])
    completion = json.dumps({"model": MODEL, "prompt": "one", "max_tokens": 2}).encode()
    streamed = json.dumps({"model": MODEL, "prompt": "two", "max_tokens": 3, "stream": True})
    route = json.dumps({"tenant": "acme", "model": MODEL, "input_tokens": 64}).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(
            _post("/v1/completions", completion)
            + _post("/v1/completions", streamed.encode())
            + _post("/v1/route", route)
            + _post("/v1/completions", b'{"model": ')  # malformed
        )
        whole, stream, decision, bad = _answers(sock, 4)
    assert whole.status_code == 200 and whole.json()["usage"]["completion_tokens"] == 2
    assert stream.status_code == 200 and stream.headers["content-type"] == "text/event-stream"
    # (chunked: the body is kept here with its chunk sizes)
    assert stream.content.count(b"data: ") == 4 and b"data: [DONE]\n\n" in stream.content
    assert decision.status_code == 200 and "replica_id" in decision.json()
    assert bad.status_code == 400 and "not valid JSON" in bad.json()["error"]["message"]


def test_a_body_over_the_limit_is_refused_with_413(gateway: Running) -> None:
    limit = gateway.app.state.runtime.settings.max_body_bytes
    prompt = "x" * (limit + 10)
    body = json.dumps({"model": MODEL, "prompt": prompt, "max_tokens": 2}).encode()
    answer = httpx.post(
        gateway.url + "/v1/completions",
        content=body,
        headers={"Authorization": f"Bearer {KEY}", "content-type": "application/json"},
        timeout=20,
    )
    assert answer.status_code == 413
    assert answer.json()["error"]["code"] == "body_too_large"
