"""The gateway's request path: authenticate, read, route, forward, retry, relay, record.

For each ``POST /v1/completions`` or ``/v1/chat/completions`` (``/v1/embeddings`` and
``/classify``: :mod:`.pooling`, batched by :mod:`.batching`):

1. the caller's key, tenant, request class and SLOs from the headers (:mod:`.headers`); the body
   read up to the service's limit and checked (:mod:`.prompt`); the model must be served;
2. a deterministic request (temperature 0) already answered is given again from the result
   cache (:mod:`.result_cache`);
3. the service admits and places it (:meth:`PlacementService.route`): 429 with Retry-After when
   admission refuses, 503 when nothing can serve;
4. it goes to the decision's replica; a connection error or a 5xx before the first byte of the
   answer sends it on to the decision's next fallback, while the retry budget
   (:mod:`.retry`) allows and at most ``max_attempts`` tries; a replica that refuses
   connections is marked down at once (the scraper brings it back after one good scrape);
5. a streamed answer is relayed event by event as it arrives (:mod:`.stream`); a failure after
   its first byte ends the stream with an error event and is counted; a whole answer is read
   and passed on (and kept in the result cache when deterministic);
6. the outcome is settled once (:mod:`.outcome`).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from dataclasses import replace

from starlette.types import Message, Receive, Scope, Send

from placement.errors import InputError, PlacementError
from serving.api.runtime import ServiceRuntime
from serving.flow import FlowPolicy
from serving.flow.waiting import ClientGone, WaitingRoom
from serving.gateway.batching import BatchPolicy
from serving.gateway.errors import GatewayError
from serving.gateway.forward import UPSTREAM_ERRORS, Response, Upstream, base_url, refused
from serving.gateway.headers import OBJECTIVE, RequestMeta, header_map, request_meta
from serving.gateway.metrics import GatewayMetrics
from serving.gateway.outcome import Outcome, OutcomeRecorder
from serving.gateway.pooling import PoolingPath
from serving.gateway.prompt import ProxyRequest, cache_key, parse_request, with_priority
from serving.gateway.replies import JSON
from serving.gateway.replies import read_body as _read_body
from serving.gateway.replies import send_error as _send_error
from serving.gateway.replies import send_whole as _send
from serving.gateway.result_cache import CachedAnswer, ResultCache
from serving.gateway.retry import RetryBudget
from serving.gateway.settings import GatewaySettings
from serving.gateway.stream import EventRelay, read_usage
from serving.route.types import NoReplica, RouteQuery
from serving.service import Refused, Routed
from serving.telemetry_sink import TelemetrySink
from sim.emulator.openai_api import error_event

SSE = b"text/event-stream"


class _NoBudget(Exception):
    """The retry budget is spent: no further try for this request."""


class Gateway:
    """The OpenAI-compatible gateway over one service runtime."""

    def __init__(self, runtime: ServiceRuntime, settings: GatewaySettings) -> None:
        self.runtime = runtime
        self.service = runtime.service
        self.settings = settings
        self.upstream = Upstream(settings)
        self.cache = ResultCache(settings.result_cache_bytes)
        self.budget = RetryBudget(ratio=settings.retry_ratio, min_per_s=settings.retry_min_per_s)
        self.metrics = GatewayMetrics(self.service.metrics.registry, self.cache)
        self.sink = (
            TelemetrySink(
                settings.telemetry_dir,
                flush_s=settings.telemetry_flush_s,
                flush_rows=settings.telemetry_flush_rows,
            )
            if settings.telemetry_dir is not None
            else runtime.telemetry  # the service's own store (PLACEMENT_TELEMETRY_DIR), if any
        )
        self.recorder = OutcomeRecorder(self.service, self.metrics, self.sink)
        self.waiting = WaitingRoom(
            self.service,
            FlowPolicy(
                order=settings.queue_order,
                max_queued=settings.queue_max,
                deadline_slack=settings.queue_deadline_slack,
                tenant_floor=settings.queue_tenant_floor,
                band_headroom=settings.queue_band_headroom,
                backfill=settings.queue_backfill,
            ),
            prefill_tokens_per_s=settings.queue_prefill_tokens_per_s,
        )
        self._bad_request = self.metrics.requests.labels("bad_request")
        self._ids = itertools.count(1)
        self._bases: dict[str, str] = {}
        self.pooling = PoolingPath(
            service=self.service,
            upstream=self.upstream,
            recorder=self.recorder,
            waiting=self.waiting,
            policy=BatchPolicy(
                max_items=settings.embed_batch_max,
                wait_share=settings.embed_batch_wait_share,
                max_wait_s=settings.embed_batch_max_wait_s,
                in_flight=settings.embed_batch_in_flight,
            ),
            meta=self._meta,
            place=self.place,
            check_model=self._check_model,
            max_body_bytes=lambda: self.runtime.settings.max_body_bytes,
            ids=self._ids,
            retries=self.budget,
            max_attempts=settings.max_attempts,
        )
        self._tasks: list[asyncio.Task[None]] = []

    # ---- lifecycle -----------------------------------------------------------------------
    def start(self) -> None:
        self.waiting.start()
        if self.sink is not None and self.sink is not self.runtime.telemetry:  # else the app's
            self._tasks.append(asyncio.get_running_loop().create_task(self.sink.run()))

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        await self.pooling.close()
        await self.waiting.close()
        if self.sink is not None and self.sink is not self.runtime.telemetry:
            await self.sink.flush()
        await self.upstream.close()

    # ---- GET /v1/models ------------------------------------------------------------------
    async def models(self, scope: Scope, send: Send) -> None:
        try:
            self._meta(header_map(scope["headers"]))
        except GatewayError as exc:
            await _send_error(send, exc)
            return
        names = sorted({s.model for s in self.service.replicas.values()})
        created = int(time.time())
        data = [
            {"id": n, "object": "model", "created": created, "owned_by": "placement"} for n in names
        ]
        await _send(send, 200, json.dumps({"object": "list", "data": data}).encode(), JSON)

    def _meta(self, headers: dict[str, str]) -> RequestMeta:
        s = self.settings
        return request_meta(
            headers,
            self.runtime.keys,
            tenant_header=s.tenant_header,
            default_class=s.default_request_class,
        )

    def authenticate(self, headers: dict[str, str]) -> str:
        """The tenant a request with these (lower-case) headers acts for; a
        :class:`GatewayError` (401, 403) otherwise."""
        return self._meta(headers).tenant

    # ---- POST /v1/completions, /v1/chat/completions --------------------------------------
    async def generate(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one request as an ASGI app (:class:`~serving.gateway.asgi.GatewayMiddleware`)."""
        arrival, arrival_wall = time.monotonic(), time.time()
        try:
            headers = header_map(scope["headers"])
            meta = self._meta(headers)
            raw = await _read_body(receive, headers, self.runtime.settings.max_body_bytes)
        except GatewayError as exc:
            self._bad_request.inc()
            await _send_error(send, exc)
            return
        await self._generate(scope["path"], meta, raw, arrival, arrival_wall, receive, send)

    async def generate_read(
        self,
        path: str,
        raw_headers: list[tuple[bytes, bytes]],
        raw: bytes | None,
        receive: Receive,
        send: Send,
    ) -> None:
        """Answer one request whose body the HTTP protocol has read (None: over the limit;
        :mod:`.protocol`); ``receive`` gives only the disconnect."""
        arrival, arrival_wall = time.monotonic(), time.time()
        try:
            meta = self._meta(header_map(raw_headers))
            if raw is None:
                limit = self.runtime.settings.max_body_bytes
                raise GatewayError(413, f"request body over {limit} bytes", code="body_too_large")
        except GatewayError as exc:
            self._bad_request.inc()
            await _send_error(send, exc)
            return
        await self._generate(path, meta, raw, arrival, arrival_wall, receive, send)

    async def _generate(
        self,
        path: str,
        meta: RequestMeta,
        raw: bytes,
        arrival: float,
        arrival_wall: float,
        receive: Receive,
        send: Send,
    ) -> None:
        try:
            request = parse_request(path, raw, block_chars=self.runtime.settings.text_block_chars)
            self._check_model(request.gen.model)
        except GatewayError as exc:
            self._bad_request.inc()
            await _send_error(send, exc)
            return
        outcome = Outcome(
            request_id=next(self._ids),
            arrival=arrival,
            arrival_wall=arrival_wall,
            tenant=meta.tenant,
            request_class=meta.request_class,
            model=request.gen.model,
            streamed=request.gen.stream,
            input_tokens=request.input_tokens,
            ttft_slo_s=meta.ttft_slo_s,
            tpot_slo_s=meta.tpot_slo_s,
        )
        key = None
        if request.deterministic and self.cache.max_bytes:
            key = cache_key(meta.tenant, request)
            cached = self.cache.get(key)
            if cached is not None:
                await self._answer_cached(send, cached, outcome)
                return
        try:
            await self._forward(receive, send, request, outcome, key)
        finally:
            self.recorder.finish(outcome)
            self.waiting.pump()  # what it held is free: what waits may go

    async def execute(
        self, tenant: str, path: str, body: bytes, *, request_class: str = "batch"
    ) -> tuple[int, bytes] | None:
        """Run one request for ``tenant`` with no client connection (the Batch API's work):
        its answer's (status, body), or None when the fleet has no room for it now (admission
        refused it, or nothing could serve it): the caller tries again later."""
        arrival, arrival_wall = time.monotonic(), time.time()
        try:
            request = parse_request(path, body, block_chars=self.runtime.settings.text_block_chars)
            self._check_model(request.gen.model)
        except GatewayError as exc:
            return exc.status, exc.body()
        outcome = Outcome(
            request_id=next(self._ids),
            arrival=arrival,
            arrival_wall=arrival_wall,
            tenant=tenant,
            request_class=request_class,
            model=request.gen.model,
            streamed=False,
            input_tokens=request.input_tokens,
        )
        query = RouteQuery(
            tenant=tenant,
            model=request.gen.model,
            request_class=request_class,
            block_hashes=request.block_hashes,
            input_tokens=request.input_tokens,
            max_output_tokens=request.gen.max_tokens,
        )
        try:
            routed = self.service.route(query)
        except (Refused, NoReplica):
            return None
        except PlacementError as exc:
            return 400, GatewayError(400, str(exc)).body()
        answer = _Captured()
        try:
            await self._send_routed(_never, answer, request, outcome, routed, None)
        finally:
            self.recorder.finish(outcome)
            self.waiting.pump()
        if answer.status in (429, 503):  # no room after all: not an answer, try again later
            return None
        return answer.status, answer.body

    def _check_model(self, model: str) -> None:
        for state in self.service.replicas.values():
            if state.model == model:
                return
        raise GatewayError(
            404, f"The model `{model}` does not exist.", param="model", code="model_not_found"
        )

    async def _answer_cached(self, send: Send, cached: CachedAnswer, outcome: Outcome) -> None:
        outcome.cache_hit = True
        outcome.label = "cache_hit"
        outcome.status = 200
        outcome.first_byte = outcome.finish = time.monotonic()
        outcome.input_tokens = cached.input_tokens or outcome.input_tokens
        outcome.output_tokens = cached.output_tokens
        await _send(
            send, 200, cached.body, cached.content_type.encode(), [(b"x-placement-cache", b"hit")]
        )
        self.recorder.finish(outcome)

    async def _forward(
        self,
        receive: Receive,
        send: Send,
        request: ProxyRequest,
        outcome: Outcome,
        key: bytes | None,
    ) -> None:
        query = RouteQuery(
            tenant=outcome.tenant,
            model=outcome.model,
            request_class=outcome.request_class,
            block_hashes=request.block_hashes,
            input_tokens=request.input_tokens,
            max_output_tokens=request.gen.max_tokens,
        )
        routed = await self.place(query, outcome, receive, send)
        if routed is not None:
            await self._send_routed(receive, send, request, outcome, routed, key)

    async def place(
        self, query: RouteQuery, outcome: Outcome, receive: Receive, send: Send
    ) -> Routed | None:
        """Admit and place ``query`` (waiting in the flow-control queue if need be); None when
        it was refused, its client left or it is bad input (the answer already sent)."""
        try:
            routed = await self.waiting.route(
                query, arrival=outcome.arrival, ttft_slo_s=outcome.ttft_slo_s, receive=receive
            )
        except ClientGone:
            self._refused(outcome, "client disconnected while queued", "client_gone", 499)
            return None
        except Refused as exc:
            self._refused(outcome, f"refused: {exc.reason}", "refused", 429)
            await _send_error(
                send,
                GatewayError(
                    429,
                    str(exc),
                    code="rate_limit_exceeded",
                    headers={"Retry-After": str(exc.retry_after_s)},
                ),
            )
            return None
        except NoReplica as exc:
            self._refused(outcome, f"refused: {exc}", "no_replica", 503)
            await _send_error(send, GatewayError(503, str(exc) or "no replica can serve"))
            return None
        except InputError as exc:
            self._refused(outcome, "", "bad_request", 400)
            await _send_error(send, GatewayError(400, str(exc), param=OBJECTIVE))
            return None
        except PlacementError as exc:
            self._refused(outcome, "", "bad_request", 400)
            await _send_error(send, GatewayError(400, str(exc)))
            return None
        return routed

    async def _send_routed(
        self,
        receive: Receive,
        send: Send,
        request: ProxyRequest,
        outcome: Outcome,
        routed: Routed,
        key: bytes | None,
    ) -> None:
        outcome.decision_id = routed.decision_id
        state = self.service.replicas.get(routed.decision.replica_id)
        if state is not None:  # the router's own counters, before this request
            outcome.backlog_requests = max(0, state.in_flight - 1)
            outcome.backlog_prefill_tokens = max(
                0, state.in_flight_prefill_tokens - request.input_tokens
            )
        self.metrics.overhead.observe(time.monotonic() - outcome.arrival)
        if routed.priority is not None:  # replicas scheduling by priority: the router's
            request = replace(
                request, upstream_body=with_priority(request.upstream_body, routed.priority)
            )
        targets = self._targets(routed.decision.replica_id, routed.decision.fallbacks)
        self.budget.deposit()
        if request.gen.stream:
            await self._stream(receive, send, request, outcome, targets, key)
        else:
            await self._whole(send, request, outcome, targets, key)

    def _refused(self, outcome: Outcome, error: str, label: str, status: int) -> None:
        outcome.error = error
        outcome.label = label
        outcome.status = status
        if not error:  # bad input, not a serving outcome: nothing for telemetry
            outcome.cache_hit = True

    def _targets(self, primary: str, fallbacks: tuple[str, ...]) -> list[tuple[str, str]]:
        """(replica id, base URL) to try in order: the decision's replica, then its healthy
        fallbacks, at most ``max_attempts``."""
        replicas = self.service.replicas
        out: list[tuple[str, str]] = []
        for i, rid in enumerate((primary, *fallbacks)):
            state = replicas.get(rid)
            if state is None or (i > 0 and not state.healthy):
                continue
            base = self._bases.get(state.address)
            if base is None:
                base = self._bases[state.address] = base_url(state.address)
            out.append((rid, base))
            if len(out) == self.settings.max_attempts:
                break
        return out

    # ---- tries ---------------------------------------------------------------------------
    async def _open(
        self,
        request: ProxyRequest,
        outcome: Outcome,
        attempt: int,
        replica_id: str,
        base: str,
        targets: list[tuple[str, str]],
    ) -> Response | None:
        """Send one try (a retry only within the budget: :class:`_NoBudget` otherwise); None
        when the replica cannot be reached."""
        if attempt:
            if not self.budget.try_spend():
                self.metrics.retries_refused.inc()
                raise _NoBudget
            assert outcome.decision_id is not None
            self.service.redirect(outcome.decision_id, replica_id)
        outcome.replica = replica_id
        try:
            return await self.upstream.open(base, request.path, request.upstream_body)
        except UPSTREAM_ERRORS as exc:
            if refused(exc):
                self.service.mark_health(replica_id, False)  # the scraper brings it back
            self._failed(outcome, "connect", type(exc).__name__, attempt, targets)
            return None

    def _failed(
        self,
        outcome: Outcome,
        cause: str,
        detail: str,
        attempt: int,
        targets: list[tuple[str, str]],
    ) -> None:
        """A try failed before the first byte: remember why; count the retry that follows."""
        outcome.error = f"{cause}: {detail} from {outcome.replica}"
        if attempt + 1 < len(targets):
            self.metrics.retries.labels(cause).inc()

    async def _whole(
        self,
        send: Send,
        request: ProxyRequest,
        outcome: Outcome,
        targets: list[tuple[str, str]],
        key: bytes | None,
    ) -> None:
        last: tuple[int, bytes, bytes] | None = None  # the last 5xx seen, passed on if all fail
        for attempt, (replica_id, base) in enumerate(targets):
            try:
                response = await self._open(request, outcome, attempt, replica_id, base, targets)
            except _NoBudget:
                break
            if response is None:
                continue
            try:
                body = await response.read()
            except UPSTREAM_ERRORS as exc:
                self._failed(outcome, "read", type(exc).__name__, attempt, targets)
                continue
            finally:
                response.release()
            status = response.status
            content_type = response.content_type or JSON
            if status >= 500:
                last = (status, body, content_type)
                self._failed(outcome, "5xx", f"HTTP {status}", attempt, targets)
                continue
            outcome.status = status
            outcome.finish = time.monotonic()
            usage = read_usage(body) if status == 200 else None
            if usage is not None:
                outcome.output_tokens = usage.completion_tokens
                outcome.input_tokens = usage.prompt_tokens or outcome.input_tokens
                outcome.cached_tokens = usage.cached_tokens
            outcome.error = "" if status == 200 else f"HTTP {status} from {replica_id}"
            outcome.label = "ok" if status == 200 else "upstream_error"
            if key is not None and status == 200 and usage is not None:
                answer = CachedAnswer(
                    content_type.decode(), body, outcome.input_tokens, outcome.output_tokens
                )
                self.cache.put(key, answer)
            await _send(send, status, body, content_type, _served_by(replica_id, outcome))
            return
        await self._all_failed(send, outcome, last)

    async def _all_failed(
        self, send: Send, outcome: Outcome, last: tuple[int, bytes, bytes] | None
    ) -> None:
        outcome.label = "upstream_error"
        if last is not None:
            outcome.status = last[0]
            await _send(send, last[0], last[1], last[2])
            return
        outcome.status = 503
        detail = outcome.error or "no replica to try"
        await _send_error(send, GatewayError(503, f"no replica could serve the request ({detail})"))

    async def _stream(
        self,
        receive: Receive,
        send: Send,
        request: ProxyRequest,
        outcome: Outcome,
        targets: list[tuple[str, str]],
        key: bytes | None,
    ) -> None:
        last: tuple[int, bytes, bytes] | None = None
        for attempt, (replica_id, base) in enumerate(targets):
            try:
                response = await self._open(request, outcome, attempt, replica_id, base, targets)
            except _NoBudget:
                break
            if response is None:
                continue
            try:
                status = response.status
                content_type = response.content_type or SSE
                if status != 200:
                    try:
                        body = await response.read()
                    except UPSTREAM_ERRORS as exc:
                        self._failed(outcome, "read", type(exc).__name__, attempt, targets)
                        continue
                    if status >= 500:
                        last = (status, body, content_type)
                        self._failed(outcome, "5xx", f"HTTP {status}", attempt, targets)
                        continue
                    outcome.status, outcome.label = status, "upstream_error"
                    outcome.error = f"HTTP {status} from {replica_id}"
                    outcome.finish = time.monotonic()
                    await _send(send, status, body, content_type, _served_by(replica_id, outcome))
                    return
                try:
                    first = await response.next_chunk()
                except UPSTREAM_ERRORS as exc:
                    self._failed(outcome, "read", type(exc).__name__, attempt, targets)
                    continue
                if first is None:  # an empty stream: nothing came
                    self._failed(outcome, "read", "EmptyStream", attempt, targets)
                    continue
                outcome.first_byte = time.monotonic()
                self.recorder.first_token(outcome)
                outcome.status = 200
                outcome.error = ""
                start = {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [
                        (b"content-type", content_type),
                        (b"cache-control", b"no-cache"),
                        *_served_by(replica_id, outcome),
                    ],
                }
                await send(start)
                await self._relay(receive, send, request, outcome, first, response, key)
                return
            finally:
                response.release()
        await self._all_failed(send, outcome, last)

    async def _relay(
        self,
        receive: Receive,
        send: Send,
        request: ProxyRequest,
        outcome: Outcome,
        first: bytes,
        response: Response,
        key: bytes | None,
    ) -> None:
        """Pass the events on as they come; end with an error event if the replica fails."""
        relay = EventRelay(strip_usage=not request.client_wants_usage)
        kept: list[bytes] | None = [] if key is not None else None
        gone = asyncio.ensure_future(_disconnect(receive))
        error = ""
        try:
            chunk: bytes | None = first
            while chunk is not None:
                ready = relay.feed(chunk)
                if ready:
                    await send({"type": "http.response.body", "body": ready, "more_body": True})
                    if kept is not None:
                        kept.append(ready)
                if gone.done():
                    outcome.error, outcome.label = "client disconnected", "client_gone"
                    return
                chunk = await response.next_chunk()
            rest = relay.rest()
            if rest:
                await send({"type": "http.response.body", "body": rest, "more_body": True})
        except UPSTREAM_ERRORS as exc:
            error = f"the replica's stream broke after its first byte ({type(exc).__name__})"
        finally:
            gone.cancel()
        outcome.finish = time.monotonic()
        usage = relay.usage
        outcome.output_tokens = usage.completion_tokens if usage else max(0, relay.events - 1)
        if usage is not None:
            outcome.input_tokens = usage.prompt_tokens or outcome.input_tokens
            outcome.cached_tokens = usage.cached_tokens
        if error:
            self.metrics.stream_errors.inc()
            outcome.error, outcome.label, outcome.status = error, "stream_error", 502
            event = error_event(error, code=502)
            await send({"type": "http.response.body", "body": event, "more_body": True})
        elif key is not None and kept is not None and relay.done:
            answer = CachedAnswer(
                "text/event-stream", b"".join(kept), outcome.input_tokens, outcome.output_tokens
            )
            self.cache.put(key, answer)
        await send({"type": "http.response.body", "body": b"", "more_body": False})


class _Captured:
    """An ASGI ``send`` that keeps a whole answer (for requests without a client)."""

    def __init__(self) -> None:
        self.status = 0
        self.body = b""

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = int(message["status"])
        else:
            self.body += message.get("body", b"")


async def _never() -> Message:
    """An ASGI ``receive`` for a request with no client: it never disconnects."""
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


def _served_by(replica_id: str, outcome: Outcome) -> list[tuple[bytes, bytes]]:
    headers = [(b"x-placement-replica", replica_id.encode())]
    if outcome.decision_id is not None:
        headers.append((b"x-placement-decision-id", outcome.decision_id.encode()))
    return headers


async def _disconnect(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
