"""Two builds of the gateway (and sglang-router) side by side, alternated, on one emulated fleet.

``python -m bench.gateway_ab --trees BEFORE,AFTER --rate 500 --rounds 3`` (from the repository's
root) starts ``placement emulate`` once, one ``placement serve --proxy`` per source tree
(``PYTHONPATH`` set to the tree, so a checkout of an older commit runs its own code) and, with
``--sglang-router PATH``, the real sglang-router wheel in cache-aware mode. Each round sends
the probe's open-loop stream of short completions (:func:`bench.gateway_latency.open_loop_phase`)
straight to the replicas and then through each router in turn, so every router sees the
machine's load of that moment; the figures are the medians over rounds. A router's added
latency is its percentile less the direct phase's of the same round; its CPU per request is its
process's user + system time over its phase (``bench.processes.cpu_seconds``) per request, also
given apart (user, system).

Two more phases take the added latency apart:

- ``--mirror``: after each router that names the replica it chose (``x-placement-replica``: the
  gateway, the floor proxies), the same requests again straight to the replicas, each to the one
  the router chose. The mirror less the direct phase is what the *routing* did to the engines'
  latency (``routing_p50_ms``: the engines serve another stream than round robin's); the router
  less its mirror is the *hop* itself (``hop_p50_ms``: parsing, deciding, two more socket
  crossings).
- ``--floor``: the barest Python proxy (:mod:`bench.bare_proxy`) as two more routers, round
  robin (``bare-round-robin``: the hop with direct's own routing) and fewest in flight
  (``bare-least-in-flight``: the simplest load-aware routing), in the same rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from bench.bare_proxy import POLICIES
from bench.emulator_speed import wait_emulator_ready
from bench.gateway_latency import open_loop_phase
from bench.processes import cpu_seconds, free_port, start, start_placement, stop, wait_http
from placement.domain.fleet import load_fleet
from placement.report import write_json
from serving.api.security import generate_key, hash_key

FLEET = Path("data/fleets/h100x8.yaml")


def _gateway(
    tree: str, addresses: Path, work: Path, key: str
) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    process = start_placement(
        [
            *("serve", "--proxy", "--fleet", str(FLEET), "--addresses", str(addresses)),
            *("--port", str(port), "--no-plan-fallback", "--plan-dir", str(work / f"plans{port}")),
        ],
        {
            "PLACEMENT_API_KEYS": json.dumps(
                [{"name": "bench", "digest": hash_key(key), "scopes": ["route"]}]
            ),
            "PLACEMENT_PLANNER": "false",
            "PYTHONPATH": tree,
        },
    )
    url = f"http://127.0.0.1:{port}"
    wait_http(process, url + "/readyz")
    return process, url


def _sglang(binary: Path, replicas: list[str]) -> tuple[subprocess.Popen[bytes], str]:
    port, prometheus = free_port(), free_port()
    process = start(
        [
            *(str(binary), "launch", "--host", "127.0.0.1", "--port", str(port)),
            *("--prometheus-host", "127.0.0.1", "--prometheus-port", str(prometheus)),
            *("--worker-urls", *replicas, "--policy", "cache_aware", "--log-level", "warn"),
        ]
    )
    url = f"http://127.0.0.1:{port}"
    wait_http(process, url + "/v1/models")
    return process, url


def _bare(policy: str, addresses: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    process = start(
        [
            *(sys.executable, "-m", "bench.bare_proxy", "--port", str(port)),
            *("--addresses", str(addresses), "--policy", policy),
        ]
    )
    url = f"http://127.0.0.1:{port}"
    wait_http(process, url + "/health")
    return process, url


def mirror_targets(chosen: list[str | None], addresses: dict[str, str]) -> list[str] | None:
    """One replica URL per request, as a router chose them (None: a request whose answer named
    no replica goes round robin); None when no answer named one."""
    if not any(chosen):
        return None
    urls = list(addresses.values())
    return [
        addresses.get(r, urls[i % len(urls)]) if r else urls[i % len(urls)]
        for i, r in enumerate(chosen)
    ]


def _pct(latencies: list[float], q: float) -> float:
    return float(np.percentile(latencies, q)) * 1e3


def run(
    trees: list[str],
    *,
    rate: float,
    duration_s: float,
    rounds: int,
    sglang: Path | None,
    floor: bool = False,
    mirror: bool = False,
) -> dict[str, Any]:
    model = load_fleet(FLEET).replicas[0].model.name
    body = {"model": model, "max_tokens": 4, "stream": False}
    key = generate_key()
    headers = {"Authorization": f"Bearer {key}"}
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        addresses_file = work / "addresses.json"
        emulator = start_placement(
            [
                *("emulate", "--fleet", str(FLEET), "--base-port", "0", "--admin-port", "0"),
                *("--addresses-out", str(addresses_file)),
            ]
        )
        routers: list[tuple[str, subprocess.Popen[bytes], str]] = []
        try:
            addresses = wait_emulator_ready(emulator, addresses_file)
            replicas = list(addresses.values())
            for tree in trees:
                routers.append((tree, *_gateway(tree, addresses_file, work, key)))
            if sglang is not None:
                routers.append(("sglang-router", *_sglang(sglang, replicas)))
            if floor:
                for policy in POLICIES:
                    routers.append((f"bare-{policy}", *_bare(policy, addresses_file)))
            for _, _, url in routers:  # warm connections and caches
                asyncio.run(open_loop_phase([url], body, headers, rate, 1.0))
            asyncio.run(open_loop_phase(replicas, body, headers, rate, 1.0))
            for r in range(rounds):
                direct = asyncio.run(open_loop_phase(replicas, body, headers, rate, duration_s))
                base50, base99 = _pct(direct["latencies"], 50), _pct(direct["latencies"], 99)
                for name, process, url in routers:
                    times0 = psutil.Process(process.pid).cpu_times()
                    cpu0 = cpu_seconds([process.pid])
                    phase = asyncio.run(open_loop_phase([url], body, headers, rate, duration_s))
                    cpu_s = cpu_seconds([process.pid]) - cpu0
                    times = psutil.Process(process.pid).cpu_times()
                    sent = phase["sent"]
                    p50, p99 = _pct(phase["latencies"], 50), _pct(phase["latencies"], 99)
                    row = {
                        "round": r,
                        "router": name,
                        "achieved_rps": phase["sent"] / phase["wall_s"],
                        "failed": phase["failed"],
                        "direct_p50_ms": base50,
                        "direct_p99_ms": base99,
                        "p50_ms": p50,
                        "p99_ms": p99,
                        "added_p50_ms": p50 - base50,
                        "added_p99_ms": p99 - base99,
                        "cpu_us_per_request": cpu_s / sent * 1e6,
                        # the process itself (no children), split: the kernel's share is the
                        # sockets' work, the same for any router
                        "user_us_per_request": (times.user - times0.user) / sent * 1e6,
                        "system_us_per_request": (times.system - times0.system) / sent * 1e6,
                        "load_average_1m": os.getloadavg()[0],
                    }
                    targets = mirror_targets(phase["replicas"], addresses) if mirror else None
                    if targets is not None:
                        again = asyncio.run(
                            open_loop_phase(targets, body, headers, rate, duration_s)
                        )
                        mirror50 = _pct(again["latencies"], 50)
                        row["mirror_p50_ms"] = mirror50
                        row["routing_p50_ms"] = mirror50 - base50
                        row["hop_p50_ms"] = p50 - mirror50
                    rows.append(row)
                    print(json.dumps(row), flush=True)
        finally:
            for _, process, _ in reversed(routers):
                stop(process)
            stop(emulator)
    medians = {
        name: {
            k: float(np.median([row[k] for row in rows if row["router"] == name]))
            for k in (
                "achieved_rps",
                "p50_ms",
                "p99_ms",
                "added_p50_ms",
                "added_p99_ms",
                "cpu_us_per_request",
                "user_us_per_request",
                "system_us_per_request",
                "direct_p99_ms",
                "routing_p50_ms",
                "hop_p50_ms",
            )
            if all(k in row for row in rows if row["router"] == name)
        }
        for name in dict.fromkeys(row["router"] for row in rows)
    }
    return {
        "rate_rps": rate,
        "duration_s": duration_s,
        "rounds": rounds,
        "rows": rows,
        "medians": medians,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="gateway builds side by side, alternated")
    parser.add_argument("--trees", required=True, help="source trees, comma-separated")
    parser.add_argument("--rate", type=float, default=500.0)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--sglang-router", type=Path, help="its binary (scripts/e2e-venv's bin/sglang-router)"
    )
    parser.add_argument(
        "--floor", action="store_true", help="the barest Python proxy too (bench.bare_proxy)"
    )
    parser.add_argument(
        "--mirror",
        action="store_true",
        help="replay each router's choices straight to the replicas: routing vs hop",
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    result = run(
        args.trees.split(","),
        rate=args.rate,
        duration_s=args.duration,
        rounds=args.rounds,
        sglang=args.sglang_router,
        floor=args.floor,
        mirror=args.mirror,
    )
    for name, figures in result["medians"].items():
        print(name, json.dumps({k: round(v, 2) for k, v in figures.items()}))
    if args.out is not None:
        write_json(args.out, result)


if __name__ == "__main__":
    main()
