"""What ``placement serve`` tells its user, and when: a line per slow start-up step, and the
docs URL, the development key and a ``curl`` to try only once ``/readyz`` answers 200 — never
an address that does not answer yet. The development key is kept in a git-ignored file, so it
survives restarts (a newcomer's scripts and browser tabs keep working)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import typer

from placement.paths import repo_root

DEV_KEY_FILE = ".placement-dev-key"
READY_TIMEOUT_S = 600.0
POLL_S = 0.1


def say(message: str) -> None:
    typer.secho(f"placement: {message}", err=True)


def dev_key(path: Path | None = None) -> str:
    """The development key stored at ``path`` (``<repo>/.placement-dev-key``), made once."""
    from serving.api.security import generate_key

    file = path or repo_root() / DEV_KEY_FILE
    try:
        key = file.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        key = ""
    if key:
        return key
    key = generate_key()
    try:
        file.write_text(key + "\n", encoding="utf-8")
        os.chmod(file, 0o600)
    except OSError:
        say(f"cannot keep the development key in {file}: a new one each start")
    return key


def example(host: str, port: int, key: str | None) -> str:
    auth = f" -H 'Authorization: Bearer {key}'" if key else ""
    return (
        f"docs: http://{host}:{port}/docs\n"
        f"try:  curl -s -X POST http://{host}:{port}/v1/route{auth} "
        '-H \'Content-Type: application/json\' -d \'{"tenant": "acme", "model": '
        '"llama-3-8b", "request_class": "interactive", "prompt": "You are a helpful '
        'assistant. Summarise the following text …", "max_output_tokens": 128}\''
    )


def announce_when_ready(host: str, port: int, lines: list[str], *, started: float) -> None:
    """In a daemon thread: poll ``/readyz`` until it answers 200, then print ``lines``."""

    def wait() -> None:
        import httpx

        probe = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        url = f"http://{probe}:{port}/readyz"
        deadline = time.monotonic() + READY_TIMEOUT_S
        with httpx.Client(timeout=1.0) as client:
            while time.monotonic() < deadline:
                try:
                    if client.get(url).status_code == 200:
                        say(f"ready in {time.monotonic() - started:.1f} s")
                        for line in lines:
                            typer.secho(line, fg=typer.colors.YELLOW, err=True)
                        return
                except httpx.TransportError:
                    pass
                time.sleep(POLL_S)
        say(f"not ready after {READY_TIMEOUT_S:g} s: see GET /readyz for why")

    threading.Thread(target=wait, name="announce-ready", daemon=True).start()
