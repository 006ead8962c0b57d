"""The gateway's pooling endpoints, ``POST /v1/embeddings`` and ``POST /classify`` (vLLM's, for
classification models): each request placed, then batched with others bound for the same
replica (:mod:`.batching`), and its share of the batch's answer given back.

1. The caller's key, tenant, class and SLO from the headers; the body read and checked
   (:func:`sim.emulator.embeddings_api.parse_embedding`,
   :func:`sim.emulator.classify_api.parse_classify`); the model must be served; an input
   whose lower-bound token count (characters / 8) is over the model's context window is
   refused here (400), so one bad input cannot fail a batch.
2. It is admitted and placed like a completion (:meth:`Gateway.place`: credits, the SLO
   gate, the flow-control queue), as one request of its summed token estimate — at most the
   model's context window, which bounds each input rather than their sum.
3. It joins the batch of its endpoint, replica, model and answer format. The batch goes as one
   request whose ``input`` lists every member's inputs in order; the answer's ``data`` (an
   embedding or a class per input) is cut back into the members' answers (indexes from 0
   again), and the replica's
   ``prompt_tokens`` are shared out in proportion to the members' estimates. A batch the
   replica refuses as a whole (a 4xx) is sent again one request at a time, so only the bad
   request fails. A connection error or a 5xx sends the batch to another healthy replica of
   the model (the least loaded), within the gateway's retry budget and ``max_attempts`` tries,
   each member's lease moving with it; a replica that refused the connection is marked down.
4. The answer carries ``x-placement-replica`` and ``x-placement-batch`` (requests in its
   batch); the outcome is settled once per request.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from prometheus_client import CollectorRegistry, Histogram
from starlette.types import Receive, Scope, Send

from placement.domain.llm import get_model, text_token_estimate
from placement.errors import InputError
from serving.flow.waiting import WaitingRoom
from serving.gateway.batching import Batcher, BatchPolicy
from serving.gateway.errors import GatewayError
from serving.gateway.forward import UPSTREAM_ERRORS, Upstream, base_url, refused
from serving.gateway.headers import RequestMeta, header_map
from serving.gateway.outcome import Outcome, OutcomeRecorder
from serving.gateway.prompt import MAX_CHARS_PER_TOKEN
from serving.gateway.replies import JSON, read_body, send_error, send_whole
from serving.gateway.retry import RetryBudget
from serving.route.types import RouteQuery
from serving.service import PlacementService, Routed, UnknownDecision
from sim.emulator import embeddings_api as embed_api
from sim.emulator.classify_api import CLASSIFY, parse_classify
from sim.emulator.openai_api import ApiError, parse_json

BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


@dataclass(frozen=True, slots=True)
class BatchKey:
    replica_id: str
    path: str
    model: str
    params: tuple[tuple[str, Any], ...]  # the body's other members (the answer's format)


@dataclass(frozen=True, slots=True)
class Ask:
    """A pooling request as the gateway needs it."""

    model: str
    inputs: tuple[embed_api.Input, ...]
    params: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class Call:
    """One request's part of a batch: its inputs as sent, their token estimates, its decision."""

    inputs: list[Any]
    estimates: tuple[int, ...]
    decision_id: str | None = None


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    body: bytes
    prompt_tokens: int = 0
    error: str = ""
    batch: int = 1  # requests in the batch that answered it
    replica: str = ""  # the replica that answered ("": none)


class BatchMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Histogram(
            "placement_gateway_batch_requests",
            "Requests per batch sent to an embedding replica",
            buckets=BATCH_BUCKETS,
            registry=registry,
        )
        self.items = Histogram(
            "placement_gateway_batch_inputs",
            "Inputs per batch sent to an embedding replica",
            buckets=BATCH_BUCKETS,
            registry=registry,
        )

    def observe(self, requests: int, items: int) -> None:
        self.requests.observe(requests)
        self.items.observe(items)


class PoolingPath:
    """``POST /v1/embeddings`` and ``/classify`` through the gateway (the module's docstring)."""

    def __init__(
        self,
        *,
        service: PlacementService,
        upstream: Upstream,
        recorder: OutcomeRecorder,
        waiting: WaitingRoom,
        policy: BatchPolicy,
        meta: Callable[[dict[str, str]], RequestMeta],
        place: Callable[[RouteQuery, Outcome, Receive, Send], Awaitable[Routed | None]],
        check_model: Callable[[str], None],
        max_body_bytes: Callable[[], int],
        ids: itertools.count[int],
        retries: RetryBudget,
        max_attempts: int,
    ) -> None:
        self.service = service
        self.upstream = upstream
        self.recorder = recorder
        self.waiting = waiting
        self.policy = policy
        self._meta = meta
        self._place = place
        self._check_model = check_model
        self._max_body_bytes = max_body_bytes
        self._ids = ids
        self.retries = retries
        self.max_attempts = max_attempts
        self.metrics = BatchMetrics(service.metrics.registry)
        self.batcher: Batcher[BatchKey, Call, Answer] = Batcher(
            policy, self._send_batch, on_batch=self.metrics.observe
        )

    async def close(self) -> None:
        await self.batcher.close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        arrival, arrival_wall = time.monotonic(), time.time()
        try:
            headers = header_map(scope["headers"])
            meta = self._meta(headers)
            raw = await read_body(receive, headers, self._max_body_bytes())
            ask = _parse(scope["path"], raw)
            self._check_model(ask.model)
            estimates = _estimates(ask)
        except GatewayError as exc:
            self.recorder.metrics.requests.labels("bad_request").inc()
            await send_error(send, exc)
            return
        outcome = Outcome(
            request_id=next(self._ids),
            arrival=arrival,
            arrival_wall=arrival_wall,
            tenant=meta.tenant,
            request_class=meta.request_class,
            model=ask.model,
            streamed=False,
            input_tokens=sum(estimates),
            ttft_slo_s=meta.ttft_slo_s,
        )
        try:
            await self._serve(scope["path"], receive, send, ask, estimates, outcome)
        finally:
            self.recorder.finish(outcome)
            self.waiting.pump()  # what it held is free: what waits may go

    async def _serve(
        self,
        path: str,
        receive: Receive,
        send: Send,
        ask: Ask,
        estimates: tuple[int, ...],
        outcome: Outcome,
    ) -> None:
        query = RouteQuery(
            tenant=outcome.tenant,
            model=ask.model,
            request_class=outcome.request_class,
            block_hashes=(),
            input_tokens=min(sum(estimates), _context(ask.model)),
            max_output_tokens=0,
        )
        routed = await self._place(query, outcome, receive, send)
        if routed is None:
            return
        outcome.decision_id = routed.decision_id
        outcome.replica = routed.decision.replica_id
        self.recorder.metrics.overhead.observe(time.monotonic() - outcome.arrival)
        key = BatchKey(routed.decision.replica_id, path, ask.model, ask.params)
        call = Call([_as_json(i) for i in ask.inputs], estimates, routed.decision_id)
        self.retries.deposit()
        slo = self.waiting.ttft_slo_s(outcome.request_class, outcome.ttft_slo_s)
        if self.policy.enabled:
            wait_s = self.policy.wait_budget(slo)
            answer = await self.batcher.submit(key, call, size=len(call.inputs), wait_s=wait_s)
        else:
            self.metrics.observe(1, len(call.inputs))
            answer = (await self._send_batch(key, [call]))[0]
        outcome.first_byte = outcome.finish = time.monotonic()
        outcome.replica = answer.replica or outcome.replica
        outcome.status = answer.status
        outcome.error = answer.error
        if answer.status == 200:
            outcome.input_tokens = answer.prompt_tokens or outcome.input_tokens
            outcome.label = "ok"
        else:
            outcome.label = "upstream_error"
        extra = [
            (b"x-placement-replica", (answer.replica or routed.decision.replica_id).encode()),
            (b"x-placement-decision-id", routed.decision_id.encode()),
            (b"x-placement-batch", str(answer.batch).encode()),
        ]
        await send_whole(send, answer.status, answer.body, JSON, extra)

    # ---- one batch -----------------------------------------------------------------------
    async def _send_batch(self, key: BatchKey, calls: Sequence[Call]) -> list[Answer]:
        replica_id = key.replica_id
        tried: list[str] = []
        while True:
            answers, cause = await self._try(replica_id, key, calls)
            tried.append(replica_id)
            if not cause or len(tried) >= self.max_attempts:
                return answers
            following = self._another(key.model, tried)
            if following is None:
                return answers
            if not self.retries.try_spend():
                self.recorder.metrics.retries_refused.inc()
                return answers
            self.recorder.metrics.retries.labels(cause).inc()
            for call in calls:
                if call.decision_id is not None:
                    with contextlib.suppress(UnknownDecision):  # its lease expired meanwhile
                        self.service.redirect(call.decision_id, following)
            replica_id = following

    def _another(self, model: str, tried: list[str]) -> str | None:
        """The least loaded healthy replica of ``model`` not tried yet."""
        candidates = [
            s
            for s in self.service.replicas.values()
            if s.model == model and s.healthy and s.id not in tried
        ]
        return min(candidates, key=lambda s: (s.in_flight, s.id)).id if candidates else None

    async def _try(
        self, replica_id: str, key: BatchKey, calls: Sequence[Call]
    ) -> tuple[list[Answer], str]:
        """One try: the answers, and why another replica should be tried ("": it should not)."""
        n = len(calls)
        state = self.service.replicas.get(replica_id)
        if state is None:
            return [_failure(503, f"replica {replica_id} is gone")] * n, "connect"
        body: dict[str, Any] = {
            "model": key.model,
            "input": [item for call in calls for item in call.inputs],
            **dict(key.params),
        }
        try:
            response = await self.upstream.open(
                base_url(state.address), key.path, orjson.dumps(body)
            )
            try:
                status, raw = response.status, await response.read()
            finally:
                response.release()
        except UPSTREAM_ERRORS as exc:
            if refused(exc):
                self.service.mark_health(replica_id, False)  # the scraper brings it back
            error = f"connect: {type(exc).__name__} from {replica_id}"
            return [_failure(503, f"no replica could serve the request ({error})")] * n, "connect"
        if status == 200:
            try:
                return _split(raw, calls, replica_id), ""
            except (ValueError, KeyError, TypeError, IndexError):
                return [_failure(502, f"a malformed embeddings answer from {replica_id}")] * n, ""
        if n > 1 and 400 <= status < 500:  # one bad request: the others still go
            answers: list[Answer] = []
            for call in calls:
                answers.extend((await self._try(replica_id, key, [call]))[0])
            return answers, ""
        error = f"HTTP {status} from {replica_id}"
        answer = Answer(status, raw, error=error, batch=n, replica=replica_id)
        return [answer] * n, "5xx" if status >= 500 else ""


def _parse(path: str, raw: bytes) -> Ask:
    try:
        body = parse_json(raw)
        if path == CLASSIFY:
            classify = parse_classify(body)
            return Ask(classify.model, classify.inputs)
        embed = embed_api.parse_embedding(body)
        params: tuple[tuple[str, Any], ...] = (("encoding_format", embed.encoding_format),)
        if embed.dimensions is not None:
            params += (("dimensions", embed.dimensions),)
        return Ask(embed.model, embed.inputs, params)
    except ApiError as exc:
        raise GatewayError(exc.status, exc.message, param=exc.param, code=exc.code) from None


def _context(model: str) -> int:
    try:
        return get_model(model).context_tokens
    except InputError:
        return 1 << 30  # outside the catalogue: its replicas judge the length


def _estimates(ask: Ask) -> tuple[int, ...]:
    """Each input's token estimate; a :class:`GatewayError` (400) for an input surely over the
    model's context window."""
    context = _context(ask.model)
    out: list[int] = []
    for i, item in enumerate(ask.inputs):
        if isinstance(item, str):
            least = len(item) // MAX_CHARS_PER_TOKEN
            estimate = text_token_estimate(len(item), ask.model, 0)
        else:
            least = estimate = len(item)
        if least > context:
            raise GatewayError(
                400,
                f"input[{i}] (at least {least} tokens) exceeds the context window of "
                f"{ask.model} ({context} tokens)",
                param="input",
                code="context_length_exceeded",
            )
        out.append(max(1, estimate))
    return tuple(out)


def _as_json(item: embed_api.Input) -> Any:
    return item if isinstance(item, str) else list(item)


def _failure(status: int, message: str) -> Answer:
    return Answer(status, GatewayError(status, message).body(), error=message)


def _split(raw: bytes, calls: Sequence[Call], replica_id: str) -> list[Answer]:
    """The batch's answer cut into one answer per call, in order."""
    whole = orjson.loads(raw)
    data = sorted(whole["data"], key=lambda d: int(d["index"]))
    if len(data) != sum(len(c.inputs) for c in calls):
        raise ValueError("the answer has a different number of results than inputs")
    tokens = _shares(int(whole["usage"]["prompt_tokens"]), [sum(c.estimates) for c in calls])
    answers: list[Answer] = []
    start = 0
    for call, used in zip(calls, tokens, strict=True):
        mine = data[start : start + len(call.inputs)]
        start += len(call.inputs)
        usage = {**whole["usage"], "prompt_tokens": used, "total_tokens": used}
        body = {**whole, "data": [{**d, "index": i} for i, d in enumerate(mine)], "usage": usage}
        answers.append(Answer(200, orjson.dumps(body), used, batch=len(calls), replica=replica_id))
    return answers


def _shares(total: int, weights: list[int]) -> list[int]:
    """``total`` shared out in proportion to ``weights``, in whole units that sum to it
    (largest remainders first)."""
    weight = max(1, sum(weights))
    exact = [total * w / weight for w in weights]
    out = [int(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda i: exact[i] - out[i], reverse=True)
    for i in order[: total - sum(out)]:
        out[i] += 1
    return out
