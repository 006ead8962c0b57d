"""Batch jobs without HTTP: the input file's checks, the window, finalizing into the output and
error files (expired: what was not run is in the error file), and a store reopened."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from serving.batch.jobs import BatchInputError, BatchJobs, window_s
from serving.batch.store import BatchStore


def _line(i: int, **over: object) -> str:
    record = {
        "custom_id": f"r{i}",
        "method": "POST",
        "url": "/v1/completions",
        "body": {"model": "m", "prompt": "hi", "max_tokens": 2},
    }
    record.update(over)
    return json.dumps(record)


def _job(store: BatchStore, text: str, window: str = "24h") -> dict[str, object]:
    f = store.add_file("t", "in.jsonl", "batch", text.encode())
    return BatchJobs(store).create(
        "t", {"input_file_id": f.id, "endpoint": "/v1/completions", "completion_window": window}
    )


def test_windows() -> None:
    assert window_s("24h") == 86400 and window_s("90m") == 5400
    for bad in ("1d", "0h", "200h", 24, None):
        with pytest.raises(BatchInputError, match="completion_window"):
            window_s(bad)


def test_each_bad_line_is_named(tmp_path: Path) -> None:
    store = BatchStore(tmp_path)
    text = "\n".join(
        [
            _line(0),
            _line(0),  # repeated custom_id
            _line(2, method="GET"),
            _line(3, url="/v1/chat/completions"),
            _line(4, body={"model": "m", "prompt": "x", "stream": True}),
            "[1, 2]",
        ]
    )
    job = _job(store, text)
    assert job["status"] == "failed" and job["failed_at"]
    errors = job["errors"]["data"]  # type: ignore[index]
    assert [e["line"] for e in errors] == [2, 3, 4, 5, 6]
    assert "repeated" in errors[0]["message"] and "stream" in errors[3]["message"]
    with pytest.raises(BatchInputError, match="purpose"):
        f = store.add_file("t", "out.jsonl", "batch_output", b"{}")
        BatchJobs(store).create(
            "t", {"input_file_id": f.id, "endpoint": "/v1/completions", "completion_window": "24h"}
        )
    with pytest.raises(BatchInputError, match="no file") as missing:
        BatchJobs(store).create(
            "other",
            {"input_file_id": f.id, "endpoint": "/v1/completions", "completion_window": "1h"},
        )
    assert missing.value.status == 404  # another tenant's file is not there for it
    store.close()


def test_an_expired_job_keeps_its_answers_and_lists_the_rest_as_not_run(tmp_path: Path) -> None:
    store = BatchStore(tmp_path)
    job = _job(store, "\n".join(_line(i) for i in range(4)))
    assert job["status"] == "in_progress" and job["request_counts"]["total"] == 4  # type: ignore[index]
    pending = store.pending(str(job["id"]), 10)
    store.answer(str(job["id"]), pending[0].line, 200, {"choices": [{"text": "ok"}]})
    store.answer(str(job["id"]), pending[1].line, 400, {"error": {"message": "bad", "code": "x"}})
    store.close()
    reopened = BatchStore(tmp_path)  # a restart: the answers were already on disk
    jobs = BatchJobs(reopened)
    batch = reopened.batch("t", str(job["id"]))
    assert batch is not None
    done = jobs.finalize(batch, end="expired")
    assert done["status"] == "expired" and done["expired_at"]
    assert done["request_counts"] == {"total": 4, "completed": 1, "failed": 1}
    out = [json.loads(x) for x in reopened.content(done["output_file_id"]).decode().splitlines()]
    err = [json.loads(x) for x in reopened.content(done["error_file_id"]).decode().splitlines()]
    assert [o["custom_id"] for o in out] == ["r0"]
    assert [(e["custom_id"], e["error"]["code"]) for e in err] == [
        ("r1", "x"),
        ("r2", "batch_expired"),
        ("r3", "batch_expired"),
    ]
    reopened.close()
