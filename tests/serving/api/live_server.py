"""Real HTTP servers for the API tests, on a free 127.0.0.1 port.

:func:`serve_app` runs an app under uvicorn in a thread; :func:`demo_service` starts
``placement serve --demo`` as its own process (uvicorn, the planner and its solver worker,
emulated replicas), exactly as ``make run`` does, with the given keys configured.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI

from serving.api.settings import ApiKey

REPO = Path(__file__).resolve().parents[3]
DEMO_READY_S = 120.0  # the demo's first solve loads the tracking store: slow on a busy machine
STOP_S = 10.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serve_app(
    app: FastAPI, *, http: Any = "auto", timeout_keep_alive: float = 5.0
) -> Iterator[str]:
    """``app`` under uvicorn in a thread (``http``: uvicorn's HTTP protocol); yields its base
    URL."""
    port = free_port()
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="on",
        http=http,
        timeout_keep_alive=timeout_keep_alive,  # type: ignore[arg-type]
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        for _ in range(500):
            if server.started:
                break
            time.sleep(0.01)
        assert server.started, "uvicorn did not start"
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=STOP_S)
    assert not thread.is_alive()


@contextlib.contextmanager
def demo_service(
    workdir: Path, keys: Sequence[ApiKey], settings: Mapping[str, str] | None = None
) -> Iterator[str]:
    """``placement serve --demo`` from this checkout, in its own process group, with ``keys``
    as its API keys, its plan store under ``workdir`` and ``settings`` (``PLACEMENT_*``
    variables); yields its base URL once ``/readyz`` answers 200. Its output goes to
    ``workdir/serve.log``."""
    env = {
        **os.environ,
        **(settings or {}),
        "PYTHONPATH": str(REPO),
        "PLACEMENT_API_KEYS": json.dumps([k.model_dump() for k in keys]),
    }
    # a port picked free can be taken by the emulated replicas' own ephemeral ports before the
    # API binds it: start again on another one (the race is the test's, not the service's)
    for _attempt in range(3):
        port = free_port()
        argv = [sys.executable, "-c", "from placement.cli import app; app()", "serve", "--demo"]
        argv += ["--port", str(port), "--plan-dir", str(workdir / "plans")]
        log = (workdir / "serve.log").open("wb")
        proc = subprocess.Popen(
            argv, cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        if not _lost_the_port(proc, workdir / "serve.log", port):
            break
        log.close()
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, proc, workdir / "serve.log")
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=STOP_S)
        # the solver worker shares the group: make sure none outlives the test
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def _lost_the_port(proc: subprocess.Popen[bytes], log: Path, port: int) -> bool:
    """Whether the service exited because its port was taken (watched until ``/readyz``
    answers, it exits, or the ready deadline passes)."""
    deadline = time.monotonic() + DEMO_READY_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return "address already in use" in log.read_text()
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200:
                return False
        time.sleep(0.2)
    return False


def _wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + DEMO_READY_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(
                f"placement serve --demo exited {proc.returncode}:\n{log.read_text()}"
            )
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                return
        time.sleep(0.2)
    raise AssertionError(
        f"placement serve --demo not ready in {DEMO_READY_S} s:\n{log.read_text()}"
    )
