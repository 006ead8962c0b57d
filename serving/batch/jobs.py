"""Batch jobs as OpenAI's Batch API defines them: create (validate the input file), cancel,
finalize into an output and an error file.

A job's status goes ``validating`` → ``in_progress`` → ``finalizing`` → ``completed``, or to
``failed`` (the input file is not a valid batch: the job's ``errors`` say which line and why),
``cancelling`` → ``cancelled``, or ``expired`` (its completion window passed first). Answers
with a 2xx status go to the output file, every other answer — and, for a cancelled or expired
job, every request not run — to the error file, one JSON line per request with its
``custom_id``.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

from serving.batch.store import BatchStore, new_id

ENDPOINTS = ("/v1/chat/completions", "/v1/completions")
WINDOW = re.compile(r"^(\d+)([hm])$")
MAX_WINDOW_S = 7 * 24 * 3600
OPEN = ("validating", "in_progress", "finalizing", "cancelling")
DONE = ("completed", "failed", "expired", "cancelled")


class BatchInputError(Exception):
    """A request to the Batch API that is not valid (400, naming the parameter)."""

    def __init__(self, message: str, param: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.status = status


def window_s(text: object) -> int:
    """Seconds of a ``completion_window`` such as ``24h`` (hours or minutes)."""
    match = WINDOW.match(text) if isinstance(text, str) else None
    seconds = 0 if match is None else int(match[1]) * (3600 if match[2] == "h" else 60)
    if not 0 < seconds <= MAX_WINDOW_S:
        raise BatchInputError(
            f"completion_window must be a duration such as '24h' (at most 168h), got {text!r}",
            "completion_window",
        )
    return seconds


class BatchJobs:
    def __init__(self, store: BatchStore) -> None:
        self.store = store

    def create(self, tenant: str, params: dict[str, Any]) -> dict[str, Any]:
        """A new job from a ``POST /v1/batches`` body, validated: ``in_progress`` or
        ``failed``; :class:`BatchInputError` for a bad parameter."""
        endpoint = params.get("endpoint")
        if endpoint not in ENDPOINTS:
            raise BatchInputError(
                f"endpoint must be one of {', '.join(ENDPOINTS)}, got {endpoint!r}", "endpoint"
            )
        window = window_s(params.get("completion_window"))
        file_id = params.get("input_file_id")
        stored = self.store.file(tenant, file_id) if isinstance(file_id, str) else None
        if stored is None:
            raise BatchInputError(f"no file {file_id!r}", "input_file_id", 404)
        if stored.purpose != "batch":
            raise BatchInputError(
                f"file {file_id} has purpose {stored.purpose!r}, not 'batch'", "input_file_id"
            )
        metadata = params.get("metadata")
        if metadata is not None and not (
            isinstance(metadata, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())
        ):
            raise BatchInputError("metadata must map strings to strings", "metadata")
        unknown = set(params) - {"endpoint", "completion_window", "input_file_id", "metadata"}
        if unknown:
            raise BatchInputError(f"unknown parameter {sorted(unknown)[0]!r}", sorted(unknown)[0])
        now = int(time.time())
        batch: dict[str, Any] = {
            "id": new_id("batch_"),
            "object": "batch",
            "endpoint": endpoint,
            "errors": None,
            "input_file_id": file_id,
            "completion_window": params["completion_window"],
            "status": "validating",
            "output_file_id": None,
            "error_file_id": None,
            "created_at": now,
            "in_progress_at": None,
            "expires_at": now + window,
            "finalizing_at": None,
            "completed_at": None,
            "failed_at": None,
            "expired_at": None,
            "cancelling_at": None,
            "cancelled_at": None,
            "request_counts": {"total": 0, "completed": 0, "failed": 0},
            "metadata": metadata,
        }
        self.store.save_batch(batch, tenant)
        return self.validate(batch, tenant)

    def validate(self, batch: dict[str, Any], tenant: str) -> dict[str, Any]:
        """Read the input file: every line a request to the job's endpoint with a unique
        ``custom_id``; the job is ``in_progress`` with its requests stored, or ``failed``."""
        errors: list[dict[str, Any]] = []
        requests: list[tuple[int, str, str, str]] = []
        seen: set[str] = set()
        try:
            text = self.store.content(batch["input_file_id"]).decode()
        except (OSError, UnicodeDecodeError) as exc:
            text = ""
            errors.append({"code": "invalid_file", "message": str(exc), "line": None})
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            problem = _check_line(line, batch["endpoint"], seen)
            if isinstance(problem, str):
                errors.append({"code": "invalid_request", "message": problem, "line": number})
                if len(errors) >= 100:
                    break
                continue
            custom_id, body = problem
            seen.add(custom_id)
            requests.append((number, custom_id, batch["endpoint"], body))
        if not requests and not errors:
            errors.append({"code": "empty_file", "message": "the input file has no requests"})
        now = int(time.time())
        if errors:
            batch["status"] = "failed"
            batch["failed_at"] = now
            batch["errors"] = {"object": "list", "data": errors}
        else:
            self.store.add_requests(batch["id"], requests)
            batch["status"] = "in_progress"
            batch["in_progress_at"] = now
            batch["request_counts"] = {"total": len(requests), "completed": 0, "failed": 0}
        self.store.save_batch(batch, tenant)
        return batch

    def cancel(self, tenant: str, batch_id: str) -> dict[str, Any]:
        batch = self.store.batch(tenant, batch_id)
        if batch is None:
            raise BatchInputError(f"no batch {batch_id!r}", "batch_id", 404)
        if batch["status"] in ("validating", "in_progress"):
            batch["status"] = "cancelling"
            batch["cancelling_at"] = int(time.time())
            self.store.save_batch(batch, tenant)
        return batch

    def refresh_counts(self, batch: dict[str, Any]) -> None:
        total, ok, failed = self.store.counts(batch["id"])
        batch["request_counts"] = {"total": total, "completed": ok, "failed": failed}

    def finalize(self, batch: dict[str, Any], *, end: str) -> dict[str, Any]:
        """Write the output and error files and close the job as ``end`` (``completed``,
        ``cancelled`` or ``expired``)."""
        tenant = self.store.tenant_of(batch["id"])
        now = int(time.time())
        if end == "completed":
            batch["status"] = "finalizing"
            batch["finalizing_at"] = now
            self.store.save_batch(batch, tenant)
        out: list[str] = []
        err: list[str] = []
        not_run = {"cancelled": "batch_cancelled", "expired": "batch_expired"}.get(end)
        for request, status, answer in self.store.results(batch["id"]):
            record: dict[str, Any] = {"id": new_id("batch_req_"), "custom_id": request.custom_id}
            if status is None:
                record["response"] = None
                record["error"] = {
                    "code": not_run or "batch_failed",
                    "message": f"the request was not run: the batch was {end}",
                }
                err.append(json.dumps(record))
                continue
            body = json.loads(answer) if answer else None
            record["response"] = {
                "status_code": status,
                "request_id": record["id"].removeprefix("batch_req_"),
                "body": body,
            }
            if 200 <= status < 300:
                record["error"] = None
                out.append(json.dumps(record))
            else:
                problem = body.get("error") if isinstance(body, dict) else None
                message = problem.get("message") if isinstance(problem, dict) else None
                code = problem.get("code") if isinstance(problem, dict) else None
                record["error"] = {
                    "code": code or f"http_{status}",
                    "message": message or f"the request failed with HTTP {status}",
                }
                err.append(json.dumps(record))
        name = batch["id"]
        if out:
            stored = self.store.add_file(
                tenant, f"{name}_output.jsonl", "batch_output", ("\n".join(out) + "\n").encode()
            )
            batch["output_file_id"] = stored.id
        if err:
            stored = self.store.add_file(
                tenant, f"{name}_error.jsonl", "batch_output", ("\n".join(err) + "\n").encode()
            )
            batch["error_file_id"] = stored.id
        self.refresh_counts(batch)
        batch["status"] = end
        batch[f"{end}_at"] = int(time.time())
        self.store.save_batch(batch, tenant)
        return batch


def _check_line(line: str, endpoint: str, seen: set[str]) -> tuple[str, str] | str:
    """(custom_id, body as JSON text) of a valid line, else what is wrong with it."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        return f"not JSON: {exc.msg}"
    if not isinstance(record, dict):
        return "a line must be a JSON object"
    custom_id = record.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id:
        return "custom_id must be a non-empty string"
    if custom_id in seen:
        return f"custom_id {custom_id!r} is repeated"
    if record.get("method") != "POST":
        return "method must be POST"
    if record.get("url") != endpoint:
        return f"url must be the batch's endpoint {endpoint}, got {record.get('url')!r}"
    body = record.get("body")
    if not isinstance(body, dict):
        return "body must be a JSON object"
    if body.get("stream"):
        return "body.stream is not supported in a batch"
    return custom_id, json.dumps(body)
