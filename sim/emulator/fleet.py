"""A whole fleet emulated in one asyncio process: one HTTP port per replica, one admin port.

Replica ports come from the fleet file (a replica's ``port`` label, or the port of its
``address`` label) or else ``base_port + index`` (``base_port=0``: free ports). The admin port
answers ``GET /admin/replicas`` (addresses and faults) and ``POST`` / ``DELETE
/admin/replicas/{id}/faults`` (change some faults / clear them; a JSON object of
:class:`ReplicaFaults` fields). Stopping a replica closes its port and cuts its connections;
starting it again listens on the same port.

:class:`EmulatorThread` runs a fleet on its own event loop in a daemon thread, for the demo
service and for tests that drive it from synchronous code.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlsplit

from aiohttp import web

from placement.domain.fleet import Fleet, ReplicaSpec
from placement.errors import InputError
from sim.emulator import openai_api as api
from sim.emulator.faults import ReplicaFaults
from sim.emulator.replica_server import EmulatedReplica
from sim.emulator.tokenizer import DEFAULT_BLOCK_TOKENS, DEFAULT_ENCODING, Tokenizer
from sim.engine import FCFS, SCHEDULING_POLICIES

DEFAULT_BASE_PORT = 8100
BACKLOG = 1024
SHUTDOWN_S = 0.5
T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class EmulatorOptions:
    """How the fleet is emulated (the llm-d simulator's knobs, where they apply)."""

    host: str = "127.0.0.1"
    base_port: int = DEFAULT_BASE_PORT  # 0: every replica on a free port
    admin_port: int | None = None  # None: base_port - 1 (a free port when base_port is 0)
    time_scale: float = 1.0  # wall seconds per engine second
    tokenizer: str = DEFAULT_ENCODING
    block_tokens: int = DEFAULT_BLOCK_TOKENS
    max_num_seqs: int | None = None  # None: the fleet file's (vLLM's --max-num-seqs)
    max_model_len: int | None = None  # None: the model's context window
    scheduling: str = FCFS  # vLLM's --scheduling-policy: fcfs, or priority (the body's)
    seed: int = 0
    faults: Mapping[str, ReplicaFaults] = field(default_factory=dict)  # by replica id

    def __post_init__(self) -> None:
        if self.time_scale <= 0:
            raise InputError("must be > 0", field="time_scale", expected="e.g. 1.0")
        if not 0 <= self.base_port <= 65535:
            raise InputError("must be a port (0..65535)", field="base_port")
        if self.scheduling not in SCHEDULING_POLICIES:
            raise InputError(
                f"{self.scheduling!r}",
                field="scheduling_policy",
                expected=" or ".join(SCHEDULING_POLICIES),
            )


def replica_port(spec: ReplicaSpec, index: int, base_port: int) -> int:
    """The replica's port: its ``port`` label, its ``address`` label's port, or base + index."""
    labels = spec.labels
    try:
        if "port" in labels:
            return int(labels["port"])
        if "address" in labels:
            address = labels["address"]
            port = urlsplit(address if "://" in address else "http://" + address).port
            if port is not None:
                return port
    except ValueError:
        raise InputError(
            f"replica {spec.id} has a bad port label", field="labels.port", expected="an integer"
        ) from None
    return base_port + index if base_port else 0


def _bind(host: str, port: int) -> socket.socket:
    try:
        return socket.create_server((host, port), backlog=BACKLOG)
    except OSError as exc:
        raise InputError(f"cannot listen on {host}:{port}: {exc.strerror}", field="port") from None


class _Endpoint:
    """One replica's listening port (closed while the replica is stopped)."""

    def __init__(self, replica: EmulatedReplica, host: str, port: int) -> None:
        self.replica = replica
        self.host = host
        self.port = port
        self.runner = web.AppRunner(replica.app(), access_log=None, shutdown_timeout=SHUTDOWN_S)
        self.site: web.SockSite | None = None

    async def listen(self) -> None:
        sock = _bind(self.host, self.port)
        self.port = int(sock.getsockname()[1])
        self.site = web.SockSite(self.runner, sock, backlog=BACKLOG)
        await self.site.start()

    async def close_port(self) -> None:
        if self.site is not None:
            await self.site.stop()
            self.site = None

    @property
    def address(self) -> str:
        return f"http://{self.host}:{self.port}"


class FleetEmulator:
    """Every replica of ``fleet`` on its own port, in the running event loop."""

    def __init__(self, fleet: Fleet, options: EmulatorOptions | None = None) -> None:
        self.fleet = fleet
        self.options = options or EmulatorOptions()
        unknown = sorted(set(self.options.faults) - {r.id for r in fleet.replicas})
        if unknown:
            raise InputError(f"no replica {unknown[0]!r} in fleet {fleet.name}", field="faults")
        self.tokenizer = Tokenizer(self.options.tokenizer, block_tokens=self.options.block_tokens)
        self.endpoints: dict[str, _Endpoint] = {}
        self._admin: web.AppRunner | None = None
        self.admin_port = 0

    async def start(self) -> None:
        o = self.options
        try:
            for i, spec in enumerate(self.fleet.replicas):
                replica = EmulatedReplica(
                    i,
                    spec,
                    tokenizer=self.tokenizer,
                    time_scale=o.time_scale,
                    max_num_seqs=o.max_num_seqs,
                    max_model_len=o.max_model_len,
                    seed=o.seed,
                    scheduling=o.scheduling,
                )
                endpoint = _Endpoint(replica, o.host, replica_port(spec, i, o.base_port))
                self.endpoints[spec.id] = endpoint
                await endpoint.runner.setup()
                await endpoint.listen()
                faults = o.faults.get(spec.id)
                if faults is not None:
                    await self.set_faults(spec.id, faults)
            await self._start_admin()
        except BaseException:
            await self.stop()
            raise

    async def _start_admin(self) -> None:
        o = self.options
        port = o.admin_port if o.admin_port is not None else max(0, o.base_port - 1)
        app = web.Application()
        app.router.add_get("/admin/replicas", self._admin_list)
        app.router.add_post("/admin/replicas/{replica}/faults", self._admin_set)
        app.router.add_delete("/admin/replicas/{replica}/faults", self._admin_clear)
        self._admin = web.AppRunner(app, access_log=None, shutdown_timeout=SHUTDOWN_S)
        await self._admin.setup()
        sock = _bind(o.host, port)
        self.admin_port = int(sock.getsockname()[1])
        await web.SockSite(self._admin, sock).start()

    async def stop(self) -> None:
        for endpoint in self.endpoints.values():
            endpoint.replica.engine.stop()
            if endpoint.replica.pooling is not None:
                endpoint.replica.pooling.stop()
            await endpoint.runner.cleanup()
        if self._admin is not None:
            await self._admin.cleanup()
            self._admin = None

    # ---- what it serves ------------------------------------------------------------------
    def addresses(self) -> dict[str, str]:
        """``http://host:port`` of every replica, by id."""
        return {rid: e.address for rid, e in self.endpoints.items()}

    @property
    def admin_url(self) -> str:
        return f"http://{self.options.host}:{self.admin_port}"

    def replica(self, replica_id: str) -> EmulatedReplica:
        endpoint = self.endpoints.get(replica_id)
        if endpoint is None:
            raise InputError(f"no replica {replica_id!r}", field="replica")
        return endpoint.replica

    async def set_faults(self, replica_id: str, faults: ReplicaFaults) -> ReplicaFaults:
        """Switch one replica to ``faults``; a stopped one's port is closed, a started one's
        reopened on the same port."""
        endpoint = self.endpoints.get(replica_id)
        if endpoint is None:
            raise InputError(f"no replica {replica_id!r}", field="replica")
        was_stopped = endpoint.replica.faults.stopped
        endpoint.replica.apply(faults)
        if faults.stopped and not was_stopped:
            await endpoint.close_port()
        elif was_stopped and not faults.stopped:
            await endpoint.listen()
        return faults

    # ---- admin endpoint ------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        return {
            rid: {"address": e.address, "model": e.replica.model_name, **e.replica.faults.as_dict()}
            for rid, e in self.endpoints.items()
        }

    async def _admin_list(self, _: web.Request) -> web.Response:
        return web.json_response({"replicas": self._state()})

    async def _admin_set(self, request: web.Request) -> web.Response:
        replica_id = request.match_info["replica"]
        try:
            current = self.replica(replica_id).faults
            raw = api.parse_json(await request.read())
            faults = current.updated(raw, source=f"faults of {replica_id}")
        except InputError as exc:
            status = 404 if exc.field == "replica" else 400
            return web.Response(status=status, body=api.error_body(str(exc)), content_type=JSON)
        except api.ApiError as exc:
            return web.Response(status=exc.status, body=exc.body(), content_type=JSON)
        await self.set_faults(replica_id, faults)
        return web.json_response({"replica": replica_id, **faults.as_dict()})

    async def _admin_clear(self, request: web.Request) -> web.Response:
        replica_id = request.match_info["replica"]
        if replica_id not in self.endpoints:
            body = api.error_body(f"no replica {replica_id!r}")
            return web.Response(status=404, body=body, content_type=JSON)
        faults = await self.set_faults(replica_id, ReplicaFaults())
        return web.json_response({"replica": replica_id, **faults.as_dict()})


JSON = "application/json"


class EmulatorThread:
    """A :class:`FleetEmulator` on its own event loop in a daemon thread."""

    def __init__(self, fleet: Fleet, options: EmulatorOptions | None = None) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._fleet = fleet
        self._options = options
        self.emulator: FleetEmulator | None = None

    def start(self) -> EmulatorThread:
        self._thread.start()

        async def build() -> FleetEmulator:
            emulator = FleetEmulator(self._fleet, self._options)
            await emulator.start()
            return emulator

        try:
            self.emulator = self.call(build())
        except BaseException:
            self._halt()
            raise
        return self

    def call(self, coro: Coroutine[Any, Any, T], timeout_s: float = 30.0) -> T:
        """Run ``coro`` on the emulator's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    @property
    def fleet(self) -> FleetEmulator:
        assert self.emulator is not None, "start() first"
        return self.emulator

    def addresses(self) -> dict[str, str]:
        return self.fleet.addresses()

    def set_faults(self, replica_id: str, **faults: Any) -> ReplicaFaults:
        current = self.fleet.replica(replica_id).faults
        return self.call(self.fleet.set_faults(replica_id, current.updated(faults)))

    def stop(self) -> None:
        if self.emulator is not None:
            self.call(self.emulator.stop())
            self.emulator = None
        self._halt()

    def _halt(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()

    def __enter__(self) -> EmulatorThread:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()


def addresses_json(addresses: Mapping[str, str]) -> str:
    return json.dumps(dict(addresses), indent=2)
