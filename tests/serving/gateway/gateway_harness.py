"""A real gateway in front of a real emulated fleet, both on free 127.0.0.1 ports.

The fleet runs in its own event-loop thread (:class:`sim.emulator.EmulatorThread`); the
service, assembled by :func:`serving.wiring.build_app` with the gateway installed, runs under
uvicorn in another thread. Both stop when the ``with`` block ends.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
import yaml
from fastapi import FastAPI

from placement.domain.fleet import load_fleet
from serving.api.settings import Settings
from serving.gateway import GatewaySettings
from serving.service import PlacementService
from serving.wiring import build_app
from sim.emulator import EmulatorOptions, EmulatorThread

KEY = "plc_gateway-test-key-0123456789"
MODEL = "llama-3-8b"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Running:
    url: str  # the gateway's base URL (…/v1 is the OpenAI base)
    app: FastAPI
    emulator: EmulatorThread
    telemetry_dir: Path | None = None

    @property
    def service(self) -> PlacementService:
        service: PlacementService = self.app.state.runtime.service
        return service

    def metric(self, text: str, name: str) -> float:
        """The value of the first sample line starting with ``name`` in /metrics text."""
        for line in text.splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
        return 0.0


@contextlib.contextmanager
def running_gateway(
    tmp_path: Path,
    *,
    replicas: int = 2,
    groups: list[dict[str, Any]] | None = None,
    time_scale: float = 1.0,
    asgi: bool = False,
    engine_priority: str | None = None,
    scheduling: str = "fcfs",
    **gateway: Any,
) -> Iterator[Running]:
    """``groups``: the fleet file's replica groups (default: ``replicas`` × H100 of MODEL);
    ``asgi``: every request through ASGI rather than answered in the HTTP protocol;
    ``engine_priority``: the service's (Settings); ``scheduling``: the emulated replicas'."""
    fleet_file = tmp_path / "fleet.yaml"
    if groups is None:
        groups = [{"kind": "h100", "accelerator": "H100-SXM", "count": replicas, "model": MODEL}]
    fleet_file.write_text(yaml.safe_dump({"name": "gw", "replicas": groups}))
    settings = Settings(
        environment="development",
        dev_key=KEY,
        fleet=fleet_file,
        plan_dir=tmp_path / "plans",
        no_plan_fallback=True,
        planner=False,
        scrape_interval_s=0.2,
        port=free_port(),
        engine_priority=engine_priority,
    )
    with EmulatorThread(
        load_fleet(fleet_file),
        EmulatorOptions(base_port=0, time_scale=time_scale, scheduling=scheduling),
    ) as emulator:
        app = build_app(
            settings,
            addresses=emulator.addresses(),
            gateway=GatewaySettings(enabled=True, **gateway),
        )
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=settings.port,
            log_level="warning",
            lifespan="on",
            # as `placement serve --proxy` serves it (completions answered in the protocol);
            # "httptools": uvicorn's own protocol, every request through ASGI
            http="httptools" if asgi else app.state.http_protocol,
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        try:
            deadline = time.monotonic() + 20
            while not server.started and time.monotonic() < deadline:
                time.sleep(0.01)
            assert server.started, "the gateway did not start"
            url = f"http://127.0.0.1:{settings.port}"
            yield Running(url, app, emulator, gateway.get("telemetry_dir"))
        finally:
            server.should_exit = True
            thread.join(timeout=20)
