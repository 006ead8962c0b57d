"""What one replay through one router comes to: goodput at SLO, attainment, TTFT/TPOT
percentiles, CPU per request; and the summary the issue asks for.

A request meets its SLO when it completed, its TTFT is within the TTFT SLO and its TPOT —
(latency − TTFT) / (output tokens − 1), 0 for a single token — within the TPOT SLO. Goodput is
the requests that met it per second of the replayed window; attainment their share of the
requests sent. A request refused (429 from the SLO gate or the flow-control queue, 503) or
never answered did not complete: it counts among those sent, never among those that met.

Every router is sent the same requests, so goodput is at most the rate sent, and the goodput
ratio against sglang-router at a load is at most 1 / sglang-router's attainment there (the
summary's ``ratio_ceiling``): at a load where sglang-router meets 83.5% of the SLOs no router can
do better than 1.20× it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from bench.e2e.loadgen import Record

ATTAINMENT_KNEE = 0.9  # sglang-router's load "where its attainment drops below 90%"


def tpot_s(r: Record) -> float:
    if r.output_tokens <= 1:
        return 0.0
    return (r.latency_s - r.ttft_s) / (r.output_tokens - 1)


def _pct(values: Sequence[float], q: float) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return float(np.percentile(finite, q)) if finite else float("nan")


def replay_row(
    router: str,
    load: float,
    records: Sequence[Record],
    *,
    sent: int,
    window_s: float,
    ttft_slo_s: float,
    tpot_slo_s: float,
    cpu_s: float | None,
    idle_cores: float | None,
    wall_s: float,
) -> dict[str, Any]:
    ok = [r for r in records if r.ok]
    met = sum(1 for r in ok if r.ttft_s <= ttft_slo_s and tpot_s(r) <= tpot_slo_s)
    tpots = [tpot_s(r) for r in ok]
    row: dict[str, Any] = {
        "router": router,
        "phase": "trace",
        "load": load,
        "rate_rps": sent / window_s if window_s > 0 else float("nan"),
        "requests": sent,
        "completed": len(ok),
        "failed": sent - len(ok),
        "goodput_rps": met / window_s if window_s > 0 else float("nan"),
        "attainment": met / sent if sent else float("nan"),
        "ttft_p50_s": _pct([r.ttft_s for r in ok], 50),
        "ttft_p99_s": _pct([r.ttft_s for r in ok], 99),
        "tpot_p50_s": _pct(tpots, 50),
        "tpot_p99_s": _pct(tpots, 99),
        "added_latency_p50_ms": None,  # measured by the probe at a fixed rate (phase "probe")
        "added_latency_p99_ms": None,
        "cpu_us_per_request": None,
        "cpu_us_per_request_busy": None,
    }
    if cpu_s is not None and sent:
        row["cpu_us_per_request"] = cpu_s / sent * 1e6
        if idle_cores is not None:
            row["cpu_us_per_request_busy"] = max(0.0, cpu_s - idle_cores * wall_s) / sent * 1e6
    return row


def summary(rows: Sequence[dict[str, Any]], *, probe_rate: float) -> dict[str, Any]:
    """The issue's summary: goodput ratio against sglang-router at the load where its attainment
    first drops below 90% (its highest load if it never does) — the gateway's, and the endpoint
    picker's — with the attainments there and the ceiling the ratio cannot pass (1 / sglang-
    router's attainment), and the gateway's added latency and CPU ratio from the probe at
    ``probe_rate``."""
    trace = [r for r in rows if r["phase"] == "trace"]
    sglang = sorted((r for r in trace if r["router"] == "sglang-router"), key=lambda r: r["load"])
    ours = {r["load"]: r for r in trace if r["router"] == "gateway"}
    epp = {r["load"]: r for r in trace if r["router"] == "epp"}
    out: dict[str, Any] = {
        "ratio_vs_sglang_router": None,
        "ratio_load": None,
        "ratio_ceiling": None,
        "sglang_router_attainment": None,
        "gateway_attainment": None,
        "epp_ratio_vs_sglang_router": None,
        "epp_attainment": None,
        "sglang_router_knee_found": False,
        "added_latency_p50_ms": None,
        "added_latency_p99_ms": None,
        "cpu_ratio_vs_sglang_router": None,
        "probe_rate_rps": probe_rate,
    }
    if sglang and (ours or epp):
        below = [r for r in sglang if r["attainment"] < ATTAINMENT_KNEE]
        at = below[0] if below else sglang[-1]
        out["sglang_router_knee_found"] = bool(below)
        out["ratio_load"] = at["load"]
        out["sglang_router_attainment"] = at["attainment"]
        if at["attainment"] > 0:
            out["ratio_ceiling"] = 1.0 / at["attainment"]
        for mine, ratio, attainment in (
            (ours.get(at["load"]), "ratio_vs_sglang_router", "gateway_attainment"),
            (epp.get(at["load"]), "epp_ratio_vs_sglang_router", "epp_attainment"),
        ):
            if mine is None:
                continue
            out[attainment] = mine["attainment"]
            if at["goodput_rps"] > 0:
                out[ratio] = mine["goodput_rps"] / at["goodput_rps"]
    probe = {r["router"]: r for r in rows if r["phase"] == "probe"}
    gateway = probe.get("gateway")
    if gateway is not None:
        out["added_latency_p50_ms"] = gateway["added_latency_p50_ms"]
        out["added_latency_p99_ms"] = gateway["added_latency_p99_ms"]
        peer = probe.get("sglang-router")
        if peer is not None and peer["cpu_us_per_request"] and gateway["cpu_us_per_request"]:
            out["cpu_ratio_vs_sglang_router"] = (
                gateway["cpu_us_per_request"] / peer["cpu_us_per_request"]
            )
    return out
