"""What the gateway's dynamic batching of ``/v1/embeddings`` buys and costs.

``placement bench batching`` starts ``placement emulate`` with one embedding replica
(``bge-base-en-v1.5`` on an L4, each request one forward pass timed by the engine cost model:
a fixed cost per pass plus a cost per input, :mod:`sim.emulator.pooling`), then ``placement
serve --proxy`` in front of it twice — batching off (``PLACEMENT_GATEWAY_EMBED_BATCH_MAX=0``:
each request goes alone) and on (the defaults) — and sends each the same open-loop Poisson
stream of one-text embedding requests at rising rates. The emulator runs ``time_scale`` times
slower than the cost model (10: a pass of one input takes ~50 ms of wall time), so that a
Python gateway and client on a shared machine are not what saturates. Per rate and mode:
answers per second, latency p50 / p99 (wall, from sending to the last byte), answers within
the SLO per second (goodput), refusals, and the mean batch the gateway sent.

Summary: ``throughput_gain`` — answers per second at the highest rate, on / off; ``goodput_gain``
likewise within the SLO; ``added_p50_ms`` / ``added_p99_ms`` — latency on minus off at the
lowest rate (where batching can only add a wait).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import numpy as np
import yaml

from bench.emulator_speed import wait_emulator_ready
from bench.processes import free_port, start_placement, stop, wait_http
from placement.errors import InputError
from placement.report import print_table, write_json
from serving.api.security import generate_key, hash_key

MODEL = "bge-base-en-v1.5"
DEFAULT_RATES = (5.0, 10.0, 20.0, 40.0, 80.0)
DEFAULT_SLO_S = 1.0
WORDS = ("placement", "of", "embedding", "requests", "on", "a", "fleet", "of", "replicas")
COLUMNS = (
    "mode",
    "rate_rps",
    "sent",
    "ok",
    "refused",
    "answers_per_s",
    "goodput_per_s",
    "p50_ms",
    "p99_ms",
    "mean_batch",
)


def run_batching_bench(
    *,
    rates: tuple[float, ...] = DEFAULT_RATES,
    duration_s: float = 10.0,
    time_scale: float = 10.0,
    input_words: int = 150,
    slo_s: float = DEFAULT_SLO_S,
    accelerator: str = "L4",
    max_wait_s: float | None = None,
    seed: int = 0,
    out: Path | None = None,
) -> dict[str, Any]:
    """``max_wait_s``: the gateway's batching wait cap (None: its default)."""
    if not rates or min(rates) <= 0 or duration_s <= 0 or time_scale <= 0 or input_words < 1:
        raise InputError("rates, duration, time scale and input words must be > 0", field="--rate")
    if slo_s <= 0:
        raise InputError("must be > 0", field="--slo-ms")
    key = generate_key()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        fleet_path = Path(tmp) / "fleet.yaml"
        fleet_path.write_text(
            yaml.safe_dump(
                {
                    "name": "embeddings",
                    "replicas": [
                        {"kind": "bge", "accelerator": accelerator, "count": 1, "model": MODEL}
                    ],
                }
            )
        )
        addresses_file = Path(tmp) / "addresses.json"
        emulator = start_placement(
            [
                *("emulate", "--fleet", str(fleet_path), "--base-port", "0"),
                *("--admin-port", "0", "--addresses-out", str(addresses_file)),
                *("--time-scale", str(time_scale)),
            ],
            {},
        )
        try:
            wait_emulator_ready(emulator, addresses_file)
            for mode, batch_max in (("alone", "0"), ("batched", None)):
                env = {
                    "PLACEMENT_API_KEYS": json.dumps(
                        [{"name": "bench", "digest": hash_key(key), "scopes": ["route"]}]
                    ),
                    "PLACEMENT_PLANNER": "false",
                }
                if batch_max is not None:
                    env["PLACEMENT_GATEWAY_EMBED_BATCH_MAX"] = batch_max
                elif max_wait_s is not None:
                    env["PLACEMENT_GATEWAY_EMBED_BATCH_MAX_WAIT_S"] = str(max_wait_s)
                rows += _mode(
                    mode, env, fleet_path, addresses_file, Path(tmp), key, rates, duration_s,
                    input_words, slo_s, seed,
                )  # fmt: skip
        finally:
            stop(emulator)
    summary = _summary(rows, rates)
    payload: dict[str, Any] = {
        "model": MODEL,
        "accelerator": accelerator,
        "time_scale": time_scale,
        "duration_s": duration_s,
        "input_words": input_words,
        "slo_s": slo_s,
        "max_wait_s": max_wait_s,
        "rows": rows,
        "summary": summary,
        "load_average_1m": os.getloadavg()[0],
        "cpus": os.cpu_count(),
    }
    print_table(
        f"/v1/embeddings through the gateway, alone vs batched ({MODEL} on one {accelerator}, "
        f"time scale {time_scale:g}, one input of {input_words} words, SLO {slo_s * 1e3:g} ms)",
        rows,
        COLUMNS,
    )
    print(
        f"throughput ×{summary['throughput_gain']:.2f}, goodput ×{summary['goodput_gain']:.2f} "
        f"at {max(rates):g} req/s; latency added at {min(rates):g} req/s: "
        f"p50 {summary['added_p50_ms']:+.1f} ms, p99 {summary['added_p99_ms']:+.1f} ms"
    )
    if out is not None:
        write_json(out, payload)
    return payload


def _mode(
    mode: str,
    env: dict[str, str],
    fleet_path: Path,
    addresses_file: Path,
    tmp: Path,
    key: str,
    rates: tuple[float, ...],
    duration_s: float,
    input_words: int,
    slo_s: float,
    seed: int,
) -> list[dict[str, Any]]:
    port = free_port()
    gateway: subprocess.Popen[bytes] = start_placement(
        [
            *("serve", "--proxy", "--fleet", str(fleet_path)),
            *("--addresses", str(addresses_file), "--port", str(port)),
            *("--no-plan-fallback", "--plan-dir", str(tmp / f"plans-{mode}")),
        ],
        env,
    )
    url = f"http://127.0.0.1:{port}"
    rows = []
    try:
        wait_http(gateway, url + "/readyz")
        headers = {"Authorization": f"Bearer {key}", "x-slo-ttft-ms": str(slo_s * 1e3)}
        asyncio.run(open_loop(url, headers, min(rates), 1.0, input_words, seed=-1))  # warm
        for rate in rates:
            before = _batches(url)
            phase = asyncio.run(open_loop(url, headers, rate, duration_s, input_words, seed))
            after = _batches(url)
            rows.append(_row(mode, rate, phase, slo_s, before, after))
            time.sleep(1.0)  # let what is still queued drain before the next rate
    finally:
        stop(gateway)
    return rows


async def open_loop(
    url: str,
    headers: dict[str, str],
    rate: float,
    duration_s: float,
    input_words: int,
    seed: int,
) -> dict[str, Any]:
    """Poisson arrivals at ``rate`` for ``duration_s``; each request one text of
    ``input_words`` words (distinct per request)."""
    rng = random.Random(f"{seed}:{rate}")
    latencies: list[float] = []
    statuses: dict[str, int] = {}
    finished: list[float] = []

    async def one(session: aiohttp.ClientSession, i: int) -> None:
        words = [WORDS[(i + j * 7) % len(WORDS)] for j in range(input_words)]
        body = {"model": MODEL, "input": f"{i} " + " ".join(words), "encoding_format": "base64"}
        sent = time.perf_counter()
        try:
            async with session.post(url + "/v1/embeddings", json=body, headers=headers) as r:
                await r.read()
                status = str(r.status)
        except aiohttp.ClientError as exc:
            status = type(exc).__name__
        statuses[status] = statuses.get(status, 0) + 1
        if status == "200":
            latencies.append(time.perf_counter() - sent)
            finished.append(time.perf_counter())

    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        start = time.perf_counter()
        tasks = []
        at = 0.0
        i = 0
        while True:
            at += rng.expovariate(rate)
            if at >= duration_s:
                break
            delay = start + at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(session, i)))
            i += 1
        await asyncio.gather(*tasks)
    return {
        "latencies": latencies,
        "statuses": statuses,
        "sent": len(tasks),
        "start": start,
        "duration_s": duration_s,
        "last_s": (max(finished) - start) if finished else duration_s,
    }


def _row(
    mode: str,
    rate: float,
    phase: dict[str, Any],
    slo_s: float,
    before: tuple[float, float],
    after: tuple[float, float],
) -> dict[str, Any]:
    lat = np.asarray(phase["latencies"])
    ok = len(lat)
    # answers per second over the time it took to give them (the arrivals' span, or longer
    # when a backlog drained after the last arrival)
    span = max(phase["duration_s"], phase["last_s"])
    batches = after[0] - before[0]
    return {
        "mode": mode,
        "rate_rps": rate,
        "sent": phase["sent"],
        "ok": ok,
        "refused": phase["statuses"].get("429", 0),
        "answers_per_s": ok / span,
        "goodput_per_s": int(np.sum(lat <= slo_s)) / span if ok else 0.0,
        "p50_ms": float(np.percentile(lat, 50)) * 1e3 if ok else float("nan"),
        "p99_ms": float(np.percentile(lat, 99)) * 1e3 if ok else float("nan"),
        "mean_batch": (after[1] - before[1]) / batches if batches else float("nan"),
        "statuses": phase["statuses"],
    }


def _batches(url: str) -> tuple[float, float]:
    """(batches sent, requests in them) so far, from the gateway's /metrics."""
    text = httpx.get(url + "/metrics", timeout=10).text
    count = total = 0.0
    for line in text.splitlines():
        if line.startswith("placement_gateway_batch_requests_count "):
            count = float(line.rsplit(" ", 1)[1])
        elif line.startswith("placement_gateway_batch_requests_sum "):
            total = float(line.rsplit(" ", 1)[1])
    return count, total


def _summary(rows: list[dict[str, Any]], rates: tuple[float, ...]) -> dict[str, float]:
    def at(mode: str, rate: float) -> dict[str, Any]:
        return next(r for r in rows if r["mode"] == mode and r["rate_rps"] == rate)

    top, low = max(rates), min(rates)
    on, off = at("batched", top), at("alone", top)
    return {
        "throughput_alone_per_s": off["answers_per_s"],
        "throughput_batched_per_s": on["answers_per_s"],
        "throughput_gain": on["answers_per_s"] / max(off["answers_per_s"], 1e-9),
        "goodput_gain": on["goodput_per_s"] / max(off["goodput_per_s"], 1e-9),
        "added_p50_ms": at("batched", low)["p50_ms"] - at("alone", low)["p50_ms"],
        "added_p99_ms": at("batched", low)["p99_ms"] - at("alone", low)["p99_ms"],
    }
