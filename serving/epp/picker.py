"""The endpoint picker: an OpenAI request in, its endpoints (or a refusal) out.

It asks the placement service exactly what ``POST /v1/route`` asks it — the same
:class:`~serving.api.schemas.RouteRequest` validation and
:func:`~serving.api.routers.route.to_query` (prompt text cut into blocks of the service's
``text_block_chars``, tokens estimated from its length; token-id prompts hashed in blocks of the
profile's ``block_tokens``), then :meth:`PlacementService.route` (admission, route path, lease) —
so a request gets the same decision through Envoy as through the HTTP API.

- tenant: the ``x-gateway-inference-fairness-id`` header, else :attr:`PickerConfig.tenant`;
- request class: the ``x-gateway-inference-objective`` header (a class the service knows:
  ``interactive``, ``batch``, …), else :attr:`PickerConfig.request_class`;
- endpoints: the decision's replica then its fallbacks, as ``ip:port``, at most
  ``1 + max_fallbacks`` (0 fallbacks for a proxy whose cluster reads a single address, such as
  Envoy's ORIGINAL_DST);
- a proxy's subset hint keeps only the endpoints it names; when it names none of the
  decision's, the least loaded healthy replica of the model in the subset serves, and the lease
  moves there; none at all is a 503;
- the proxy's report of the endpoint that served (after a retry to a fallback) moves the lease
  too, so in-flight counts and the prefix index follow where the request really went;
- flow control (:attr:`PickerConfig.flow`): :meth:`EndpointPicker.place` lets a request that
  cannot be placed now wait in the flow-control queue the gateway uses
  (:class:`serving.flow.waiting.WaitingRoom`) until it can, or until its TTFT deadline can no
  longer be met (then 429); the caller's gRPC stream simply holds its answer meanwhile, and a
  cancelled stream takes the request out of the queue at once.

Authentication is the proxy's: the picker trusts the headers Envoy forwards, as the Inference
Extension's picker does.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pydantic import ValidationError

from placement.domain.prefix import hash_tokens
from placement.errors import InputError, PlacementError
from serving.api.routers.route import to_query
from serving.api.schemas import RouteRequest
from serving.epp.body import InferenceBody
from serving.epp.metrics import PickerMetrics
from serving.epp.protocol import FAIRNESS_ID, FULL_DUPLEX_STREAMED, NONE, OBJECTIVE
from serving.epp.refusals import Refusal
from serving.flow import FlowPolicy
from serving.flow.waiting import WaitingRoom
from serving.leases import Lease
from serving.route.types import Decision, NoReplica, ReplicaState, RouteQuery
from serving.service import PlacementService, Refused, Routed, UnknownDecision
from serving.telemetry_sink import TelemetrySink, lease_row, wall_of

DEFAULT_TEXT_BLOCK_CHARS = 2048  # the service's default (serving/api/settings.py)
DEFAULT_BLOCK_TOKENS = 512  # the default profile's block_tokens
DEFAULT_MAX_BODY_BYTES = 1 << 20
DEFAULT_TENANT = "default"
DEFAULT_REQUEST_CLASS = "interactive"
_FIELD_SOURCES = {"tenant": FAIRNESS_ID, "request_class": OBJECTIVE}


@dataclass(frozen=True, slots=True, kw_only=True)
class PickerConfig:
    text_block_chars: int = DEFAULT_TEXT_BLOCK_CHARS
    block_tokens: int = DEFAULT_BLOCK_TOKENS
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_fallbacks: int | None = None  # None: every fallback the decision lists
    tenant: str = DEFAULT_TENANT
    request_class: str = DEFAULT_REQUEST_CLASS
    # body modes assumed when Envoy does not say (it does, in the stream's first message)
    request_body_mode: int = FULL_DUPLEX_STREAMED
    response_body_mode: int = NONE
    # flow control: a request admission refuses waits in this queue (None: refused at once)
    flow: FlowPolicy | None = None
    # the prefill rate the queue assumes to tell when a waiting request's first token is due
    queue_prefill_tokens_per_s: float = 20000.0


@dataclass(slots=True, kw_only=True)
class Pick:
    """Where one request goes. ``decision_id`` is None for a request without a body (no model
    to route by: the least loaded healthy replica, and no lease)."""

    endpoints: tuple[str, ...]
    replica_id: str
    reason: str
    plan_version: int | None = None
    decision_id: str | None = None
    max_output_tokens: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    first_token_at: float | None = None  # the service clock when the first byte came back
    # the engine priority the request goes with (put in its body), when the replicas schedule
    # by priority (vLLM ``--scheduling-policy priority``)
    priority: int | None = None


def endpoint_of(address: str) -> str:
    """The ``host:port`` of a replica address (``http://10.0.0.1:8000/v1`` → ``10.0.0.1:8000``)."""
    return address.split("://", 1)[-1].split("/", 1)[0]


class EndpointPicker:
    def __init__(
        self,
        service: PlacementService,
        config: PickerConfig | None = None,
        *,
        metrics: PickerMetrics | None = None,
        telemetry: TelemetrySink | None = None,
    ) -> None:
        self.service = service
        self.config = config or PickerConfig()
        self.metrics = metrics or PickerMetrics(service.metrics.registry)
        self.telemetry = telemetry  # where outcomes are recorded (None: not recorded)
        self._request_ids = itertools.count(1)
        flow = self.config.flow
        self.room = (
            WaitingRoom(
                service,
                flow,
                prefill_tokens_per_s=self.config.queue_prefill_tokens_per_s,
                metric_prefix="placement_epp",
            )
            if flow is not None and flow.max_queued > 0
            else None
        )

    def now(self) -> float:
        """The clock the flow-control queue's deadlines are read on."""
        return self.room.clock() if self.room is not None else self.service.clock()

    def start(self) -> None:
        """Start the flow-control queue's pump (on the serving event loop)."""
        if self.room is not None:
            self.room.start()

    async def close(self) -> None:
        if self.room is not None:
            await self.room.close()

    # --- picking ---------------------------------------------------------------------------

    def pick(
        self, body: InferenceBody, headers: Mapping[str, str], subset: tuple[str, ...] | None
    ) -> Pick | Refusal:
        started = time.perf_counter()
        outcome = self._pick(body, headers, subset)
        self.metrics.pick_latency.observe(time.perf_counter() - started)
        self.count(outcome)
        return outcome

    def count(self, outcome: Pick | Refusal) -> None:
        if isinstance(outcome, Pick):
            label = "routed" if outcome.decision_id is not None else "bodyless"
        else:
            label = {
                400: "bad_request",
                404: "not_found",
                413: "too_large",
                429: "shed",
                503: "unavailable",
            }.get(outcome.status, "bad_request")
        self.metrics.requests.labels(label).inc()

    def _pick(
        self, body: InferenceBody, headers: Mapping[str, str], subset: tuple[str, ...] | None
    ) -> Pick | Refusal:
        query = self._prepare(body, headers)
        if isinstance(query, Refusal):
            return query
        try:
            routed = self.service.route(query)
        except PlacementError as exc:
            return _refusal(exc, body.model)
        return self._destination(routed, query, subset)

    async def place(
        self,
        body: InferenceBody,
        headers: Mapping[str, str],
        subset: tuple[str, ...] | None,
        *,
        arrival: float,
        on_queued: Callable[[float], None] | None = None,
    ) -> Pick | Refusal:
        """:meth:`pick`, but a request admission refuses waits in the flow-control queue
        (from ``arrival``, the service clock when its headers came) until it is placed or its
        deadline passes; cancelled meanwhile, it leaves the queue. ``on_queued`` is told the
        longest it may wait when it starts waiting."""
        room = self.room
        if room is None:
            return self.pick(body, headers, subset)
        started = time.perf_counter()
        offered = room.offered
        outcome: Pick | Refusal
        query = self._prepare(body, headers)
        if isinstance(query, Refusal):
            outcome = query
        else:
            try:
                routed = await room.route(
                    query, arrival=arrival, ttft_slo_s=None, on_queued=on_queued
                )
            except PlacementError as exc:
                outcome = _refusal(exc, body.model)
            else:
                outcome = self._destination(routed, query, subset)
        if room.offered == offered:  # it did not wait: its wait is timed by the queue's metrics
            self.metrics.pick_latency.observe(time.perf_counter() - started)
        self.count(outcome)
        return outcome

    def _prepare(self, body: InferenceBody, headers: Mapping[str, str]) -> RouteQuery | Refusal:
        if not any(s.model == body.model for s in self.service.replicas.values()):
            return Refusal(
                status=404,
                message=f"The model '{body.model}' does not exist.",
                code="model_not_found",
                param="model",
            )
        try:
            return self._query(body, headers)
        except _BadField as exc:
            param = (exc.source or "").removeprefix("header ")
            return Refusal(status=400, message=str(exc), code="invalid_value", param=param)

    def _query(self, body: InferenceBody, headers: Mapping[str, str]) -> RouteQuery:
        request: dict[str, object] = {
            "tenant": headers.get(FAIRNESS_ID) or self.config.tenant,
            "model": body.model,
            "request_class": headers.get(OBJECTIVE) or self.config.request_class,
            "max_output_tokens": body.max_output_tokens,
        }
        if body.prompt_tokens is not None:
            tokens = body.prompt_tokens
            request["block_hashes"] = list(hash_tokens(tokens, self.config.block_tokens))
            request["input_tokens"] = len(tokens)
        else:
            request["prompt"] = body.prompt or ""
        try:
            validated = RouteRequest.model_validate(request)
        except ValidationError as exc:
            error = exc.errors(include_url=False)[0]
            name = str(error["loc"][0]) if error["loc"] else "body"
            header = _FIELD_SOURCES.get(name)
            source = f"header {header}" if header else name
            raise _BadField(error["msg"], source=source) from None
        return to_query(validated, self.config.text_block_chars)

    def _destination(
        self, routed: Routed, query: RouteQuery, subset: tuple[str, ...] | None
    ) -> Pick | Refusal:
        decision = routed.decision
        targets = list(
            zip(routed.replica_ids, (endpoint_of(a) for a in routed.addresses), strict=True)
        )
        if subset is not None:
            allowed = set(subset)
            targets = [t for t in targets if t[1] in allowed] or [
                (s.id, endpoint_of(s.address)) for s in self._least_loaded(query.model, allowed)
            ]
        pick = Pick(
            endpoints=(),
            replica_id=decision.replica_id,
            reason=decision.reason,
            plan_version=decision.plan_version,
            decision_id=routed.decision_id,
            max_output_tokens=query.max_output_tokens,
            priority=routed.priority,
        )
        if not targets:
            self.finish(pick, ok=False, output_tokens=0)
            return Refusal(
                status=503,
                message="No endpoint of the proxy's subset can serve the request.",
                code="no_replica",
            )
        if targets[0][0] != decision.replica_id:
            self._move(pick, targets[0][0])
        limit = self._limit()
        pick.endpoints = tuple(endpoint for _, endpoint in targets[:limit])
        pick.headers = self._decision_headers(pick)
        return pick

    def pick_any(self, subset: tuple[str, ...] | None) -> Pick | Refusal:
        """A request without a body (``GET /v1/models``, a health check): the least loaded
        healthy replica of any model; no admission, no lease."""
        allowed = None if subset is None else set(subset)
        candidates = self._least_loaded(None, allowed)
        if not candidates:
            outcome: Pick | Refusal = Refusal(
                status=503, message="No healthy replica.", code="no_replica"
            )
        else:
            first = candidates[0]
            outcome = Pick(
                endpoints=tuple(endpoint_of(s.address) for s in candidates[: self._limit()]),
                replica_id=first.id,
                reason="any-healthy",
            )
            outcome.headers = self._decision_headers(outcome)
        self.count(outcome)
        return outcome

    def _least_loaded(self, model: str | None, allowed: set[str] | None) -> list[ReplicaState]:
        return sorted(
            (
                s
                for s in self.service.replicas.values()
                if s.healthy
                and (model is None or s.model == model)
                and (allowed is None or endpoint_of(s.address) in allowed)
            ),
            key=lambda s: (s.in_flight, s.id),
        )

    def _limit(self) -> int:
        fallbacks = self.config.max_fallbacks
        return 1 << 30 if fallbacks is None else 1 + fallbacks

    def _decision_headers(self, pick: Pick) -> dict[str, str]:
        headers = {"x-placement-replica": pick.replica_id, "x-placement-reason": pick.reason}
        if pick.plan_version is not None:
            headers["x-placement-plan-version"] = str(pick.plan_version)
        if pick.decision_id is not None:
            headers["x-placement-decision-id"] = pick.decision_id
        return headers

    # --- what happened next ----------------------------------------------------------------

    def served(self, pick: Pick, endpoint: str) -> None:
        """The proxy reports that ``endpoint`` served ``pick``: move the lease when it is not
        the replica the lease counts."""
        if pick.decision_id is None or endpoint == endpoint_of(self._address(pick.replica_id)):
            return
        for state in self.service.replicas.values():
            if endpoint_of(state.address) == endpoint:
                self.metrics.served_elsewhere.inc()
                self._move(pick, state.id)
                return

    def _address(self, replica_id: str) -> str:
        state = self.service.replicas.get(replica_id)
        return "" if state is None else state.address

    def _move(self, pick: Pick, replica_id: str) -> None:
        """Count the request on ``replica_id`` instead of where its lease counts it."""
        assert pick.decision_id is not None
        service = self.service
        state = service.replicas.get(replica_id)
        try:
            lease = service.lease(pick.decision_id)
        except UnknownDecision:
            return
        if state is None or lease.replica_id == replica_id:
            return
        now = service.clock()
        path = service.route_path
        path.on_complete(lease.replica_id, lease.query, now, ok=False)
        moved = Decision(
            replica_id=replica_id,
            address=state.address,
            reason=pick.reason,
            plan_version=pick.plan_version,
            predicted_ttft_s=0.0,
        )
        path.on_dispatch(moved, lease.query, now)
        lease.replica_id = replica_id
        pick.replica_id = replica_id

    def first_token(self, pick: Pick) -> None:
        if pick.decision_id is None:
            return
        pick.first_token_at = self.service.clock()
        with contextlib.suppress(UnknownDecision):  # the lease expired: nothing to update
            self.service.first_token(pick.decision_id)

    def finish(self, pick: Pick, *, ok: bool, output_tokens: int) -> None:
        """The response ended (or the stream did): release the lease, count it in its
        tenant's usage and record it in the telemetry store."""
        if pick.decision_id is None:
            return
        service = self.service
        with contextlib.suppress(UnknownDecision):
            lease = service.lease(pick.decision_id)
            ttft = None if pick.first_token_at is None else pick.first_token_at - lease.routed_at
            service.complete(pick.decision_id, output_tokens=output_tokens, ok=ok, ttft_s=ttft)
            if self.telemetry is not None:
                self._record(self.telemetry, lease, ok=ok, ttft_s=ttft, output_tokens=output_tokens)
        pick.decision_id = None
        if self.room is not None:
            self.room.pump()  # what it held is free: what waits may go

    def _record(
        self,
        sink: TelemetrySink,
        lease: Lease,
        *,
        ok: bool,
        ttft_s: float | None,
        output_tokens: int,
    ) -> None:
        state = self.service.replicas.get(lease.replica_id)
        if state is None and ok:
            return  # deregistered since: a served row needs its details
        now = self.service.clock()
        tpot = None
        if ok and ttft_s is not None and output_tokens > 1:
            tpot = max(0.0, now - lease.routed_at - ttft_s) / (output_tokens - 1)
        sink.add(
            lease_row(
                lease,
                state,
                request_id=next(self._request_ids),
                routed_wall=wall_of(lease.routed_at, now),
                finished_wall=time.time(),
                ttft_s=ttft_s,
                tpot_s=tpot,
                output_tokens=output_tokens,
                error="" if ok else "upstream error",
            )
        )


class _BadField(InputError):
    pass


def _refusal(exc: PlacementError, model: str) -> Refusal:
    """What routing (or the flow-control queue) raised, as the picker answers it."""
    if isinstance(exc, Refused):
        return Refusal(
            status=429,
            message=f"Request shed by admission ({exc.reason}); retry after {exc.retry_after_s} s.",
            code="rate_limit_exceeded",
            retry_after_s=exc.retry_after_s,
        )
    if isinstance(exc, NoReplica):
        return Refusal(
            status=503,
            message=str(exc) or f"No replica can serve '{model}' now.",
            code="no_replica",
        )
    if isinstance(exc, InputError):  # e.g. an unknown request class: name the header it came from
        header = _FIELD_SOURCES.get(exc.field or "")
        message = str(exc)
        if header is not None:
            message = f"header {header}: {message.split(': ', 1)[-1]}"
        return Refusal(status=400, message=message, code="invalid_value", param=header)
    return Refusal(status=400, message=str(exc), code="invalid_request")
