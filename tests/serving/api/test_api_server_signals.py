"""``placement serve`` stopped with real signals: the service and every child it started are
gone within 5 s, and a restart on the same port succeeds at once. The first stop lands while
the start-up solve runs in the worker process, with a forced solve waiting behind it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
from api_fakes import ADMIN_KEY, auth

sys.path.insert(0, str(Path(__file__).parents[1]))
from process_tree import alive, cmdline, descendants, wait_gone

from serving.api.security import hash_key

STOPPED_WITHIN_S = 5.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(port: int, plan_dir: Path, log: Path) -> subprocess.Popen[bytes]:
    keys = [{"name": "ops", "digest": hash_key(ADMIN_KEY), "scopes": ["admin", "route"]}]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(sys.path),
        "PLACEMENT_API_KEYS": json.dumps(keys),
        "PLACEMENT_SOLVE_PERIOD_S": "3600",
    }
    command = "import sys; from placement.cli import app; sys.exit(app())"
    args = ["serve", "--demo", "--port", str(port), "--plan-dir", str(plan_dir)]
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-c", command, *args],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def _until_listening(server: subprocess.Popen[bytes], port: int, log: Path) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert server.poll() is None, log.read_text()
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"not listening on {port}: {log.read_text()}")


def _worker(server: subprocess.Popen[bytes]) -> int:
    """A child the service started (the start-up solve starts the solver's)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        children = descendants(server.pid)
        if children:
            return max(children)
        time.sleep(0.05)
    raise AssertionError("no solver worker started")


def _stop(server: subprocess.Popen[bytes], sig: signal.Signals, log: Path) -> None:
    children = descendants(server.pid)
    assert children, "nothing to stop but the service"
    started = time.monotonic()
    server.send_signal(sig)
    server.wait(timeout=STOPPED_WITHIN_S)
    left = wait_gone(children, STOPPED_WITHIN_S - (time.monotonic() - started))
    assert left == set(), f"still running after {sig.name}: {[cmdline(p) for p in left]}"
    assert "Traceback" not in log.read_text(), log.read_text()


def test_stopped_by_sigterm_then_sigint_and_restarted_on_the_same_port(tmp_path: Path) -> None:
    port = _free_port()
    plan_dir = tmp_path / "plans"
    log = tmp_path / "serve.log"
    first = _serve(port, plan_dir, log)
    second: subprocess.Popen[bytes] | None = None
    try:
        _until_listening(first, port, log)
        worker = _worker(first)
        forced: list[int] = []

        def force_a_solve() -> None:
            try:
                r = httpx.post(
                    f"http://127.0.0.1:{port}/v1/plan:solve", headers=auth(ADMIN_KEY), timeout=30
                )
                forced.append(r.status_code)
            except httpx.TransportError:
                forced.append(0)

        solving = threading.Thread(target=force_a_solve)
        solving.start()
        time.sleep(0.3)
        assert alive(worker)  # the start-up solve is still running in it
        _stop(first, signal.SIGTERM, log)
        solving.join(timeout=10)
        assert forced and forced[0] in (0, 200)  # answered or closed, never left hanging

        second = _serve(port, plan_dir, log)  # the same port, at once
        _until_listening(second, port, log)
        assert "address already in use" not in log.read_text().lower()
        _worker(second)
        _stop(second, signal.SIGINT, log)
    finally:
        for server in (first, second):
            if server is not None and server.poll() is None:
                server.kill()
                server.wait(timeout=10)
