"""Does the fleet emulator keep up with a real trace in real time, and match the simulator?

``placement bench emulator`` starts ``placement emulate`` on a fleet as its own process, replays
a window of the Mooncake trace scaled to a fleet load open-loop against it (every request
streamed, round robin over the replicas, prompts built from the trace's blocks so the
emulator's prefix cache sees the trace's sharing; :mod:`bench.trace_text`), and reports:

- what a client measured: TTFT, TPOT and end-to-end latency (p50/p99), divided by the time
  scale to be in engine seconds;
- the simulator's figures for the same requests under the same round robin (the emulator runs
  the simulator's engine, so the two should agree when the emulator keeps up);
- how late the emulator's engine timers fired (mean and worst; its own metric), and the CPU the
  emulator and the replaying client used (cores).

The replay is this module's own small asyncio client: it checks the emulator, it is not one of
the load generators the end-to-end router comparison uses.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import numpy as np
import psutil

from bench.policies import PolicyContext, make_policy
from bench.trace_text import TraceText
from bench.usability import placement_command
from placement.domain.fleet import load_fleet
from placement.domain.requests import Request
from placement.errors import InputError
from placement.report import print_table, write_json
from sim.capacity import rate_for_load
from sim.costmodel.factory import cost_model_for_replica
from sim.simulator import Simulator
from sim.workloads.mooncake import load_mooncake

START_TIMEOUT_S = 120.0
DRAIN_S = 120.0
_COMPLETION = re.compile(rb'"completion_tokens":\s*(\d+)')
_LAG = re.compile(r"^emulator:timer_lag_seconds_total\{[^}]*\} (\S+)$", re.M)
_RUNS = re.compile(r"^emulator:timer_runs_total\{[^}]*\} (\S+)$", re.M)
_WORST = re.compile(r"^emulator:timer_lag_max_seconds\{[^}]*\} (\S+)$", re.M)


@dataclass(slots=True)
class Measured:
    ttft_s: float = float("nan")
    e2e_s: float = float("nan")
    tokens: int = 0
    error: str = ""

    @property
    def tpot_s(self) -> float:
        if self.tokens < 2:
            return float("nan")
        return (self.e2e_s - self.ttft_s) / (self.tokens - 1)


def _pct(values: list[float], q: float) -> float:
    finite = [v for v in values if not np.isnan(v)]
    return float(np.percentile(finite, q)) if finite else float("nan")


def run_emulator_bench(
    fleet_path: Path,
    *,
    load: float,
    duration_s: float,
    time_scale: float = 1.0,
    out: Path | None = None,
) -> dict[str, Any]:
    if load <= 0 or duration_s <= 0 or time_scale <= 0:
        raise InputError("load, duration and time scale must be > 0", field="--load/--duration")
    fleet = load_fleet(fleet_path)
    workload = load_mooncake()
    rate = rate_for_load(load, fleet, workload, cost_model_for_replica)
    window = workload.scaled(rate).window(0.0, duration_s)
    text = TraceText()
    prompts = [
        text.prompt(r.block_hashes, r.input_tokens, window.block_tokens) for r in window.requests
    ]
    model = fleet.replicas[0].model.name
    with tempfile.TemporaryDirectory() as tmp:
        addresses_file = Path(tmp) / "addresses.json"
        emulator = subprocess.Popen(
            [
                *placement_command(),
                "emulate",
                "--fleet",
                str(fleet_path),
                "--base-port",
                "0",
                "--admin-port",
                "0",
                "--time-scale",
                str(time_scale),
                "--addresses-out",
                str(addresses_file),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            addresses = wait_emulator_ready(emulator, addresses_file)
            replicas = [addresses[r.id] for r in fleet.replicas]
            proc = psutil.Process(emulator.pid)
            cpu0 = sum(proc.cpu_times()[:2])
            client0 = time.process_time()
            t0 = time.perf_counter()
            measured = asyncio.run(_replay(replicas, model, window.requests, prompts, time_scale))
            wall = time.perf_counter() - t0
            emulator_cores = (sum(proc.cpu_times()[:2]) - cpu0) / wall
            client_cores = (time.process_time() - client0) / wall
            lag_mean, lag_max = _timer_lag(replicas)
        finally:
            emulator.send_signal(signal.SIGINT)
            try:
                emulator.wait(timeout=30)
            except subprocess.TimeoutExpired:
                emulator.kill()
    sim = _simulate(fleet, window)
    ok = [m for m in measured if not m.error]
    scale = time_scale
    row = {
        "source": "emulator",
        "requests": len(measured),
        "failed": len(measured) - len(ok),
        "ttft_p50_s": _pct([m.ttft_s / scale for m in ok], 50),
        "ttft_p99_s": _pct([m.ttft_s / scale for m in ok], 99),
        "tpot_p50_s": _pct([m.tpot_s / scale for m in ok], 50),
        "tpot_p99_s": _pct([m.tpot_s / scale for m in ok], 99),
        "e2e_p50_s": _pct([m.e2e_s / scale for m in ok], 50),
        "e2e_p99_s": _pct([m.e2e_s / scale for m in ok], 99),
    }
    payload: dict[str, Any] = {
        "fleet": fleet.name,
        "workload": "mooncake",
        "load": load,
        "trace_window_s": duration_s,
        "time_scale": time_scale,
        "offered_rps": len(window) / duration_s,
        "rows": [row, sim],
        "timer_lag_mean_ms": lag_mean * 1e3,
        "timer_lag_max_ms": lag_max * 1e3,
        "emulator_cpu_cores": emulator_cores,
        "client_cpu_cores": client_cores,
        "replay_wall_s": wall,
        "e2e_p50_ratio_vs_sim": row["e2e_p50_s"] / sim["e2e_p50_s"],
        "ttft_p50_ratio_vs_sim": row["ttft_p50_s"] / sim["ttft_p50_s"],
    }
    print_table(
        f"emulator vs simulator: mooncake {duration_s:g} s at load {load:g} on {fleet.name} "
        f"(time scale {time_scale:g}; timer lag mean {lag_mean * 1e3:.2f} ms, max "
        f"{lag_max * 1e3:.1f} ms; emulator {emulator_cores:.2f} cores)",
        [row, sim],
        list(row),
    )
    if out is not None:
        write_json(out, payload)
    return payload


def wait_emulator_ready(process: subprocess.Popen[bytes], addresses_file: Path) -> dict[str, str]:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"placement emulate exited with {process.returncode}")
        if addresses_file.exists():
            try:
                addresses: dict[str, str] = json.loads(addresses_file.read_text())
            except json.JSONDecodeError:
                addresses = {}
            if addresses and all(
                httpx.get(a + "/health", timeout=2).status_code == 200 for a in addresses.values()
            ):
                return addresses
        time.sleep(0.2)
    raise RuntimeError(f"placement emulate not ready after {START_TIMEOUT_S:g} s")


async def _replay(
    replicas: list[str],
    model: str,
    requests: list[Request],
    prompts: list[str],
    time_scale: float,
) -> list[Measured]:
    """Send every request at its (scaled) arrival time, streamed, round robin."""
    results = [Measured() for _ in requests]
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=None, sock_read=DRAIN_S)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        loop = asyncio.get_running_loop()
        start = loop.time() + 0.5
        tasks = []
        for i, req in enumerate(requests):
            delay = start + req.arrival_s * time_scale - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            body = {
                "model": model,
                "prompt": prompts[i],
                "max_tokens": max(1, req.output_tokens),
                "stream": True,
                "stream_options": {"include_usage": True},
                "ignore_eos": True,
            }
            url = replicas[i % len(replicas)] + "/v1/completions"
            tasks.append(asyncio.create_task(_one(session, url, body, results[i])))
        await asyncio.gather(*tasks)
    return results


async def _one(
    session: aiohttp.ClientSession, url: str, body: dict[str, Any], result: Measured
) -> None:
    sent = time.perf_counter()
    tail = b""
    try:
        async with session.post(url, json=body) as response:
            if response.status != 200:
                result.error = f"HTTP {response.status}"
                await response.read()
                return
            async for chunk in response.content.iter_any():
                if np.isnan(result.ttft_s):  # the first bytes
                    result.ttft_s = time.perf_counter() - sent
                tail = (tail + chunk)[-2048:]
        result.e2e_s = time.perf_counter() - sent
        found = _COMPLETION.findall(tail)
        result.tokens = int(found[-1]) if found else 0
    except (aiohttp.ClientError, TimeoutError) as exc:
        result.error = type(exc).__name__


def _timer_lag(replicas: list[str]) -> tuple[float, float]:
    """(mean, worst) lateness of the emulator's engine timers, in wall seconds."""
    total = runs = worst = 0.0
    for address in replicas:
        page = httpx.get(address + "/metrics", timeout=5).text
        total += sum(float(v) for v in _LAG.findall(page))
        runs += sum(float(v) for v in _RUNS.findall(page))
        worst = max([worst, *(float(v) for v in _WORST.findall(page))])
    return (total / runs if runs else 0.0), worst


def _simulate(fleet: Any, window: Any) -> dict[str, Any]:
    sim = Simulator(
        fleet,
        make_policy("round_robin", PolicyContext(seed=0, block_tokens=window.block_tokens)),
        window,
        cost_model=cost_model_for_replica,
    )
    result = sim.run()
    done = [r for r in result.requests if r.finish_s >= 0 and not r.error]
    ttft = [r.first_token_s - r.arrival_s for r in done]
    e2e = [r.finish_s - r.arrival_s for r in done]
    tpot = [
        (r.finish_s - r.first_token_s) / (r.output_tokens - 1) for r in done if r.output_tokens > 1
    ]
    return {
        "source": "simulator",
        "requests": len(result.requests),
        "failed": len(result.requests) - len(done),
        "ttft_p50_s": statistics.median(ttft),
        "ttft_p99_s": _pct(ttft, 99),
        "tpot_p50_s": statistics.median(tpot),
        "tpot_p99_s": _pct(tpot, 99),
        "e2e_p50_s": statistics.median(e2e),
        "e2e_p99_s": _pct(e2e, 99),
    }
