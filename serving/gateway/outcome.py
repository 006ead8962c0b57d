"""How each request through the gateway went, recorded where the service and training learn.

An :class:`Outcome` is filled in as the request goes (replica, first byte, tokens, status,
error, cache hit) and, when it ends, :class:`OutcomeRecorder` settles it in one place:

- the service's lease accounting (first token, completion with the output tokens), so the
  route path's in-flight counts and observed TPOT, admission and the credit counters see real
  traffic without a ``POST /v1/outcomes``;
- the gateway's metrics (outcome counts, TTFT, SLO met or missed);
- the telemetry store, when one is configured: one row of the ``requests`` schema per request
  a replica served or failed, and per refusal (``error = "refused: …"``). A non-streamed
  answer's first token is only seen with its last, so its ``ttft_s`` and ``tpot_s`` are null
  and its first-token time is its finish time. Answers from the result cache reach no replica
  and are counted in ``/metrics`` only.

Rows are buffered and appended as Parquet files by :class:`serving.telemetry_sink.TelemetrySink`.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from serving.gateway.metrics import GatewayMetrics
from serving.service import PlacementService, UnknownDecision
from serving.telemetry_sink import TelemetrySink


@dataclass(slots=True, kw_only=True)
class Outcome:
    request_id: int
    arrival: float  # monotonic seconds
    arrival_wall: float  # Unix seconds
    tenant: str
    request_class: str
    model: str
    streamed: bool
    input_tokens: int  # the estimate until the replica reports the real count
    ttft_slo_s: float | None = None
    tpot_slo_s: float | None = None
    decision_id: str | None = None
    replica: str | None = None
    status: int = 0
    error: str = ""
    label: str = "ok"  # the outcome counted in /metrics
    first_byte: float | None = None  # monotonic
    finish: float | None = None
    output_tokens: int = 0
    cached_tokens: int = 0
    cache_hit: bool = False
    backlog_requests: int = 0
    backlog_prefill_tokens: int = 0

    @property
    def ttft_s(self) -> float | None:
        return None if self.first_byte is None else self.first_byte - self.arrival

    @property
    def tpot_s(self) -> float | None:
        if self.first_byte is None or self.finish is None or self.output_tokens < 2:
            return None
        return (self.finish - self.first_byte) / (self.output_tokens - 1)


class OutcomeRecorder:
    def __init__(
        self,
        service: PlacementService,
        metrics: GatewayMetrics,
        sink: TelemetrySink | None = None,
    ) -> None:
        self.service = service
        self.metrics = metrics
        self.sink = sink

    def finish(self, outcome: Outcome) -> None:
        self._settle_lease(outcome)
        m = self.metrics
        m.outcome(outcome.label).inc()
        ttft = outcome.ttft_s
        if ttft is not None:
            m.ttft.observe(ttft)
        if not outcome.error:
            if outcome.ttft_slo_s is not None and ttft is not None:
                m.slo.labels("ttft", "met" if ttft <= outcome.ttft_slo_s else "missed").inc()
            tpot = outcome.tpot_s
            if outcome.tpot_slo_s is not None and tpot is not None:
                m.slo.labels("tpot", "met" if tpot <= outcome.tpot_slo_s else "missed").inc()
        if self.sink is not None and not outcome.cache_hit:
            row = self._row(outcome)
            if row is not None:
                self.sink.add(row)

    def first_token(self, outcome: Outcome) -> None:
        """A streamed answer's first byte came back: tell the service now, so the route path
        stops counting the prompt as queued and the SLO gate calibrates on the real TTFT."""
        if outcome.decision_id is None:
            return
        with contextlib.suppress(UnknownDecision):  # the lease expired meanwhile
            self.service.first_token(outcome.decision_id)

    def _settle_lease(self, outcome: Outcome) -> None:
        if outcome.decision_id is None:
            return
        # a streamed answer's first token was reported when it came (:meth:`first_token`); a
        # whole answer's first byte is its last, so when its first token came is not known:
        # completing the lease releases the prompt
        with contextlib.suppress(UnknownDecision):  # the lease expired meanwhile
            self.service.complete(
                outcome.decision_id,
                output_tokens=outcome.output_tokens,
                ok=not outcome.error,
                ttft_s=outcome.ttft_s,
                tpot_s=outcome.tpot_s,
            )

    def _row(self, o: Outcome) -> dict[str, Any] | None:
        """The ``requests`` row of an outcome (None for a served request whose replica has
        been deregistered since: its details are gone)."""
        arrival = datetime.fromtimestamp(o.arrival_wall, UTC)

        def at(moment: float | None) -> datetime | None:
            return None if moment is None else arrival + timedelta(seconds=moment - o.arrival)

        finish = at(o.finish)
        state = self.service.replicas.get(o.replica) if o.replica is not None else None
        served = not o.error
        if served and state is None:
            return None
        return {
            "request_id": o.request_id,
            "arrival_time": arrival,
            "first_token_time": at(o.first_byte) or (finish if served else None),
            "finish_time": finish if served else None,
            "input_tokens": o.input_tokens,
            "cached_tokens": min(o.cached_tokens, o.input_tokens),
            "output_tokens": o.output_tokens,
            "replica": o.replica,
            "accelerator": state.accelerator if state is not None else None,
            "model": state.model if state is not None else o.model,
            "tp": state.tp if state is not None else None,
            "tenant": o.tenant,
            "request_class": o.request_class,
            "backlog_requests": o.backlog_requests,
            "backlog_prefill_tokens": o.backlog_prefill_tokens,
            "error": o.error,
            "ttft_s": o.ttft_s,
            "tpot_s": o.tpot_s if served else None,
            "e2e_s": (o.finish - o.arrival) if served and o.finish is not None else None,
        }
