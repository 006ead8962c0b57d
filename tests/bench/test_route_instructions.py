"""The instruction-count bench's measured loop: both layers answer the fixture's requests as
the server would (200, a decision written), on a small fleet; the count itself needs valgrind
and is run by hand (bench/RESULTS.md)."""

from __future__ import annotations

import pytest

from bench.route_instructions import LAYERS, answerer, main, request_bytes


@pytest.mark.parametrize("layer", LAYERS)
def test_each_layer_answers_every_request_with_a_decision(layer: str) -> None:
    answer = answerer(layer, replicas=24, groups=300, bodies=40)
    assert [answer(k) for k in range(120)] == [200] * 120


def test_requests_are_written_as_wrk_writes_them() -> None:
    raw = request_bytes('{"a": 1}', port=9)
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"POST /v1/route HTTP/1.1\r\nHost: 127.0.0.1:9\r\n")
    assert b"Content-Length: 8" in head and body == b'{"a": 1}'


def test_bad_counts_are_refused_naming_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--decisions", "0"])
    assert "--decisions" in capsys.readouterr().err
