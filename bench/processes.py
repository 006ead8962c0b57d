"""The benchmarks' own processes: start one, wait until it answers, measure its CPU, stop it.

Benchmarks that run servers as separate processes (the emulated fleet, the gateway, the
endpoint picker, Envoy, the peer routers) share these. CPU is read from ``/proc`` (through
psutil): user + system time of the process and every child it started.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import httpx
import psutil

from bench.usability import placement_command

START_TIMEOUT_S = 120.0


def start(
    args: Sequence[str], env: Mapping[str, str] | None = None, *, log: Path | None = None
) -> subprocess.Popen[bytes]:
    """Run ``args`` (output to ``log``, else discarded) with ``env`` on top of this one's."""
    out = log.open("wb") if log is not None else subprocess.DEVNULL
    try:
        return subprocess.Popen(
            list(args),
            env={**os.environ, **(env or {})},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    finally:
        if log is not None and not isinstance(out, int):
            out.close()


def start_placement(
    args: Sequence[str], env: Mapping[str, str] | None = None, *, log: Path | None = None
) -> subprocess.Popen[bytes]:
    """``placement ARGS`` as its own process."""
    return start([*placement_command(), *args], env, log=log)


def wait_http(
    process: subprocess.Popen[bytes],
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    timeout_s: float = START_TIMEOUT_S,
) -> None:
    """Wait until ``GET url`` answers 200; fails when the process exits or time runs out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{url}: the process exited with {process.returncode}")
        try:
            if httpx.get(url, headers=dict(headers or {}), timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} not ready after {timeout_s:g} s")


def stop(process: subprocess.Popen[bytes], *, timeout_s: float = 30.0) -> None:
    """SIGINT (a clean shutdown), then SIGKILL if it does not end in time."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pids: Sequence[int]) -> float:
    """User + system CPU seconds of these processes and their children so far (0 for one
    that has gone)."""
    total = 0.0
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            tree = [proc, *proc.children(recursive=True)]
        except psutil.NoSuchProcess:
            continue
        for p in tree:
            try:
                times = p.cpu_times()
            except psutil.NoSuchProcess:
                continue
            total += times.user + times.system
    return total
