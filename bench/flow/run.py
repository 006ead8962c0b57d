"""``placement bench flow``: the gateway's flow control and Batch API, measured.

0. **Capacity at SLO** on the head of the trace (its first ``tune_share``;
   :mod:`bench.flow.capacity`): the load (× nominal) up to which the service refusing at once
   meets 90% of the feasible interactive requests. ``load`` and ``day_peak`` are multiples of
   it (1.5: overload).
1. **Sweep** on the head: the Mooncake trace at ``load`` plus a batch backlog of one hour of
   that traffic, through :func:`bench.flow.cases.simulate`, one factor at a time around a
   default (queue order, deadline slack, admission, result cache, batch busy fraction, lower
   bands' headroom and in-flight share), then one pass of coordinate ascent from the best row
   of each admission family (:data:`~bench.flow.cases.FAMILIES`: the SLO gate's forecast,
   the request cap, the prefill budget; the last two without a latency forecast).
2. **Report** on the tail: the best head setting (:func:`bench.flow.cases.choose`) and the
   best behind the cap, each against the same setting refusing at once (``goodput_vs_refuse``
   and ``goodput_vs_refuse_behind_cap``, each naming its baseline, and each also over the best
   refusing service of any admission), and, per admission, the default queue against refusing
   at once.
3. **Day**: 24 h following the shipped diurnal ServeGen population (peak ``day_peak`` × the
   fleet's capacity at SLO) plus a one-hour backlog of batch work submitted at the start, with the
   chosen setting (result cache off): the share of batch requests done within 24 h.
4. **Restart** on the emulated fleet (:mod:`bench.flow.restart`): batch requests lost across
   a SIGKILL of the gateway mid-job.

Writes ``{"rows": [...], "summary": {...}}`` and a PNG beside the JSON.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.flow.capacity import LOADS as CAPACITY_LOADS
from bench.flow.capacity import measure_capacity
from bench.flow.cases import (
    ADMISSIONS,
    DEFAULT,
    FAMILIES,
    ROUTERS,
    Setting,
    admission_family,
    choose,
    rank,
    setting_of,
    simulate,
    sweep_settings,
)
from bench.flow.restart import run_restart
from bench.flow.workload import DAY_S, capacity_rps, diurnal, overload
from bench.loop.run import ATTAINMENT_KNEE
from placement.domain.fleet import Fleet, fleet_from_dict
from placement.report import print_table, write_json

Say = Callable[[str], None]
FACTORS = (
    "queue",
    "slack",
    "admission",
    "cache",
    "batch_busy",
    "band_headroom",
    "band_share",
    "backfill",
    "router",
)
BACKLOG_S = 3600.0
COLUMNS = (
    "phase",
    "setting",
    "attainment_premium_feasible",
    "attainment_premium",
    "attainment_standard",
    "goodput_rps",
    "refused_share",
    "deadline_misses",
    "ttft_p99_s",
    "cache_hit_ratio",
    "batch_done",
)


def h100_fleet(replicas: int) -> Fleet:
    return fleet_from_dict(
        {
            "name": f"h100x{replicas}",
            "replicas": [
                {
                    "kind": "h100",
                    "accelerator": "H100-SXM",
                    "count": replicas,
                    "model": "llama-3-8b",
                    "tp": 1,
                }
            ],
        }
    )


def refine(
    rows: list[dict[str, Any]],
    evaluate: Callable[[Setting], dict[str, Any]],
    family: str | None = None,
) -> list[dict[str, Any]]:
    """One pass of coordinate ascent from the best row (of the admission ``family``, if
    given: its admissions only): each factor in turn set to each of the levels the sweep
    tried, kept when the row ranks better (:func:`~bench.flow.cases.rank`; the queue is never
    set to refuse). The rows it evaluated."""
    levels = {f: sorted({r[f] for r in rows}, key=str) for f in FACTORS}
    if family is not None:
        levels["admission"] = [a for a in levels["admission"] if admission_family(a) == family]
    best_row = choose(rows, family)
    best = setting_of(best_row)
    seen = {setting_of(r) for r in rows}
    added: list[dict[str, Any]] = []
    for factor in FACTORS:
        for level in levels[factor]:
            candidate = replace(best, **{factor: level})
            if candidate in seen or (factor == "queue" and level == "refuse"):
                continue
            seen.add(candidate)
            row = evaluate(candidate)
            added.append(row)
            if rank(row) > rank(best_row):
                best, best_row = candidate, row
    return added


def run_flow_bench(
    *,
    out: Path,
    replicas: int = 4,
    load: float = 1.5,
    tune_share: float = 0.4,
    day_peak: float = 1.5,
    day_replicas: int = 2,
    day_s: float = DAY_S,
    seed: int = 1,
    quick: bool = False,
    emulated: bool = True,
    say: Say = print,
) -> dict[str, Any]:
    fleet = h100_fleet(replicas)
    end = 1.0
    settings = sweep_settings()
    capacity_loads: tuple[float, ...] = CAPACITY_LOADS
    if quick:  # a smoke run: a slice of the trace, three settings, a compressed day
        end, tune_share = 0.05, 0.025
        settings = [DEFAULT, replace(DEFAULT, queue="refuse"), replace(DEFAULT, queue="edf")]
        settings += [replace(s, admission=a) for a in ("cap", "prefill8192") for s in settings]
        capacity_loads = (0.5, 1.0, 2.0)
    # what the load is a multiple of: the fleet's capacity at SLO, measured on the head
    scale, capacity_rows = measure_capacity(
        fleet, end=tune_share, seed=seed, loads=capacity_loads, drain_s=60.0
    )
    offered = load * scale
    # the same behind the service's own route path (not the load unit: reported beside it)
    scale_by_router = {ROUTERS[0]: scale}
    for router in ROUTERS[1:]:
        scale_by_router[router], _ = measure_capacity(
            fleet, end=tune_share, seed=seed, loads=capacity_loads, drain_s=60.0, router=router
        )
    say(
        f"capacity at SLO on the head: {scale:.3g} × nominal; load {load:g} = "
        f"{offered:.3g} × nominal on {fleet.name}, {len(settings)} settings"
    )
    head = overload(fleet, offered, start=0.0, end=tune_share, backlog_s=BACKLOG_S, seed=seed)

    def on_head(s: Setting) -> dict[str, Any]:
        return {"phase": "head", **simulate(head, fleet, s, seed=seed, drain_s=60.0)}

    rows = [*capacity_rows, *(on_head(s) for s in settings)]
    swept = [r for r in rows if r["phase"] == "head"]
    if not quick:
        for family in FAMILIES:  # the overall choice is the best of the families'
            swept += refine(swept, on_head, family=family)
    rows = [*capacity_rows, *swept]
    chosen = setting_of(choose(swept))
    by_family = {f: setting_of(choose(swept, family=f)) for f in FAMILIES}
    say(f"chosen on the head: {chosen.label()}; per admission: {by_family}")
    tail = overload(fleet, offered, start=tune_share, end=end, backlog_s=BACKLOG_S, seed=seed)
    pairs: list[tuple[str, Setting]] = [
        ("chosen", chosen),
        *((f"chosen_{f}", s) for f, s in by_family.items() if s != chosen),
    ]
    if not quick:
        pairs += [(a, replace(DEFAULT, admission=a)) for a in ("gate", *ADMISSIONS)]
        # the same behind the service's own route path: the best refusing service is the
        # best of either router's
        pairs += [
            (f"{a}/{ROUTERS[1]}", replace(DEFAULT, admission=a, router=ROUTERS[1]))
            for a in ("gate", *ADMISSIONS)
        ]
    by_admission: dict[str, dict[str, Any]] = {}
    tail_rows: dict[str, dict[str, Any]] = {}
    for name, setting in pairs:
        flow = simulate(tail, fleet, setting, seed=seed, drain_s=60.0)
        refuse = simulate(tail, fleet, replace(setting, queue="refuse"), seed=seed, drain_s=60.0)
        rows += [{"phase": "tail", **flow}, {"phase": "tail", **refuse}]
        tail_rows[name] = flow
        by_admission[name] = {
            "setting": setting.label(),
            "baseline": replace(setting, queue="refuse").label(),
            "admission": setting.admission,
            "router": setting.router,
            "goodput_flow_rps": flow["goodput_rps"],
            "goodput_refuse_rps": refuse["goodput_rps"],
            "goodput_vs_refuse": flow["goodput_rps"] / max(refuse["goodput_rps"], 1e-9),
            "top_band_flow": flow["attainment_premium_feasible"],
            "top_band_refuse": refuse["attainment_premium_feasible"],
        }
    # the best any service refusing at once does on the tail, whatever its admission
    best_refusing = max(
        (r for r in rows if r["phase"] == "tail" and r["queue"] == "refuse"),
        key=lambda r: r["goodput_rps"],
    )
    day_fleet = h100_fleet(day_replicas)
    say(f"day: diurnal peak {day_peak:g} (× capacity at SLO) on {day_fleet.name} over {day_s:g} s")
    day_traffic = diurnal(day_fleet, day_peak * scale, backlog_s=BACKLOG_S, seed=seed, day_s=day_s)
    # no result cache on the day: its requests are drawn from the trace with replacement, so
    # their repeats are the sampling's, not the traffic's
    day_setting = replace(chosen, cache=0)
    day = simulate(
        day_traffic,
        day_fleet,
        day_setting,
        seed=seed,
        drain_s=day_s / 4,
        scrape_s=0.25,
        window_s=day_s,
    )
    rows.append({"phase": "day", **day})
    restart = run_restart() if emulated else None
    if restart is not None:
        rows.append({"phase": "restart", "setting": "emulated fleet, SIGKILL mid-job", **restart})
    chosen_tail = tail_rows["chosen"]
    summary: dict[str, Any] = {
        "interactive_attainment": chosen_tail["attainment_premium_feasible"],
        "interactive_attainment_all_requests": chosen_tail["attainment_premium"],
        "goodput_vs_refuse": _versus(by_admission["chosen"], best_refusing),
        # the best head setting behind each admission family, on the tail
        "by_family": {
            f: {
                "setting": s.label(),
                "top_band": tail_rows["chosen" if s == chosen else f"chosen_{f}"][
                    "attainment_premium_feasible"
                ],
                "goodput_vs_refuse": _versus(
                    by_admission["chosen" if s == chosen else f"chosen_{f}"], best_refusing
                ),
            }
            for f, s in by_family.items()
        },
        # the most any policy could reach: every feasible interactive request met
        "goodput_bound_vs_refuse": chosen_tail["feasible_rps"]
        / max(by_admission["chosen"]["goodput_refuse_rps"], 1e-9),
        "batch_done_in_window": day["batch_done_in_window"] / max(1, day["batch_requests"]),
        "batch_lost": restart["lost"] if restart is not None else None,
        "batch_answered_twice": restart["answered_twice"] if restart is not None else None,
        "chosen": chosen.label(),
        "by_admission": by_admission,
        "day_interactive_attainment": day["attainment_premium_feasible"],
        "cache_hit_ratio": chosen_tail["cache_hit_ratio"],
        "load": load,
        "load_unit": (
            "× the fleet's capacity at SLO: the highest load (× nominal) at which the service "
            f"refusing at once meets {ATTAINMENT_KNEE:.0%} of the feasible interactive requests "
            f"on the head, without batch work, routed by {ROUTERS[0]} (bench/flow/capacity.py; "
            "capacity_at_slo_vs_nominal_by_router: the same by each router)"
        ),
        "capacity_at_slo_vs_nominal": scale,
        "capacity_at_slo_vs_nominal_by_router": scale_by_router,
        "capacity_at_slo_rps": scale * capacity_rps(fleet),
        "offered_vs_nominal": offered,
        "fleet": fleet.name,
        "day_fleet": day_fleet.name,
        "day_peak": day_peak,
        "tune_share": tune_share,
        "targets": {
            "interactive_attainment": 0.95,
            "goodput_vs_refuse": 1.15,
            "batch_done_in_window": 0.95,
            "batch_lost": 0,
        },
    }
    print_table("flow control: head sweep, tail report, day", rows, COLUMNS)
    payload = {"rows": rows, "summary": summary}
    write_json(out, payload)
    _plot(rows, out.with_suffix(".png"))
    return payload


def _versus(pair: dict[str, Any], best_refusing: dict[str, Any]) -> dict[str, Any]:
    """A flow-control setting's goodput over the same setting refusing at once, saying which
    baseline that is; and over the best service refusing at once under any admission."""
    return {
        "ratio": pair["goodput_vs_refuse"],
        "baseline": f"{pair['baseline']}: the same setting refusing at once, behind the same "
        f"admission ({pair['admission']})",
        "vs_best_refusing": pair["goodput_flow_rps"] / max(best_refusing["goodput_rps"], 1e-9),
        "best_refusing": best_refusing["setting"],
    }


def _plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for phase, marker in (("head", "o"), ("tail", "s")):
        for r in (r for r in rows if r["phase"] == phase):
            colour = "tab:red" if r["queue"] == "refuse" else "tab:blue"
            left.scatter(
                r["goodput_rps"], r["attainment_premium_feasible"], c=colour, marker=marker
            )
    left.axhline(0.95, color="grey", lw=0.8, ls="--")
    left.set_xlabel("interactive goodput at SLO (req/s)")
    left.set_ylabel("top band attainment (feasible requests)")
    left.set_title("settings: blue queue, red refuse at once; o head, s tail")
    tail = [r for r in rows if r["phase"] == "tail"]
    labels = [r["setting"].replace("/", "\n", 1) for r in tail]
    right.barh(
        range(len(tail)),
        [r["goodput_rps"] for r in tail],
        color=["tab:red" if r["queue"] == "refuse" else "tab:blue" for r in tail],
    )
    right.set_yticks(range(len(tail)), labels, fontsize=6)
    right.set_xlabel("goodput on the tail (req/s)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
