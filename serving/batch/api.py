"""OpenAI's Files and Batches endpoints over the batch store, as an ASGI app.

``POST /v1/files`` (multipart: ``file``, ``purpose=batch``), ``GET /v1/files``,
``GET /v1/files/{id}``, ``GET /v1/files/{id}/content``, ``DELETE /v1/files/{id}``;
``POST /v1/batches``, ``GET /v1/batches`` (``after``, ``limit``), ``GET /v1/batches/{id}``,
``POST /v1/batches/{id}/cancel``. Each caller sees only its own tenant's files and jobs (the
tenant comes from the key and headers as for every gateway request); errors are OpenAI's
error objects.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from starlette.applications import Starlette
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from serving.batch.jobs import BatchInputError, BatchJobs
from serving.batch.runner import BatchRunner
from serving.gateway.errors import GatewayError

PREFIXES = ("/v1/files", "/v1/batches")
DEFAULT_MAX_FILE_BYTES = 200 << 20
MAX_LIST = 100

Authenticate = Callable[[dict[str, str]], str]  # headers → tenant, or GatewayError


class BatchApi:
    def __init__(
        self,
        jobs: BatchJobs,
        runner: BatchRunner,
        authenticate: Authenticate,
        *,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    ) -> None:
        self.jobs = jobs
        self.store = jobs.store
        self.runner = runner
        self.authenticate = authenticate
        self.max_file_bytes = max_file_bytes
        self.prefixes: tuple[str, ...] = PREFIXES
        self.app = Starlette(
            routes=[
                Route("/v1/files", self._upload, methods=["POST"]),
                Route("/v1/files", self._list_files, methods=["GET"]),
                Route("/v1/files/{file_id}", self._file, methods=["GET"]),
                Route("/v1/files/{file_id}", self._delete_file, methods=["DELETE"]),
                Route("/v1/files/{file_id}/content", self._content, methods=["GET"]),
                Route("/v1/batches", self._create, methods=["POST"]),
                Route("/v1/batches", self._list_batches, methods=["GET"]),
                Route("/v1/batches/{batch_id}", self._batch, methods=["GET"]),
                Route("/v1/batches/{batch_id}/cancel", self._cancel, methods=["POST"]),
            ],
            exception_handlers={
                GatewayError: _gateway_error,
                BatchInputError: _input_error,
                404: _not_found,
                405: _not_allowed,
            },
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)

    def start(self) -> None:
        self.runner.start()

    async def close(self) -> None:
        await self.runner.close()
        self.store.close()

    def _tenant(self, request: Request) -> str:
        return self.authenticate({k.lower(): v for k, v in request.headers.items()})

    # ---- files ---------------------------------------------------------------------------
    async def _upload(self, request: Request) -> Response:
        tenant = self._tenant(request)
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self.max_file_bytes + 65536:
            raise GatewayError(413, f"file over {self.max_file_bytes} bytes", code="file_too_large")
        try:
            form = await request.form(max_part_size=self.max_file_bytes)
        except Exception as exc:  # malformed multipart: the parser's own message
            raise BatchInputError(f"not a multipart form: {exc}", "file") from None
        try:
            purpose = form.get("purpose")
            if purpose != "batch":
                raise BatchInputError(f"purpose must be 'batch', got {purpose!r}", "purpose")
            upload = form.get("file")
            if not isinstance(upload, UploadFile):
                raise BatchInputError("a file is required (multipart field 'file')", "file")
            content = await upload.read()
            filename = upload.filename or "upload.jsonl"
        finally:
            await form.close()
        if len(content) > self.max_file_bytes:
            raise GatewayError(413, f"file over {self.max_file_bytes} bytes", code="file_too_large")
        stored = self.store.add_file(tenant, filename, purpose, content)
        return JSONResponse(stored.as_object())

    async def _list_files(self, request: Request) -> Response:
        tenant = self._tenant(request)
        purpose = request.query_params.get("purpose")
        data = [
            f.as_object()
            for f in self.store.files(tenant)
            if purpose is None or f.purpose == purpose
        ]
        return JSONResponse({"object": "list", "data": data, "has_more": False})

    def _stored(self, request: Request) -> Any:
        tenant = self._tenant(request)
        file_id = request.path_params["file_id"]
        stored = self.store.file(tenant, file_id)
        if stored is None:
            raise BatchInputError(f"no file {file_id!r}", "file_id", 404)
        return stored

    async def _file(self, request: Request) -> Response:
        return JSONResponse(self._stored(request).as_object())

    async def _content(self, request: Request) -> Response:
        stored = self._stored(request)
        return Response(self.store.content(stored.id), media_type="application/jsonl")

    async def _delete_file(self, request: Request) -> Response:
        stored = self._stored(request)
        self.store.delete_file(stored.id)
        return JSONResponse({"id": stored.id, "object": "file", "deleted": True})

    # ---- batches -------------------------------------------------------------------------
    async def _create(self, request: Request) -> Response:
        tenant = self._tenant(request)
        try:
            params = json.loads(await request.body())
        except ValueError:
            raise BatchInputError("the body must be a JSON object") from None
        if not isinstance(params, dict):
            raise BatchInputError("the body must be a JSON object")
        batch = self.jobs.create(tenant, params)
        self.runner.wake()
        return JSONResponse(batch)

    async def _list_batches(self, request: Request) -> Response:
        tenant = self._tenant(request)
        limit_text = request.query_params.get("limit", "20")
        if not limit_text.isdigit() or not 1 <= int(limit_text) <= MAX_LIST:
            raise BatchInputError(f"limit must be 1 to {MAX_LIST}", "limit")
        batches = self.store.batches(tenant)
        after = request.query_params.get("after")
        if after is not None:
            ids = [b["id"] for b in batches]
            batches = batches[ids.index(after) + 1 :] if after in ids else []
        page = batches[: int(limit_text)]
        for batch in page:
            self._counts(batch)
        return JSONResponse(
            {
                "object": "list",
                "data": page,
                "first_id": page[0]["id"] if page else None,
                "last_id": page[-1]["id"] if page else None,
                "has_more": len(batches) > len(page),
            }
        )

    def _counts(self, batch: dict[str, Any]) -> None:
        if batch["status"] in ("in_progress", "cancelling"):
            self.jobs.refresh_counts(batch)

    async def _batch(self, request: Request) -> Response:
        tenant = self._tenant(request)
        batch_id = request.path_params["batch_id"]
        batch = self.store.batch(tenant, batch_id)
        if batch is None:
            raise BatchInputError(f"no batch {batch_id!r}", "batch_id", 404)
        self._counts(batch)
        return JSONResponse(batch)

    async def _cancel(self, request: Request) -> Response:
        tenant = self._tenant(request)
        batch = self.jobs.cancel(tenant, request.path_params["batch_id"])
        self.runner.wake()
        return JSONResponse(batch)


def _error(exc: GatewayError) -> Response:
    return Response(exc.body(), exc.status, exc.headers, media_type="application/json")


async def _gateway_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, GatewayError)
    return _error(exc)


async def _input_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, BatchInputError)
    code = "not_found" if exc.status == 404 else "invalid_request"
    return _error(GatewayError(exc.status, exc.message, param=exc.param, code=code))


async def _not_found(request: Request, exc: Exception) -> Response:
    return _error(GatewayError(404, f"no such path: {request.url.path}", code="not_found"))


async def _not_allowed(request: Request, exc: Exception) -> Response:
    return _error(GatewayError(405, f"{request.method} is not allowed on {request.url.path}"))
