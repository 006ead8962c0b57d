"""Real parts for the active-active tests: ``placement serve`` processes sharing a Redis, the
project's front (``scripts/front``: Envoy with retries) and a load generator."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[3]
READY_S = 60.0
STOP_S = 10.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServiceProcess:
    """``placement serve`` from this checkout in its own process group."""

    def __init__(self, workdir: Path, name: str, argv: list[str], env: Mapping[str, str]) -> None:
        self.workdir = workdir
        self.name = name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.argv = argv
        self.env = dict(env)
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = workdir / f"{name}.log"

    def start(self) -> ServiceProcess:
        argv = [sys.executable, "-c", "from placement.cli import app; app()", "serve"]
        argv += [*self.argv, "--host", "127.0.0.1", "--port", str(self.port)]
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                argv,
                cwd=self.workdir,
                env={**os.environ, **self.env, "PYTHONPATH": str(REPO)},
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return self

    def wait_ready(self) -> float:
        """Seconds until ``/readyz`` answered 200."""
        started = time.monotonic()
        while time.monotonic() - started < READY_S:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited:\n{self.log.read_text()[-3000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200:
                    return time.monotonic() - started
            time.sleep(0.1)
        raise AssertionError(f"{self.name} not ready:\n{self.log.read_text()[-3000:]}")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def kill(self) -> None:
        """SIGKILL: no goodbye, as a crashed or evicted process."""
        self._signal(signal.SIGKILL)

    def stop(self) -> None:
        self._signal(signal.SIGTERM)

    def _signal(self, sig: int) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)
        try:
            self.proc.wait(timeout=STOP_S)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=STOP_S)
        with contextlib.suppress(ProcessLookupError):  # nothing of its group outlives it
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc = None


class Front:
    """``scripts/front``: Envoy in front of ``services`` (``host:port``)."""

    def __init__(self, workdir: Path, services: list[str]) -> None:
        self.port = free_port()
        self.admin_port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = workdir / "front.log"
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [str(REPO / "scripts" / "front"), str(self.port), str(self.admin_port), *services],
                env={**os.environ, "PYTHON": sys.executable},
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def wait_ready(self, healthy: int) -> None:
        """Until Envoy is live and ``healthy`` services pass its health check."""
        deadline = time.monotonic() + READY_S
        admin = f"http://127.0.0.1:{self.admin_port}"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"front exited:\n{self.log.read_text()[-3000:]}")
            with contextlib.suppress(httpx.HTTPError):
                stats = httpx.get(f"{admin}/stats?filter=membership_healthy", timeout=2).text
                if f"cluster.placement.membership_healthy: {healthy}" in stats:
                    return
            time.sleep(0.1)
        raise AssertionError(f"front not ready:\n{self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        self.proc.wait(timeout=STOP_S)


@dataclass
class Answer:
    at: float  # seconds since the load began
    status: int  # 0: no answer (a lost request)
    process: str = ""  # the decision id's process part
    error: str = ""


@dataclass
class LoadResult:
    answers: list[Answer] = field(default_factory=list)

    @property
    def lost(self) -> list[Answer]:
        return [a for a in self.answers if a.status not in (200, 429)]

    def processes_after(self, t: float) -> set[str]:
        return {a.process for a in self.answers if a.at > t and a.status == 200}

    def longest_gap_s(self, start: float, end: float) -> float:
        """The longest time without a decision between ``start`` and ``end``."""
        times = sorted(a.at for a in self.answers if a.status == 200 and start <= a.at <= end)
        points = [start, *times, end]
        return max(b - a for a, b in itertools.pairwise(points))


def route_body(i: int) -> dict[str, object]:
    tenants = ("acme", "globex", "initech")
    return {
        "tenant": tenants[i % 3],
        "model": "llama-3-8b",
        "request_class": "interactive",
        "block_hashes": [i % 17, i % 5 + 100],
        "input_tokens": 256,
        "max_output_tokens": 32,
    }


async def _load(
    url: str, key: str, seconds: float, concurrency: int, owners: Mapping[str, str]
) -> LoadResult:
    result = LoadResult()
    started = time.monotonic()
    counter = iter(range(1 << 30))
    headers = {"X-API-Key": key}

    async def worker(client: httpx.AsyncClient) -> None:
        while (now := time.monotonic() - started) < seconds:
            i = next(counter)
            try:
                r = await client.post(f"{url}/v1/route", json=route_body(i), headers=headers)
            except httpx.HTTPError as exc:
                result.answers.append(Answer(now, 0, error=repr(exc)))
                continue
            process = r.headers.get("x-placement-decision-id", "").split("-")[0]
            answer = Answer(time.monotonic() - started, r.status_code, process, r.text[:200])
            result.answers.append(answer)
            owner = owners.get(process)
            if r.status_code == 200 and owner is not None:
                # the outcome goes to the process holding the decision's lease, as a router
                # that reads the decision's process would send it
                outcome = {"decision_id": r.json()["decision_id"], "ttft_s": 0.1}
                with contextlib.suppress(httpx.HTTPError):
                    await client.post(
                        f"{owner}/v1/outcomes",
                        json={"outcomes": [{**outcome, "output_tokens": 32}]},
                        headers=headers,
                    )

    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(timeout=10, limits=limits) as client:
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
    return result


def run_load(
    url: str,
    key: str,
    *,
    seconds: float,
    concurrency: int = 6,
    owners: Mapping[str, str] | None = None,
) -> LoadResult:
    """Route for ``seconds`` through ``url``; ``owners`` maps a decision id's process part (the
    pid in hex) to the process's URL, where its outcome is reported."""
    return asyncio.run(_load(url, key, seconds, concurrency, owners or {}))


def get_json(url: str, key: str | None = None) -> object:
    headers = {"X-API-Key": key} if key else {}
    r = httpx.get(url, headers=headers, timeout=5)
    r.raise_for_status()
    return json.loads(r.text)
