"""`placement serve` prints its key and a curl only once /readyz answers, and keeps the
development key across restarts."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from placement.cli.announce import dev_key, example


def test_the_development_key_survives_a_restart(tmp_path: Path) -> None:
    file = tmp_path / "key"
    first = dev_key(file)
    assert first.startswith("plc_") and file.read_text().strip() == first
    assert dev_key(file) == first
    assert oct(file.stat().st_mode & 0o777) == "0o600"


def test_the_example_carries_the_key_only_when_there_is_one() -> None:
    assert "Bearer k" in example("127.0.0.1", 1, "k")
    assert "Authorization" not in example("127.0.0.1", 1, None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_the_key_and_the_curl_come_only_once_the_service_answers(tmp_path: Path) -> None:
    port = _free_port()
    script = Path(sys.executable).parent / "placement"
    child = subprocess.Popen(
        [str(script), "serve", "--demo", "--port", str(port), "--plan-dir", str(tmp_path)],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        assert child.stderr is not None
        lines: list[str] = []
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            line = child.stderr.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("development key"):
                # the moment the key is printed the port answers ready
                assert httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 200
                break
        text = "".join(lines)
        assert "development key" in text, text
        assert text.index("ready in") < text.index("development key")
        assert text.index("starting the API") < text.index("ready in")
    finally:
        os.killpg(child.pid, signal.SIGTERM)
        child.wait(timeout=30)
        if child.stderr is not None:
            child.stderr.close()
