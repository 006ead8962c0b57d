"""What the service did lately, for operators: recent refusals and SLO attainment over time.

Refusals are kept as the last :data:`RECENT_REFUSALS` (time, tenant, class, reason, retry
after). SLO attainment comes from reported outcomes (``POST /v1/outcomes`` with ``ttft_s``),
judged by :func:`serving.usage.slo_met` (succeeded, TTFT and TPOT within its class's SLOs).
Counts are kept per tenant (declared tenants by name, others under one label, as the metrics do) and
per :data:`BUCKET_S` time bucket over the last :data:`HISTORY_BUCKETS` buckets. Nothing here
runs per decision except on a refusal.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

RECENT_REFUSALS = 50
BUCKET_S = 10.0
HISTORY_BUCKETS = 90  # 15 minutes


@dataclass(frozen=True, slots=True)
class Refusal:
    at: float  # wall clock (s since the epoch)
    tenant: str
    request_class: str
    reason: str
    retry_after_s: int


class Activity:
    """``label``: a tenant name as it may be shown (bounded: see serving.metrics)."""

    def __init__(
        self,
        *,
        label: Callable[[str], str] = lambda t: t,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.label = label
        self.clock = clock
        self.refusals: deque[Refusal] = deque(maxlen=RECENT_REFUSALS)
        # tenant → [met, total]
        self.slo_by_tenant: dict[str, list[int]] = {}
        # bucket start → [met, total], oldest first
        self._history: deque[tuple[float, list[int]]] = deque(maxlen=HISTORY_BUCKETS)

    def refused(self, tenant: str, request_class: str, reason: str, retry_after_s: int) -> None:
        self.refusals.append(
            Refusal(self.clock(), self.label(tenant), request_class, reason, retry_after_s)
        )

    def outcome(self, tenant: str, *, met: bool) -> None:
        """Count one reported outcome, within its SLO or not."""
        counts = self.slo_by_tenant.setdefault(self.label(tenant), [0, 0])
        counts[0] += met
        counts[1] += 1
        start = self.clock() // BUCKET_S * BUCKET_S
        if not self._history or self._history[-1][0] != start:
            self._history.append((start, [0, 0]))
        bucket = self._history[-1][1]
        bucket[0] += met
        bucket[1] += 1

    def attainment(self) -> dict[str, float]:
        return {t: met / total for t, (met, total) in self.slo_by_tenant.items() if total}

    def history(self) -> list[dict[str, float]]:
        """Per bucket with outcomes: its start, outcomes, and the share that met the SLO."""
        return [
            {"at": start, "outcomes": total, "attainment": met / total}
            for start, (met, total) in self._history
            if total
        ]

    def recent_refusals(self) -> list[dict[str, Any]]:
        """Newest first."""
        return [asdict(r) for r in reversed(self.refusals)]
