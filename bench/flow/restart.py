"""Batch requests lost across a crash of the gateway, on the emulated fleet.

``placement emulate`` (the fleet) and ``placement serve --proxy --batch-dir D`` (the gateway
with the Batch API) run as their own processes. A job of ``requests`` chat completions is
uploaded and created over HTTP; once a share of it is answered the gateway is killed with
SIGKILL (no shutdown: whatever was running is cut off) and started again over the same folder;
the job is followed to its end. Lost: requests of the input file in neither the output nor the
error file; answered twice: requests in them more than once.
"""

from __future__ import annotations

import json
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from bench.emulator_speed import wait_emulator_ready
from bench.processes import free_port, start_placement, stop, wait_http
from serving.api.security import generate_key, hash_key

MODEL = "llama-3-8b"
TIMEOUT_S = 300.0


def _fleet_file(folder: Path, replicas: int) -> Path:
    path = folder / "fleet.yaml"
    fleet = {
        "name": f"h100x{replicas}",
        "replicas": [
            {"kind": "h100", "accelerator": "H100-SXM", "count": replicas, "model": MODEL}
        ],
    }
    path.write_text(yaml.safe_dump(fleet))
    return path


def _input(requests: int, max_tokens: int) -> bytes:
    lines = [
        {
            "custom_id": f"req-{i}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {
                "model": MODEL,
                "messages": [{"role": "user", "content": f"Summarise item {i}."}],
                "max_tokens": max_tokens,
            },
        }
        for i in range(requests)
    ]
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def run_restart(
    *, requests: int = 120, max_tokens: int = 16, kill_after: float = 0.3, replicas: int = 2
) -> dict[str, Any]:
    key = generate_key()
    env = {
        "PLACEMENT_API_KEYS": json.dumps(
            [{"name": "bench", "digest": hash_key(key), "scopes": ["route"]}]
        ),
        "PLACEMENT_PLANNER": "false",
        "PLACEMENT_GATEWAY_BATCH_SHARE": "0.02",  # a couple at a time: the kill lands mid-job
    }
    headers = {"Authorization": f"Bearer {key}"}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        fleet = _fleet_file(folder, replicas)
        addresses_file = folder / "addresses.json"
        emulator = start_placement(
            [
                *("emulate", "--fleet", str(fleet), "--base-port", "0"),
                *("--admin-port", "0", "--addresses-out", str(addresses_file)),
            ],
            {},
        )
        gateway = None
        try:
            wait_emulator_ready(emulator, addresses_file)
            port = free_port()
            url = f"http://127.0.0.1:{port}"
            args = [
                *("serve", "--proxy", "--fleet", str(fleet)),
                *("--addresses", str(addresses_file), "--port", str(port)),
                *("--no-plan-fallback", "--plan-dir", str(folder / "plans")),
                *("--batch-dir", str(folder / "batches")),
            ]
            gateway = start_placement(args, env)
            wait_http(gateway, url + "/readyz")
            with httpx.Client(base_url=url, headers=headers, timeout=30) as client:
                upload = client.post(
                    "/v1/files",
                    files={"file": ("in.jsonl", _input(requests, max_tokens))},
                    data={"purpose": "batch"},
                )
                upload.raise_for_status()
                created = client.post(
                    "/v1/batches",
                    json={
                        "input_file_id": upload.json()["id"],
                        "endpoint": "/v1/chat/completions",
                        "completion_window": "24h",
                    },
                )
                created.raise_for_status()
                batch_id = created.json()["id"]
                started = time.monotonic()
                before = _follow(client, batch_id, lambda b: _done(b) >= kill_after * requests)
            gateway.send_signal(signal.SIGKILL)  # a crash: no shutdown at all
            gateway.wait()
            gateway = start_placement(args, env)
            wait_http(gateway, url + "/readyz")
            with httpx.Client(base_url=url, headers=headers, timeout=30) as client:
                final = _follow(client, batch_id, lambda b: b["status"] == "completed")
                took = time.monotonic() - started
                ids: list[str] = []
                for key_name in ("output_file_id", "error_file_id"):
                    if final.get(key_name):
                        text = client.get(f"/v1/files/{final[key_name]}/content").text
                        ids += [json.loads(line)["custom_id"] for line in text.splitlines()]
        finally:
            for child in (gateway, emulator):
                if child is not None:
                    stop(child)
    expected = {f"req-{i}" for i in range(requests)}
    return {
        "requests": requests,
        "answered_before_kill": _done(before),
        "completed": final["request_counts"]["completed"],
        "failed": final["request_counts"]["failed"],
        "lost": len(expected - set(ids)),
        "answered_twice": len(ids) - len(set(ids)),
        "status": final["status"],
        "seconds": round(took, 1),
    }


def _done(batch: dict[str, Any]) -> int:
    counts = batch["request_counts"]
    return int(counts["completed"]) + int(counts["failed"])


def _follow(client: httpx.Client, batch_id: str, until: Any) -> dict[str, Any]:
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        batch: dict[str, Any] = client.get(f"/v1/batches/{batch_id}").raise_for_status().json()
        if until(batch):
            return batch
        if time.monotonic() > deadline:
            raise RuntimeError(f"batch {batch_id} stuck at {batch['status']}")
        time.sleep(0.1)
