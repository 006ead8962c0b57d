"""What a what-if run leaves in its output folder, and prints.

``DIR/whatif.csv`` and ``DIR/whatif.json`` (the table: cost per hour, predicted attainment per
class and tenant, shed, churn, and simulated attainment where measured), ``DIR/plans/<case>.json``
(each solved case's plan), ``DIR/cost_vs_attainment.png`` (every case), ``DIR/sweep.png``
(attainment and cost against the swept value) and ``DIR/predicted_vs_simulated.png``.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from rich.console import Console
from rich.table import Table

from placement.report import write_json
from placement.whatif.min_cost import MinCostResult
from placement.whatif.run import CaseResult
from placement.whatif.scenario import Scenario

MAX_PRINTED_TENANTS = 6
# predicted and simulated attainment further apart than this (points of attainment) is flagged
AGREEMENT_POINTS = 5.0


def disagreement(r: CaseResult) -> float | None:
    """Predicted minus simulated attainment, in points (None: one of them is missing)."""
    sim = (r.simulated or {}).get("attainment")
    if r.attainment is None or sim is None or math.isnan(sim):
        return None
    return 100.0 * (r.attainment - float(sim))


def disagrees(r: CaseResult) -> bool:
    """Whether the case's predicted and simulated attainment are more than
    :data:`AGREEMENT_POINTS` apart."""
    gap = disagreement(r)
    return gap is not None and abs(gap) > AGREEMENT_POINTS


def _pct(x: float | None) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.1%}"


def _classes(results: Sequence[CaseResult]) -> list[str]:
    return sorted({c for r in results for c in r.attainment_by_class})


def _split_classes(results: Sequence[CaseResult]) -> list[str]:
    """The request classes worth a line of their own in a plot: none when demand has one class
    only, whose attainment is then the overall attainment."""
    classes = _classes(results)
    return classes if len(classes) > 1 else []


def _tenants(results: Sequence[CaseResult]) -> list[str]:
    return sorted({t for r in results for t in r.attainment_by_tenant})


def _error(value: Any) -> str:
    return "unmeasured" if value is None else f"±{float(value):.2f}"


def timing_summary(sources: Sequence[dict[str, Any]]) -> str:
    """One line: each accelerator's timing source and its expected median error."""
    per_accelerator = {s["accelerator"]: s for s in sources}
    return "; ".join(
        f"{name}: {s['source']} ({_error(s.get('expected_error'))})"
        for name, s in sorted(per_accelerator.items())
    )


def timing_table(results: Sequence[CaseResult]) -> Table:
    """Every replica kind the cases use, where its timings come from and how far off that is."""
    t = Table(title="where each kind's timings come from (expected median error, held out)")
    for col in ("accelerator", "model", "tp", "source", "expected error", "detail"):
        t.add_column(
            col, justify="right" if col in ("tp", "expected error") else "left", overflow="fold"
        )
    seen: dict[tuple[str, str, int], dict[str, Any]] = {}
    for r in results:
        for s in r.timing_sources:
            seen.setdefault((s["accelerator"], s["model"], int(s["tp"])), s)
    for (accelerator, model, tp), s in sorted(seen.items()):
        t.add_row(
            accelerator, model, str(tp), s["source"], _error(s.get("expected_error")), s["detail"]
        )
    return t


def table_rows(results: Sequence[CaseResult]) -> list[dict[str, Any]]:
    """Flat rows (one per case) for CSV and JSON."""
    classes, tenants = _classes(results), _tenants(results)
    rows = []
    for r in results:
        row: dict[str, Any] = {
            "case": r.case,
            "swept_value": r.swept_value,
            "status": r.status,
            "fleet": r.fleet,
            "replicas": r.replicas,
            "cost_per_hour": r.cost_per_hour,
            "demand_rps": r.demand_rps,
            "attainment": r.attainment,
            "shed_share": r.shed_share,
            "churn": r.churn,
            "solve_s": r.solve_s,
            "capacity_source": r.capacity_source,
            "timing_sources": timing_summary(r.timing_sources),
        }
        for c in classes:
            row[f"attainment:{c}"] = r.attainment_by_class.get(c)
        for t in tenants:
            row[f"attainment:tenant:{t}"] = r.attainment_by_tenant.get(t)
        sim = r.simulated or {}
        row["simulated_attainment"] = sim.get("attainment")
        row["predicted_minus_simulated_points"] = disagreement(r)
        row["disagrees"] = disagrees(r) if r.simulated else None
        for c in classes:
            row[f"simulated_attainment:{c}"] = sim.get("attainment_by_class", {}).get(c)
        row["explanation"] = " | ".join(r.explanation)
        rows.append(row)
    return rows


def print_results(
    scenario: Scenario,
    results: Sequence[CaseResult],
    console: Console,
    min_cost: MinCostResult | None = None,
) -> None:
    """The table of cases; then predicted attainment per request class and per tenant, each
    only where demand has more than one (one class's or tenant's attainment is the overall)."""
    simulated = any(r.simulated for r in results)
    t = Table(title=f"what-if: {scenario.name} ({scenario.workload}, {scenario.window_s:g} s)")
    for col in ("case", "fleet", "$/h", "attainment", "shed", "churn", "status"):
        t.add_column(
            col,
            justify="left" if col in ("case", "fleet", "status") else "right",
            overflow="fold",
        )
    if simulated:
        t.add_column("simulated", justify="right", overflow="fold")
        t.add_column("gap", justify="right", overflow="fold")
    for r in results:
        cells = [
            r.case,
            r.fleet,
            f"{r.cost_per_hour:.2f}",
            _pct(r.attainment),
            _pct(r.shed_share),
            _pct(r.churn),
            r.status,
        ]
        if simulated:
            gap = disagreement(r)
            flag = " !" if disagrees(r) else ""
            cells.append(_pct((r.simulated or {}).get("attainment")))
            cells.append("—" if gap is None else f"{gap:+.1f}{flag}")
        t.add_row(*cells)
    console.print(t)
    if simulated:
        console.print(
            "attainment: predicted for the traffic the plan admits (shed is its own column); "
            f"gap: predicted − simulated, in points; ! beyond {AGREEMENT_POINTS:g}"
        )
        for r in results:
            if disagrees(r):
                console.print(
                    f"[bold]{r.case}[/bold]: predicted and simulated attainment differ by "
                    f"{disagreement(r):+.1f} points (more than {AGREEMENT_POINTS:g})"
                )
    if any(r.timing_sources for r in results):
        console.print(timing_table(results))
    classes = _classes(results)
    if len(classes) > 1:
        console.print(
            _breakdown(
                "predicted attainment per request class",
                results,
                classes,
                lambda r: r.attainment_by_class,
            )
        )
    all_tenants = tenants = _tenants(results)
    if len(tenants) > MAX_PRINTED_TENANTS:
        # many tenants: print those the scenario changes (all are in the CSV and JSON)
        named = {t for c in scenario.cases for t in (*c.changes.tenants, *c.changes.demand.tenants)}
        tenants = [t for t in tenants if t in named][:MAX_PRINTED_TENANTS]
    if len(all_tenants) > 1 and tenants:
        console.print(
            _breakdown(
                "predicted attainment per tenant",
                results,
                tenants,
                lambda r: r.attainment_by_tenant,
            )
        )
    for r in results:
        if r.status in ("infeasible", "error"):
            console.print(f"[bold]{r.case}[/bold] {r.status}: " + "; ".join(r.explanation[:4]))
    if min_cost is not None:
        console.print(min_cost.describe())


def _breakdown(
    title: str,
    results: Sequence[CaseResult],
    names: Sequence[str],
    attainment: Callable[[CaseResult], dict[str, float]],
) -> Table:
    """A case × name table of predicted attainment (by request class or by tenant)."""
    table = Table(title=title)
    table.add_column("case", overflow="fold")
    for name in names:
        table.add_column(name, justify="right", overflow="fold")
    for r in results:
        table.add_row(r.case, *(_pct(attainment(r).get(n)) for n in names))
    return table


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._=-]+", "_", name)


def write_results(
    scenario: Scenario,
    results: Sequence[CaseResult],
    out: Path,
    min_cost: MinCostResult | None = None,
) -> list[Path]:
    """Write the table (CSV, JSON), the plans and the plots; return the files written."""
    out.mkdir(parents=True, exist_ok=True)
    rows = table_rows(results)
    written = []
    csv_path = out / "whatif.csv"
    with csv_path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    written.append(csv_path)
    plans = out / "plans"
    plans.mkdir(exist_ok=True)
    for r in results:
        if r.plan_json is not None:
            p = plans / f"{_slug(r.case)}.json"
            p.write_text(r.plan_json)
            written.append(p)
    if min_cost is not None and min_cost.plan_json is not None:
        p = plans / "min_cost.json"
        p.write_text(min_cost.plan_json)
        written.append(p)
    payload: dict[str, Any] = {
        "scenario": scenario.name,
        "description": scenario.description,
        "source": scenario.source,
        "workload": scenario.workload,
        "window_s": scenario.window_s,
        "seed": scenario.seed,
        "cases": rows,
        "outcomes": {r.case: r.outcomes for r in results},
        "timing_sources": {r.case: r.timing_sources for r in results},
        "simulated": {r.case: r.simulated for r in results if r.simulated},
        "min_cost": min_cost.to_dict() if min_cost is not None else None,
    }
    json_path = out / "whatif.json"
    write_json(json_path, payload)
    written.append(json_path)
    written.extend(plot_results(scenario, results, out, min_cost))
    return written


def plot_results(
    scenario: Scenario,
    results: Sequence[CaseResult],
    out: Path,
    min_cost: MinCostResult | None = None,
) -> list[Path]:
    paths = [_plot_cost_vs_attainment(scenario, results, out / "cost_vs_attainment.png", min_cost)]
    swept = [r for r in results if r.swept_value is not None]
    if swept:
        paths.append(_plot_sweep(scenario, swept, out / "sweep.png"))
    if any(r.simulated for r in results):
        paths.append(_plot_simulated(scenario, results, out / "predicted_vs_simulated.png"))
    return paths


def _plot_cost_vs_attainment(
    scenario: Scenario,
    results: Sequence[CaseResult],
    path: Path,
    min_cost: MinCostResult | None,
) -> Path:
    fig, ax = plt.subplots(figsize=(7.5, 5))
    classes = _split_classes(results)
    solved = [r for r in results if r.attainment is not None]
    ax.scatter(
        [r.cost_per_hour for r in solved],
        [r.attainment or 0.0 for r in solved],
        s=60,
        color="black",
        label="all classes",
        zorder=3,
    )
    for c, marker in zip(classes, "^vsdP*", strict=False):
        pts = [
            (r.cost_per_hour, r.attainment_by_class[c])
            for r in solved
            if c in r.attainment_by_class
        ]
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], marker=marker, alpha=0.7, label=c)
    for r in solved:
        ax.annotate(
            r.case,
            (r.cost_per_hour, r.attainment or 0.0),
            fontsize=7,
            xytext=(4, 4),
            textcoords="offset points",
        )
    failed = [r for r in results if r.attainment is None and r.replicas > 0]
    if failed:
        ax.scatter(
            [r.cost_per_hour for r in failed],
            [0.0] * len(failed),
            marker="x",
            color="red",
            s=60,
            label="infeasible",
        )
        for r in failed:
            ax.annotate(
                r.case,
                (r.cost_per_hour, 0.0),
                fontsize=7,
                color="red",
                xytext=(4, 4),
                textcoords="offset points",
            )
    if min_cost is not None and min_cost.cost_per_hour is not None:
        ax.axvline(
            min_cost.cost_per_hour,
            color="green",
            linestyle="--",
            alpha=0.6,
            label=f"min-cost fleet ${min_cost.cost_per_hour:.2f}/h",
        )
    ax.set_xlabel("fleet cost ($/h)")
    ax.set_ylabel("predicted SLO attainment")
    ax.set_ylim(-0.05, 1.05)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(f"{scenario.name}: cost against predicted attainment")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _plot_sweep(scenario: Scenario, swept: Sequence[CaseResult], path: Path) -> Path:
    rows = sorted(swept, key=lambda r: r.swept_value or 0.0)
    xs = [r.swept_value or 0.0 for r in rows]
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    ax.plot(
        xs,
        [r.attainment if r.attainment is not None else math.nan for r in rows],
        marker="o",
        color="black",
        label="attainment (all)",
    )
    for c in _split_classes(rows):
        ax.plot(
            xs,
            [r.attainment_by_class.get(c, math.nan) for r in rows],
            marker=".",
            linestyle="--",
            label=c,
        )
    if any(r.simulated for r in rows):
        ax.plot(
            xs,
            [(r.simulated or {}).get("attainment", math.nan) for r in rows],
            marker="s",
            color="tab:purple",
            label="simulated (all)",
        )
    ax.set_xlabel(scenario.sweep_vary or "swept value")
    ax.set_ylabel("SLO attainment")
    ax.set_ylim(-0.05, 1.05)
    ax.grid(alpha=0.3)
    cost_ax = ax.twinx()
    cost_ax.plot(
        xs,
        [r.cost_per_hour for r in rows],
        color="tab:green",
        marker="d",
        alpha=0.6,
        label="cost $/h",
    )
    cost_ax.set_ylabel("fleet cost ($/h)", color="tab:green")
    lines = ax.get_legend_handles_labels()
    more = cost_ax.get_legend_handles_labels()
    ax.legend(lines[0] + more[0], lines[1] + more[1], fontsize=8, loc="lower right")
    ax.set_title(f"{scenario.name}: sweep over {scenario.sweep_vary}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _plot_simulated(scenario: Scenario, results: Sequence[CaseResult], path: Path) -> Path:
    rows = [r for r in results if r.simulated and r.attainment is not None]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(rows) + 2), 4.5))
    idx = range(len(rows))
    ax.bar(
        [i - 0.2 for i in idx],
        [r.attainment or 0.0 for r in rows],
        width=0.4,
        label="predicted (plan)",
    )
    ax.bar(
        [i + 0.2 for i in idx],
        [(r.simulated or {}).get("attainment", 0.0) for r in rows],
        width=0.4,
        label="simulated",
    )
    ax.set_xticks(list(idx), [r.case for r in rows], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("SLO attainment")
    ax.set_ylim(0, 1.05)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    ax.set_title(f"{scenario.name}: predicted against simulated attainment")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
