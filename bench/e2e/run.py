"""``placement bench e2e``: the routers side by side, end to end, with a real load generator.

For each load, the same slice of the Mooncake trace (from ``start_fraction`` of the scaled
trace on: its tail) is written once as a trace file and replayed by aiperf at its timestamps
through each router in front of a freshly started emulated fleet (``placement emulate``: cold
caches and empty queues for every router). Then a probe at a fixed rate (500 requests/s by
default) measures the latency each router's hop adds over going straight to the replicas and
its CPU per request. The peers run at their defaults; ours run as an operator runs them, the
live planner and the SLO admission gate on (:mod:`bench.e2e.operated`), with the one knob
picked on the trace's head (never its tail) written there. Every request carries the tenant,
and class the benchmark scores as the Inference Extension's headers, to every router.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from bench.e2e.figures import replay_row, summary
from bench.e2e.loadgen import aiperf_command, run_aiperf
from bench.e2e.operated import Operated, objective_headers
from bench.e2e.probe import IDLE_S, direct_phase, probe_row
from bench.e2e.routers import ROUTERS, RouterStack, Tools, start_router
from bench.e2e.tokenizer_folder import write_tokenizer_folder
from bench.e2e.trace_file import slice_at_load, write_trace
from bench.emulator_speed import wait_emulator_ready
from bench.plots import plot_goodput_curves
from bench.processes import start_placement, stop
from bench.trace_text import TraceText
from placement.domain.fleet import load_fleet
from placement.domain.requests import DEFAULT_CLASSES
from placement.errors import InputError
from placement.paths import repo_root
from placement.report import print_table, write_json
from sim.capacity import rate_for_load
from sim.costmodel.factory import cost_model_for_replica
from sim.workloads.mooncake import MOONCAKE_CLASS, load_mooncake

DRAIN_S = 120.0  # aiperf waits this long past the last send for answers
TRACE_COLUMNS = (
    "router",
    "load",
    "rate_rps",
    "completed",
    "failed",
    "goodput_rps",
    "attainment",
    "ttft_p50_s",
    "ttft_p99_s",
    "tpot_p50_s",
    "tpot_p99_s",
    "cpu_us_per_request",
    "cpu_us_per_request_busy",
)
PROBE_COLUMNS = (
    "router",
    "rate_rps",
    "achieved_rps",
    "failed",
    "latency_p50_ms",
    "latency_p99_ms",
    "added_latency_p50_ms",
    "added_latency_p99_ms",
    "cpu_us_per_request",
    "cpu_us_per_request_busy",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class E2EOptions:
    fleet: Path = Path("data/fleets/h100x8.yaml")
    loads: tuple[float, ...] = (0.5, 1.0, 1.5, 2.0)
    duration_s: float = 60.0
    start_fraction: float = 0.6  # the replayed slice starts here in the trace (its tail)
    routers: tuple[str, ...] = ROUTERS
    probe_rate: float = 500.0
    probe_duration_s: float = 10.0
    probe_max_tokens: int = 4
    ours: Operated = field(default_factory=Operated)  # how gateway and epp run
    e2e_venv: Path | None = None  # default: scripts/e2e-venv's
    envoy: Path | None = None  # default: scripts/envoy-venv's
    workdir: Path | None = None  # logs and aiperf artifacts (default: a temporary folder)

    def check(self) -> None:
        unknown = [r for r in self.routers if r not in ROUTERS]
        if unknown:
            raise InputError(
                f"unknown router(s) {', '.join(unknown)}",
                field="--routers",
                expected=", ".join(ROUTERS),
            )
        if any(x <= 0 for x in self.loads):
            raise InputError("loads must be > 0", field="--loads")
        if not self.loads and self.probe_rate <= 0:
            raise InputError("no load and no probe: nothing to measure", field="--loads")
        if self.duration_s <= 0 or self.probe_duration_s < 0 or self.probe_rate < 0:
            raise InputError("durations and the probe rate must be ≥ 0", field="--duration")
        if not 0 <= self.start_fraction < 1:
            raise InputError("must be in [0, 1)", field="--start-fraction")


def run_e2e_bench(options: E2EOptions, *, out: Path | None = None) -> dict[str, Any]:
    options.check()
    tools = _tools(options)
    # SIGTERM unwinds like Ctrl-C, so the fleet, the routers and aiperf it started are stopped
    previous = signal.signal(signal.SIGTERM, _exit_on_term)
    try:
        with tempfile.TemporaryDirectory(prefix="e2e-") as tmp:
            work = options.workdir or Path(tmp)
            work.mkdir(parents=True, exist_ok=True)
            rows = [*_replays(options, tools, work), *_probes(options, tools, work)]
    finally:
        signal.signal(signal.SIGTERM, previous)
    cls = DEFAULT_CLASSES[MOONCAKE_CLASS]
    payload: dict[str, Any] = {
        "fleet": str(options.fleet),
        "loads": list(options.loads),
        "duration_s": options.duration_s,
        "start_fraction": options.start_fraction,
        "ttft_slo_s": cls.ttft_slo_s,
        "tpot_slo_s": cls.tpot_slo_s,
        "load_generator": "aiperf (fixed schedule, streamed)",
        "ours": options.ours.label,
        "rows": rows,
        "summary": summary(rows, probe_rate=options.probe_rate),
        "load_average_1m": os.getloadavg()[0],
        "cpus": os.cpu_count(),
    }
    trace_rows = [r for r in rows if r["phase"] == "trace"]
    probe_rows = [r for r in rows if r["phase"] == "probe"]
    print_table("end to end: the Mooncake slice through each router", trace_rows, TRACE_COLUMNS)
    if probe_rows:
        print_table(
            f"the hop's added latency at {options.probe_rate:g} req/s", probe_rows, PROBE_COLUMNS
        )
    print_table("summary", [payload["summary"]], tuple(payload["summary"]))
    if out is not None:
        write_json(out, payload)
        if trace_rows:
            plot_goodput_curves(
                [{**r, "policy": r["router"]} for r in trace_rows],
                out.with_suffix(".png"),
                title="Mooncake slice, end to end (aiperf) on the emulated fleet",
            )
    return payload


def _exit_on_term(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def _tools(options: E2EOptions) -> Tools:
    # aiperf and the peer routers live in the e2e virtualenv
    venv = options.e2e_venv or Path(_script("e2e-venv"))
    envoy = options.envoy
    if envoy is None and "epp" in options.routers:
        envoy = Path(_script("envoy-venv"))
    return Tools(e2e_venv=venv, envoy=envoy)


def _script(name: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [str(repo_root() / "scripts" / name)],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"scripts/{name} failed: {done.stderr[-1500:]}")
    return done.stdout.strip().splitlines()[-1]


class _Fleet:
    """``placement emulate`` on the fleet file, on free ports, until closed."""

    def __init__(self, fleet_path: Path, work: Path) -> None:
        self.addresses_file = work / "addresses.json"
        self.addresses_file.unlink(missing_ok=True)
        self.process = start_placement(
            [
                *("emulate", "--fleet", str(fleet_path), "--base-port", "0"),
                *("--admin-port", "0", "--addresses-out", str(self.addresses_file)),
            ],
            log=work / "emulate.log",
        )
        try:
            self.addresses = wait_emulator_ready(self.process, self.addresses_file)
        except BaseException:
            stop(self.process)
            raise

    def route_with(
        self, router: str, options: E2EOptions, tools: Tools, *, workdir: Path
    ) -> RouterStack:
        """``router`` started in front of these replicas, every request to carry the
        tenant and class headers."""
        cls = DEFAULT_CLASSES[MOONCAKE_CLASS]
        stack = start_router(
            router,
            fleet_path=options.fleet,
            addresses=self.addresses,
            addresses_file=self.addresses_file,
            workdir=workdir,
            tools=tools,
            ours_env=options.ours.env(workdir, cls),
        )
        stack.request_headers = objective_headers(cls)
        return stack

    def close(self) -> None:
        stop(self.process)


def _replays(options: E2EOptions, tools: Tools, work: Path) -> list[dict[str, Any]]:
    fleet = load_fleet(options.fleet)
    model = fleet.replicas[0].model.name
    workload = load_mooncake()
    text = TraceText()
    venv = tools.binary("aiperf").parent.parent
    tokenizer = write_tokenizer_folder(repo_root() / "build" / "e2e-tokenizer")
    cls = DEFAULT_CLASSES[MOONCAKE_CLASS]
    rows: list[dict[str, Any]] = []
    for load in options.loads:
        rate = rate_for_load(load, fleet, workload, cost_model_for_replica)
        start_s = options.start_fraction * workload.duration_s / rate
        window = slice_at_load(
            workload, fleet, load=load, start_s=start_s, duration_s=options.duration_s
        )
        trace = write_trace(work / f"trace-{load:g}.jsonl", window, text, load=load)
        for router in options.routers:
            case = work / f"{router}-{load:g}"
            case.mkdir(parents=True, exist_ok=True)
            print(f"load {load:g}: {trace.requests} requests through {router}", flush=True)
            emulated = _Fleet(options.fleet, case)
            stack: RouterStack | None = None
            try:
                stack = emulated.route_with(router, options, tools, workdir=case)
                idle = _idle_cores(stack) if stack.processes else None
                args = aiperf_command(
                    venv,
                    urls=stack.urls,
                    model=model,
                    trace=trace.path,
                    tokenizer=tokenizer,
                    artifacts=case / "aiperf",
                    api_key=stack.api_key,
                    timeout_s=DRAIN_S + options.duration_s,
                    headers=stack.request_headers,
                )
                cpu0, t0 = stack.cpu_s(), time.perf_counter()
                records = run_aiperf(
                    args, case / "aiperf", timeout_s=options.duration_s + 2 * DRAIN_S + 300
                )
                cpu_s = stack.cpu_s() - cpu0 if stack.processes else None
                wall = time.perf_counter() - t0
            finally:
                if stack is not None:
                    stack.stop()
                emulated.close()
            rows.append(
                replay_row(
                    router,
                    load,
                    records,
                    sent=trace.requests,
                    window_s=options.duration_s,
                    ttft_slo_s=cls.ttft_slo_s,
                    tpot_slo_s=cls.tpot_slo_s,
                    cpu_s=cpu_s,
                    idle_cores=idle,
                    wall_s=wall,
                )
            )
    return rows


def _idle_cores(stack: RouterStack) -> float:
    cpu0, t0 = stack.cpu_s(), time.perf_counter()
    time.sleep(IDLE_S)
    return (stack.cpu_s() - cpu0) / (time.perf_counter() - t0)


def _probes(options: E2EOptions, tools: Tools, work: Path) -> list[dict[str, Any]]:
    routers = [r for r in options.routers if r != "round-robin"]
    if options.probe_rate <= 0 or options.probe_duration_s <= 0 or not routers:
        return []
    fleet = load_fleet(options.fleet)
    model = fleet.replicas[0].model.name
    case = work / "probe"
    case.mkdir(parents=True, exist_ok=True)
    emulated = _Fleet(options.fleet, case)
    rows: list[dict[str, Any]] = []
    try:
        replicas = list(emulated.addresses.values())
        print(f"probe: {options.probe_rate:g} req/s straight to the replicas", flush=True)
        direct = direct_phase(
            replicas,
            model,
            rate=options.probe_rate,
            duration_s=options.probe_duration_s,
            max_tokens=options.probe_max_tokens,
        )
        for router in routers:
            print(f"probe: {options.probe_rate:g} req/s through {router}", flush=True)
            stack = emulated.route_with(router, options, tools, workdir=case)
            try:
                rows.append(
                    probe_row(
                        stack,
                        model,
                        direct,
                        rate=options.probe_rate,
                        duration_s=options.probe_duration_s,
                        max_tokens=options.probe_max_tokens,
                    )
                )
            finally:
                stack.stop()
    finally:
        emulated.close()
    return rows
