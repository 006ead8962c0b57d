"""``placement bench gate``: the admission gate alone, per case and load, on the reported tail.

At every load: the shadow run (the gate judges every request and admits them all,
:func:`bench.loop.run.shadow_gate`) gives the gate's refusal **precision** and **recall**,
its refused share, per prompt-length bucket and per rule; and our loop is run twice more, with
its gate and without it (``ours:no_admission``), for the goodput at SLO the gate adds
(``gate_gain`` = with ÷ without). The route profile is fixed (``--prefix-weight``,
``--ttft-weight``) rather than tuned, so two versions of the gate are compared on the very
same placement; everything else (the head/tail split, the first plan and its re-solves) is the
closed loop's (:mod:`bench.loop.run`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.progress import Progress

from bench.loop.run import ABLATIONS, Case, ours, prepare, shadow_gate
from placement.report import print_table, write_json
from sim.metrics import summarise

NO_GATE = next(v for v in ABLATIONS if not v.gate)
COLUMNS = (
    "workload",
    "fleet",
    "load",
    "goodput_rps",
    "goodput_without_gate_rps",
    "gate_gain",
    "refused_share",
    "precision",
    "recall",
)
BUCKET_COLUMNS = ("workload", "fleet", "load", "bucket", "requests", "refused", "precision")


def gate_case(case: Case, store: Path, say: Any) -> list[dict[str, Any]]:
    """One row per load: the shadow run's figures and the goodput with and without the gate."""
    ctx = prepare(case, store, say)
    rows: list[dict[str, Any]] = []
    tag = {"workload": case.workload.name, "fleet": case.fleet.name}
    for load in case.loads:
        say(f"shadow @ load {load}")
        quality = shadow_gate(ctx, load)
        say(f"with the gate @ load {load}")
        result, wl, _ = ours(ctx, load)
        with_gate = summarise(result, wl).goodput_rps
        say(f"without the gate @ load {load}")
        result, wl, _ = ours(ctx, load, NO_GATE)
        without = summarise(result, wl).goodput_rps
        rows.append(
            {
                **tag,
                "load": load,
                "goodput_rps": with_gate,
                "goodput_without_gate_rps": without,
                "gate_gain": with_gate / max(without, 1e-9),
                **{k: v for k, v in quality.items() if k != "by_prompt_bucket"},
                "by_prompt_bucket": quality["by_prompt_bucket"],
            }
        )
    return rows


def run_gate_bench(cases: Sequence[Case], *, out: Path, store: Path) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    with Progress(transient=True) as progress:
        task = progress.add_task("admission gate", total=len(cases))
        for case in cases:
            key = f"{case.workload.name}-{case.fleet.name}"

            def say(message: str, key: str = key) -> None:
                progress.update(task, description=f"{key}: {message}"[:100])

            rows += gate_case(case, store / key, say)
            progress.advance(task)
    print_table("the admission gate: shadow precision/recall, goodput with/without", rows, COLUMNS)
    buckets = [
        {**{k: r[k] for k in ("workload", "fleet", "load")}, "bucket": name, **figures}
        for r in rows
        for name, figures in r["by_prompt_bucket"].items()
        if figures["requests"]
    ]
    print_table("refusals per prompt-length bucket", buckets, BUCKET_COLUMNS)
    payload = {"rows": rows}
    write_json(out, payload)
    return payload
