"""Each tenant's usage: requests, refusals, tokens charged against its credit, goodput and SLO
attainment, as the service saw them.

Counters only grow, so several service processes add theirs up: :meth:`UsageBook.pending` is
what this process counted since it last shared, :meth:`UsageBook.shared_totals` takes the
fleet's totals back (:mod:`serving.shared`), and a tenant's view is those totals plus what is
still pending here (without sharing, the local counts alone).

A completed request is *judged* when its TTFT is known; it *met* its SLO when it succeeded
within its class's TTFT SLO and, when its TPOT is known, within the TPOT SLO. Goodput is the
requests that met their SLO per second since the counts began; attainment, met over judged.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from placement.domain.requests import RequestClass

FIELDS = (
    "requests",
    "refused",
    "completed",
    "failed",
    "judged",
    "met",
    "prompt_tokens",
    "output_tokens",
    "charged",
)
Key = tuple[str, str]  # (tenant, field)
MAX_TENANT_KEYS_KEPT = 4096


@dataclass(frozen=True, slots=True, kw_only=True)
class TenantUsage:
    tenant: str
    credit_share: float
    requests: int
    refused: int
    completed: int
    failed: int
    prompt_tokens: int
    output_tokens: int
    charged_tokens: float  # prefill + weighted decode tokens, as the credit counters charge
    share_used: float  # of every tenant's charged tokens
    slo_judged: int
    slo_met: int
    slo_attainment: float | None  # met / judged (None before any was judged)
    goodput_rps: float
    since: float  # Unix seconds the counts began


def slo_met(
    cls: RequestClass | None, *, ok: bool, ttft_s: float | None, tpot_s: float | None
) -> bool | None:
    """Whether a completed request met its class's SLO (None: its TTFT is not known)."""
    if ttft_s is None or cls is None:
        return None
    if not ok or ttft_s > cls.ttft_slo_s:
        return False
    return tpot_s is None or tpot_s <= cls.tpot_slo_s


class UsageBook:
    def __init__(self) -> None:
        self.since = time.time()
        self._local: dict[Key, float] = {}
        self._pushed: dict[Key, float] = {}
        self._shared: dict[Key, float] | None = None
        # tenant → its keys counted per decision, made once (bounded: tenant names are input)
        self._routed_keys: dict[str, tuple[Key, Key, Key]] = {}

    def _add(self, tenant: str, field: str, amount: float) -> None:
        key = (tenant, field)
        self._local[key] = self._local.get(key, 0.0) + amount

    def routed(self, tenant: str, prompt_tokens: int, charged: float) -> None:
        # once per decision: the three counts without a call each, under keys made once
        keys = self._routed_keys.get(tenant)
        if keys is None:
            if len(self._routed_keys) >= MAX_TENANT_KEYS_KEPT:
                self._routed_keys.clear()
            keys = (tenant, "requests"), (tenant, "prompt_tokens"), (tenant, "charged")
            self._routed_keys[tenant] = keys
        requests, prompt, charged_key = keys
        local = self._local
        get = local.get
        local[requests] = get(requests, 0.0) + 1
        local[prompt] = get(prompt, 0.0) + prompt_tokens
        local[charged_key] = get(charged_key, 0.0) + charged

    def refused(self, tenant: str) -> None:
        self._add(tenant, "refused", 1)

    def completed(
        self, tenant: str, *, output_tokens: int, charged: float, ok: bool, met: bool | None
    ) -> None:
        self._add(tenant, "completed" if ok else "failed", 1)
        self._add(tenant, "output_tokens", output_tokens)
        self._add(tenant, "charged", charged)
        if met is not None:
            self._add(tenant, "judged", 1)
            self._add(tenant, "met", 1 if met else 0)

    # --- sharing between processes ----------------------------------------------------------

    def pending(self) -> dict[Key, float]:
        """What this process counted since it last shared (mark it shared with
        :meth:`shared_totals`)."""
        return {
            k: v - self._pushed.get(k, 0.0)
            for k, v in self._local.items()
            if v != self._pushed.get(k, 0.0)
        }

    def shared_totals(self, pushed: Mapping[Key, float], totals: Mapping[Key, float]) -> None:
        """``pushed`` (a :meth:`pending` taken before) was added to the shared counts, which
        now stand at ``totals``."""
        for k, v in pushed.items():
            self._pushed[k] = self._pushed.get(k, 0.0) + v
        self._shared = dict(totals)

    def reseed(self) -> dict[Key, float]:
        """Everything counted here (the shared counts were lost: this process's part of them
        is shared again)."""
        self._pushed = {}
        self._shared = None
        return self.pending()

    # --- reading ----------------------------------------------------------------------------

    def _totals(self) -> dict[Key, float]:
        if self._shared is None:
            return dict(self._local)
        out = dict(self._shared)
        for k, v in self.pending().items():
            out[k] = out.get(k, 0.0) + v
        return out

    def tenants(self) -> list[str]:
        return sorted({t for t, _ in self._totals()})

    def view(
        self,
        tenant: str,
        *,
        credit_share: float,
        now: float | None = None,
        totals: Mapping[Key, float] | None = None,
    ) -> TenantUsage:
        counts = totals if totals is not None else self._totals()

        def get(field: str) -> float:
            return counts.get((tenant, field), 0.0)

        charged_all = sum(v for (_, f), v in counts.items() if f == "charged")
        elapsed = max(1e-9, (time.time() if now is None else now) - self.since)
        judged = int(get("judged"))
        return TenantUsage(
            tenant=tenant,
            credit_share=credit_share,
            requests=int(get("requests")),
            refused=int(get("refused")),
            completed=int(get("completed")),
            failed=int(get("failed")),
            prompt_tokens=int(get("prompt_tokens")),
            output_tokens=int(get("output_tokens")),
            charged_tokens=get("charged"),
            share_used=get("charged") / charged_all if charged_all > 0 else 0.0,
            slo_judged=judged,
            slo_met=int(get("met")),
            slo_attainment=get("met") / judged if judged else None,
            goodput_rps=get("met") / elapsed,
            since=self.since,
        )

    def views(self, credit_shares: Mapping[str, float]) -> list[TenantUsage]:
        """Every tenant counted or credited."""
        totals = self._totals()
        names = sorted({t for t, _ in totals} | set(credit_shares))
        return [self.view(t, credit_share=credit_shares.get(t, 0.0), totals=totals) for t in names]
