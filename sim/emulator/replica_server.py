"""One emulated replica over HTTP: vLLM's OpenAI-compatible endpoints on its own port.

``POST /v1/completions`` and ``/v1/chat/completions`` (whole answers, or Server-Sent Events
with ``stream``; the usage in a last event when ``stream_options.include_usage``),
``GET /v1/models``, ``/health`` and ``/metrics`` (with an ETag: a conditional GET is answered
304 when nothing changed). The prompt is tokenized with a real BPE vocabulary, hashed into
prefix blocks and served by a :class:`RealtimeEngine`; the answer has exactly ``max_tokens``
tokens. A replica of a pooling model serves ``POST /v1/embeddings`` (``task: embed`` in the
catalogue) or ``POST /classify`` (``task: classify``) instead, each request one batch through a
:class:`PoolingEngine`.
Faults (:class:`ReplicaFaults`) apply per request.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol, TypeVar

from aiohttp import web

from placement.domain.fleet import ReplicaSpec
from sim.costmodel.factory import cost_model_for_replica
from sim.emulator import classify_api
from sim.emulator import embeddings_api as embed_api
from sim.emulator import openai_api as api
from sim.emulator.faults import ReplicaFaults
from sim.emulator.pooling import PoolingEngine
from sim.emulator.realtime import Job, RealtimeEngine
from sim.emulator.tokenizer import Tokenizer
from sim.emulator.vllm_metrics import CONTENT_TYPE, VllmMetrics
from sim.engine import FCFS

JSON = "application/json"
_ENDPOINTS = {
    "generate": f"{api.COMPLETIONS} and {api.CHAT}",
    "embed": embed_api.EMBEDDINGS,
    "classify": classify_api.CLASSIFY,
}
SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}


class _Pooled(Protocol):
    @property
    def model(self) -> str: ...

    @property
    def inputs(self) -> tuple[embed_api.Input, ...]: ...


_Ask = TypeVar("_Ask", bound=_Pooled)


class ReplicaStopped(Exception):
    """The replica was stopped while it held the request: the connection is cut."""


class EmulatedReplica:
    """The HTTP face of one replica's engine (create it on the running loop)."""

    def __init__(
        self,
        index: int,
        spec: ReplicaSpec,
        *,
        tokenizer: Tokenizer,
        time_scale: float = 1.0,
        max_num_seqs: int | None = None,
        max_model_len: int | None = None,
        faults: ReplicaFaults | None = None,
        seed: int = 0,
        scheduling: str = FCFS,
    ) -> None:
        if max_num_seqs is not None:
            spec = replace(spec, max_num_seqs=max_num_seqs)
        self.spec = spec
        self.model_name = spec.model.name
        self.max_model_len = max_model_len or spec.model.context_tokens
        self.tokenizer = tokenizer
        cost = cost_model_for_replica(spec)
        self.engine = RealtimeEngine(
            index,
            spec,
            cost,
            time_scale=time_scale,
            on_finished=self._finished,
            scheduling=scheduling,
        )
        # a pooling model: its requests go through a pooling engine (the other stays idle)
        self.pooling = (
            PoolingEngine(cost, max_num_seqs=spec.max_num_seqs, time_scale=time_scale)
            if spec.model.pooling
            else None
        )
        self.metrics = VllmMetrics(self.pooling or self.engine, self.model_name)
        self.faults = ReplicaFaults()
        self.rng = random.Random(f"{seed}:{spec.id}")
        self.created = int(time.time())
        self.apply(faults or ReplicaFaults())

    def apply(self, faults: ReplicaFaults) -> None:
        """Switch to ``faults`` (stopping or restarting the engine as needed)."""
        if faults.stopped and not self.faults.stopped:
            self.engine.stop()
            if self.pooling is not None:
                self.pooling.stop()
        elif self.faults.stopped and not faults.stopped:
            self.engine.start()
            if self.pooling is not None:
                self.pooling.start()
        self.engine.set_slowdown(faults.slowdown)
        if self.pooling is not None:
            self.pooling.slowdown = faults.slowdown
        self.faults = faults

    def _finished(self, job: Job) -> None:
        self.metrics.observe(job)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 << 20)
        app.router.add_post(api.COMPLETIONS, self.completions)
        app.router.add_post(api.CHAT, self.chat)
        app.router.add_post(embed_api.EMBEDDINGS, self.embeddings)
        app.router.add_post(classify_api.CLASSIFY, self.classify)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/health", self.health)
        app.router.add_get("/metrics", self.metrics_page)
        return app

    # ---- endpoints -----------------------------------------------------------------------
    async def health(self, request: web.Request) -> web.StreamResponse:
        if self.faults.stopped:
            return _cut(request)
        return web.Response(status=200)

    async def metrics_page(self, request: web.Request) -> web.StreamResponse:
        if self.faults.stopped:
            return _cut(request)
        etag = self.metrics.etag()
        if request.headers.get("If-None-Match") == etag:  # nothing changed since that scrape
            return web.Response(status=304, headers={"ETag": etag})
        headers = {"Content-Type": CONTENT_TYPE, "ETag": etag}
        return web.Response(body=self.metrics.render(), headers=headers)

    async def models(self, request: web.Request) -> web.StreamResponse:
        if self.faults.stopped:
            return _cut(request)
        return _json(200, api.models_body([self.model_name], self.created))

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, "completion")

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, "chat")

    async def embeddings(self, request: web.Request) -> web.StreamResponse:
        return await self._pooled(request, "embed", self._parse_embedding, self._embeddings)

    async def classify(self, request: web.Request) -> web.StreamResponse:
        return await self._pooled(request, "classify", classify_api.parse_classify, self._classes)

    async def _pooled(
        self,
        request: web.Request,
        task: str,
        parse: Callable[[dict[str, Any]], _Ask],
        answer: Callable[[_Ask, tuple[int, ...]], bytes],
    ) -> web.StreamResponse:
        """A pooling request (``task``): one pass of the pooling engine over its inputs."""
        faults = self.faults
        if faults.stopped:
            return _cut(request)
        try:
            ask = parse(api.parse_json(await request.read()))
            counts = self._input_tokens(ask.model, ask.inputs, task)
        except api.ApiError as exc:
            return _json(exc.status, exc.body())
        if faults.fail_rate and self.rng.random() < faults.fail_rate:
            body = api.error_body(
                "injected failure", type="server_error", code=str(faults.fail_status)
            )
            return _json(faults.fail_status, body)
        assert self.pooling is not None
        job = await self.pooling.embed(counts)
        self.metrics.observe_pooled(job)
        if job.error:
            if self.faults.stopped:
                return _cut(request)
            return _json(500, api.error_body(job.error, type="server_error"))
        return _json(200, answer(ask, counts))

    def _parse_embedding(self, body: dict[str, Any]) -> embed_api.EmbeddingRequest:
        ask = embed_api.parse_embedding(body)
        hidden = self.spec.model.hidden
        if ask.dimensions is not None and ask.dimensions > hidden:
            raise api.ApiError(
                400, f"dimensions must be at most {hidden} for {self.model_name}",
                param="dimensions",
            )  # fmt: skip
        return ask

    def _embeddings(self, ask: embed_api.EmbeddingRequest, counts: tuple[int, ...]) -> bytes:
        size = ask.dimensions or self.spec.model.hidden
        encoded = [
            embed_api.encode_vector(embed_api.embedding_vector(item, size), ask.encoding_format)
            for item in ask.inputs
        ]
        return embed_api.embeddings_body(self.model_name, encoded, sum(counts))

    def _classes(self, ask: classify_api.ClassifyRequest, counts: tuple[int, ...]) -> bytes:
        probs = [classify_api.class_probs(item) for item in ask.inputs]
        return classify_api.classify_body(self.model_name, probs, sum(counts))

    def _input_tokens(
        self, model: str, inputs: tuple[embed_api.Input, ...], task: str
    ) -> tuple[int, ...]:
        """Each input's token count, once the request is one this replica serves."""
        if model != self.model_name:
            raise api.ApiError(
                404, f"The model `{model}` does not exist.", param="model",
                code="model_not_found",
            )  # fmt: skip
        if self.spec.model.task != task:
            raise api.ApiError(
                400, f"The model `{self.model_name}` does not serve this endpoint "
                f"(it serves {_ENDPOINTS[self.spec.model.task]})",
                param="model",
            )  # fmt: skip
        counts = tuple(
            len(self.tokenizer.encode(item)) if isinstance(item, str) else len(item)
            for item in inputs
        )
        for i, n in enumerate(counts):
            if n > self.max_model_len:
                raise api.ApiError(
                    400,
                    f"This model's maximum context length is {self.max_model_len} tokens; "
                    f"input[{i}] has {n}.",
                    param="input",
                    code="context_length_exceeded",
                )
        return counts

    # ---- generation ----------------------------------------------------------------------
    async def _generate(self, request: web.Request, kind: api.Kind) -> web.StreamResponse:
        faults = self.faults
        if faults.stopped:
            return _cut(request)
        try:
            gen = api.parse_generation(kind, api.parse_json(await request.read()))
            if gen.priority and not self.engine.replica.by_priority:
                # vLLM's answer to a priority its FCFS scheduler cannot honour
                raise api.ApiError(
                    400,
                    f"Got priority {gen.priority} but Priority scheduling is not enabled.",
                    param="priority",
                )
            tokens = self._prompt_tokens(gen)
        except api.ApiError as exc:
            return _json(exc.status, exc.body())
        if faults.fail_rate and self.rng.random() < faults.fail_rate:
            body = api.error_body(
                "injected failure", type="server_error", code=str(faults.fail_status)
            )
            return _json(faults.fail_status, body)
        job = self.engine.submit(
            input_tokens=len(tokens),
            output_tokens=gen.max_tokens,
            block_hashes=self.tokenizer.block_hashes(tokens),
            block_tokens=self.tokenizer.block_tokens,
            model=self.model_name,
            stream=gen.stream,
            priority=gen.priority,
        )
        request_id = ("chatcmpl-" if kind == "chat" else "cmpl-") + uuid.uuid4().hex
        try:
            if gen.stream:
                return await self._stream(request, gen, job, request_id, len(tokens))
            return await self._whole(gen, job, request_id, len(tokens))
        except ReplicaStopped:
            return _cut(request)

    def _prompt_tokens(self, gen: api.Generation) -> list[int]:
        if gen.model != self.model_name:
            raise api.ApiError(
                404,
                f"The model `{gen.model}` does not exist.",
                param="model",
                code="model_not_found",
            )
        if self.pooling is not None:
            raise api.ApiError(
                400,
                f"The model `{self.model_name}` is a pooling model: it serves "
                f"{_ENDPOINTS[self.spec.model.task]} only",
                param="model",
            )
        if gen.prompt_tokens is not None:
            tokens = list(gen.prompt_tokens)
        else:
            assert gen.prompt is not None
            tokens = self.tokenizer.encode(gen.prompt)
        if not tokens:
            raise api.ApiError(400, "the prompt is empty", param="prompt")
        total = len(tokens) + gen.max_tokens
        if total > self.max_model_len:
            raise api.ApiError(
                400,
                f"This model's maximum context length is {self.max_model_len} tokens. However, "
                f"you requested {total} tokens ({len(tokens)} in the messages, "
                f"{gen.max_tokens} in the completion). Please reduce the length of the "
                "messages or completion.",
                param="max_tokens",
                code="context_length_exceeded",
            )
        return tokens

    def _usage(self, job: Job, prompt_tokens: int) -> dict[str, object]:
        return api.usage(prompt_tokens, job.tokens, job.cached_tokens)

    async def _whole(
        self, gen: api.Generation, job: Job, request_id: str, prompt_tokens: int
    ) -> web.StreamResponse:
        while not job.done:
            await job.changed.wait()
            job.changed.clear()
        if job.error:
            if self.faults.stopped:
                raise ReplicaStopped
            return _json(500, api.error_body(job.error, type="server_error"))
        text = self.tokenizer.output_text(0, job.tokens)
        body = api.response_body(
            gen, request_id, self.created, text, self._usage(job, prompt_tokens)
        )
        return _json(200, body)

    async def _stream(
        self,
        request: web.Request,
        gen: api.Generation,
        job: Job,
        request_id: str,
        prompt_tokens: int,
    ) -> web.StreamResponse:
        faults = self.faults
        drop_at = -1
        if faults.drop_rate and self.rng.random() < faults.drop_rate:
            drop_at = faults.drop_after_tokens or max(1, gen.max_tokens // 2)
        response = web.StreamResponse(headers=SSE_HEADERS)
        await response.prepare(request)
        sent = 0
        created = self.created
        try:
            while True:
                await job.changed.wait()
                job.changed.clear()
                if job.error:
                    if self.faults.stopped:
                        raise ReplicaStopped
                    await response.write(api.error_event(job.error))
                    break
                have = job.tokens
                if 0 <= drop_at <= have:
                    if sent < drop_at:  # what came before the cut goes out first
                        text = self.tokenizer.output_text(sent, drop_at)
                        await response.write(
                            api.chunk(gen, request_id, created, text, first=sent == 0)
                        )
                    self.engine.abandon(job)
                    raise ReplicaStopped  # cut mid-stream, no closing events
                if have > sent or job.done:
                    text = self.tokenizer.output_text(sent, have)
                    finish = "length" if job.done else None
                    await response.write(
                        api.chunk(
                            gen, request_id, created, text, first=sent == 0, finish_reason=finish
                        )
                    )
                    sent = have
                if job.done:
                    if gen.include_usage:
                        use = self._usage(job, prompt_tokens)
                        await response.write(api.usage_chunk(gen, request_id, created, use))
                    break
            await response.write(api.DONE)
            await response.write_eof()
        except ConnectionResetError:
            self.engine.abandon(job)  # the client went away
        return response


def _json(status: int, body: bytes) -> web.Response:
    return web.Response(status=status, body=body, content_type=JSON)


def _cut(request: web.Request) -> web.StreamResponse:
    """Close the connection without an answer, as a dead process would."""
    transport = request.transport
    if transport is not None:
        transport.abort()
    return web.Response(status=503)  # never delivered: the connection is gone
