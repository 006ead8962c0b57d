"""The Batch API driven by the official ``openai`` client against a real gateway and emulated
fleet: upload, create, run to completion with output and error files; a job survives a restart
of the gateway without losing or repeating a request; it pauses (fails nothing) while
interactive load holds the fleet; cancellation."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "gateway"))
from gateway_harness import KEY, MODEL, Running, running_gateway

AUTH = {"Authorization": f"Bearer {KEY}"}


def _lines(n: int, *, max_tokens: int = 8, bad: tuple[int, ...] = ()) -> bytes:
    out = []
    for i in range(n):
        body: dict[str, Any] = {
            "model": "no-such-model" if i in bad else MODEL,
            "messages": [{"role": "user", "content": f"Question {i}?"}],
            "max_tokens": max_tokens,
        }
        out.append(
            {"custom_id": f"req-{i}", "method": "POST", "url": "/v1/chat/completions", "body": body}
        )
    return ("\n".join(json.dumps(o) for o in out) + "\n").encode()


def _client(running: Running) -> openai.OpenAI:
    return openai.OpenAI(base_url=running.url + "/v1", api_key=KEY, max_retries=0)


def _wait(client: openai.OpenAI, batch_id: str, until: Any, seconds: float = 30.0) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        batch = client.batches.retrieve(batch_id)
        if until(batch):
            return batch
        assert time.monotonic() < deadline, f"batch stuck: {batch.status} {batch.request_counts}"
        time.sleep(0.1)


def _submit(client: openai.OpenAI, content: bytes) -> Any:
    uploaded = client.files.create(file=("in.jsonl", content), purpose="batch")
    assert uploaded.purpose == "batch" and uploaded.bytes == len(content)
    return client.batches.create(
        input_file_id=uploaded.id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        metadata={"job": "test"},
    )


def test_a_batch_runs_to_completion_with_output_and_error_files(tmp_path: Path) -> None:
    with (
        running_gateway(tmp_path, batch_dir=tmp_path / "batches") as running,
        _client(running) as client,
    ):
        batch = _submit(client, _lines(12, bad=(3,)))
        assert batch.status == "in_progress"
        assert batch.request_counts is not None and batch.request_counts.total == 12
        done = _wait(client, batch.id, lambda b: b.status == "completed")
        assert done.request_counts.completed == 11 and done.request_counts.failed == 1
        assert done.metadata == {"job": "test"}
        output = [
            json.loads(x) for x in client.files.content(done.output_file_id).text.splitlines()
        ]
        errors = [json.loads(x) for x in client.files.content(done.error_file_id).text.splitlines()]
        listed = client.batches.list()
    assert sorted(o["custom_id"] for o in output) == sorted(f"req-{i}" for i in range(12) if i != 3)
    first = output[0]
    assert first["response"]["status_code"] == 200 and first["error"] is None
    assert first["response"]["body"]["usage"]["completion_tokens"] == 8
    assert first["response"]["body"]["choices"][0]["message"]["content"]
    assert [e["custom_id"] for e in errors] == ["req-3"]
    assert errors[0]["response"]["status_code"] == 404
    assert errors[0]["error"]["code"] == "model_not_found"
    assert [b.id for b in listed.data] == [batch.id]


def test_a_bad_input_file_fails_the_job_naming_the_line(tmp_path: Path) -> None:
    with (
        running_gateway(tmp_path, batch_dir=tmp_path / "batches") as running,
        _client(running) as client,
    ):
        content = (
            _lines(2)
            + b'{"custom_id": "req-0", "method": "POST", "url": "/v1/chat/completions", "body": {}}\nnot json\n'
        )
        batch = _submit(client, content)
        assert batch.status == "failed"
        assert batch.errors is not None and batch.errors.data is not None
        assert [(e.line, "repeated" in (e.message or "")) for e in batch.errors.data] == [
            (3, True),
            (4, False),
        ]
        with pytest.raises(openai.BadRequestError, match="completion_window"):
            client.batches.create(
                input_file_id=batch.input_file_id,
                endpoint="/v1/chat/completions",
                completion_window="soon",
            )  # type: ignore[arg-type]
        with pytest.raises(openai.NotFoundError):
            client.batches.retrieve("batch_nope")
        with pytest.raises(openai.BadRequestError, match="purpose"):
            client.files.create(file=("x.jsonl", b"{}"), purpose="fine-tune")
        # another tenant sees nothing of this one's
        other = httpx.get(
            running.url + f"/v1/batches/{batch.id}",
            headers={**AUTH, "x-gateway-inference-fairness-id": "other"},
        )
        assert other.status_code == 404 and other.json()["error"]["type"] == "invalid_request_error"
        assert httpx.get(running.url + "/v1/batches").status_code == 401


def test_a_restart_loses_no_request_and_repeats_none_that_finished(tmp_path: Path) -> None:
    folder = tmp_path / "batches"
    slow = {"batch_dir": folder, "batch_share": 0.01}  # one batch request at a time
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with running_gateway(tmp_path / "a", **slow) as running, _client(running) as client:
        batch = _submit(client, _lines(16, max_tokens=24))
        part = _wait(client, batch.id, lambda b: b.request_counts.completed >= 3)
        assert part.status == "in_progress" and part.request_counts.completed < 16
    # the gateway stopped mid-job (what was running was cut off); a new one over the same folder
    with running_gateway(tmp_path / "b", **slow) as running, _client(running) as client:
        done = _wait(client, batch.id, lambda b: b.status == "completed")
        output = client.files.content(done.output_file_id).text.splitlines()
    assert done.request_counts.completed == 16 and done.request_counts.failed == 0
    ids = [json.loads(x)["custom_id"] for x in output]
    assert sorted(ids) == sorted(f"req-{i}" for i in range(16))  # each once, none lost


def test_batch_pauses_under_interactive_load_and_fails_nothing(tmp_path: Path) -> None:
    with running_gateway(
        tmp_path, batch_dir=tmp_path / "batches", batch_busy_fraction=0.5
    ) as running:
        admission = running.service.admission
        admission.set_fleet_capacity(4)  # batch may start while fewer than 2 are in flight
        hold = {"model": MODEL, "prompt": "Talk", "max_tokens": 3000, "stream": True}
        with (
            _client(running) as client,
            httpx.Client(base_url=running.url, headers=AUTH, timeout=30) as c,
        ):
            with (
                c.stream("POST", "/v1/completions", json=hold) as h1,
                c.stream("POST", "/v1/completions", json=hold) as h2,
            ):
                l1, l2 = h1.iter_lines(), h2.iter_lines()
                next(l1), next(l2)  # two interactive streams in flight: the fleet is busy
                batch = _submit(client, _lines(6))
                time.sleep(1.0)
                held = client.batches.retrieve(batch.id)
                assert held.status == "in_progress" and held.request_counts.completed == 0
                text = httpx.get(running.url + "/metrics").text
                assert running.metric(text, "placement_batch_paused") == 1
                del l1, l2
            done = _wait(client, batch.id, lambda b: b.status == "completed")
    assert done.request_counts.completed == 6 and done.request_counts.failed == 0


def test_cancel_closes_the_job_with_what_was_not_run_in_the_error_file(tmp_path: Path) -> None:
    with (
        running_gateway(tmp_path, batch_dir=tmp_path / "batches", batch_share=0.01) as running,
        _client(running) as client,
    ):
        batch = _submit(client, _lines(30, max_tokens=24))
        _wait(client, batch.id, lambda b: b.request_counts.completed >= 1)
        cancelling = client.batches.cancel(batch.id)
        assert cancelling.status in ("cancelling", "cancelled")
        done = _wait(client, batch.id, lambda b: b.status == "cancelled")
        errors = [json.loads(x) for x in client.files.content(done.error_file_id).text.splitlines()]
    assert 1 <= done.request_counts.completed < 30
    assert len(errors) == 30 - done.request_counts.completed
    assert {e["error"]["code"] for e in errors} == {"batch_cancelled"}
