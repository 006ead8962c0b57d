"""Machine instructions per answered ``POST /v1/route``, counted by valgrind's callgrind.

The CPU time per decision that ``placement bench route`` reports moves by ±10% between runs
minutes apart on a shared machine; an instruction count does not move with the machine's load,
so two versions of the decision path can be compared to a fraction of a percent (it does not
see cache misses: confirm a gain with the timed bench).

    python -m bench.route_instructions --out FILE [--layer protocol|answer] [--decisions N]

A child process builds the fixture ``placement bench route`` builds (1,000 replicas, 100k prefix
groups, the same seed), the service runtime as its server process does
(:func:`bench.http_route.fixture_runtime`), and answers ``--warm`` requests; then, with
callgrind's instrumentation turned on by this process, it answers ``--decisions`` more and
exits at once (no teardown counted). ``protocol`` gives each request's bytes, as wrk sends
them, to the service's HTTP protocol (:mod:`serving.api.route_protocol`) over a transport that
keeps nothing but a count; ``answer`` calls :func:`serving.api.fast_route.answer` on the
request's headers and body. The service clock advances 0.5 ms a request (2,000 requests/s),
so leases expire as they do under the timed bench. Needs valgrind (``apt install valgrind``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.http_route import BENCH_KEY, fixture_runtime, request_body
from bench.route import synthetic_instance

LAYERS = ("protocol", "answer")
REPLICAS = 1_000
GROUPS = 100_000
BODIES = 5_000
WARM = 3_000
DECISIONS = 1_000
STEP_S = 0.0005  # the service clock's advance per request: 2,000 requests/s
_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


def request_bytes(body: str, port: int = 18_000) -> bytes:
    """A ``POST /v1/route`` as wrk sends it from ``bench/wrk/route.lua``."""
    raw = body.encode()
    return (
        b"POST /v1/route HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s"
        % (port, BENCH_KEY.encode(), len(raw), raw)
    )


class LoopbackTransport(asyncio.Transport):
    """A transport with no socket behind it, open, on 127.0.0.1: the route protocol is fed
    reads directly and what it writes goes to :meth:`write`, which a subclass keeps."""

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 18_000) if name in ("peername", "sockname") else default

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass


class _Sink(LoopbackTransport):
    """A transport that keeps only how many bytes were written and the last status line's
    start."""

    def __init__(self) -> None:
        super().__init__()
        self.written = 0
        self.last = b""

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.last = bytes(data[:12])
        self.written += len(data)


def answerer(
    layer: str, *, replicas: int = REPLICAS, groups: int = GROUPS, bodies: int = BODIES
) -> Callable[[int], int]:
    """``answer(k)``: answer the ``k``-th request (bodies in turn) through ``layer``; returns
    its status."""
    import uvicorn
    import uvloop
    from uvicorn.server import ServerState

    from serving.api.fast_route import answer
    from serving.api.main import create_app
    from serving.api.route_protocol import route_protocol

    instance = synthetic_instance(replicas=replicas, groups=groups, queries=bodies, seed=0)
    runtime = fixture_runtime(instance.states, instance.plan)
    service = runtime.service
    now = [1_000.0]
    service.clock = lambda: now[0]
    texts = [request_body(q) for q in instance.queries[:bodies]]
    if layer == "answer":
        headers = [
            (b"host", b"127.0.0.1:18000"),
            (b"content-type", b"application/json"),
            (b"authorization", b"Bearer " + BENCH_KEY.encode()),
        ]
        raw_bodies = [t.encode() for t in texts]

        def by_answer(k: int) -> int:
            now[0] += STEP_S
            body = raw_bodies[k % len(raw_bodies)]
            return answer(runtime, [*headers, (b"content-length", b"%d" % len(body))], body)[0]

        return by_answer
    protocol_class = route_protocol(runtime)
    config = uvicorn.Config(create_app(runtime), http=protocol_class, log_level="error")
    config.load()
    state = ServerState()
    protocol = protocol_class(
        config=config, server_state=state, app_state={}, _loop=uvloop.new_event_loop()
    )
    sink = _Sink()
    protocol.connection_made(sink)
    requests = [request_bytes(t) for t in texts]

    def by_protocol(k: int) -> int:
        now[0] += STEP_S
        before = state.total_requests
        protocol.data_received(requests[k % len(requests)])
        answered = state.total_requests == before + 1
        return int(sink.last[9:12]) if answered and sink.last[:9] == b"HTTP/1.1 " else 0

    return by_protocol


def _child(layer: str, warm: int, decisions: int, ready: Path) -> None:
    import gc

    answer = answerer(layer)
    statuses = [answer(k) for k in range(warm)]
    if statuses.count(200) != warm:
        print(f"only {statuses.count(200)} of {warm} warm-up requests answered 200", flush=True)
        os._exit(3)
    gc.collect()
    gc.freeze()  # as serve_app does
    ready.write_text(str(os.getpid()))
    while ready.exists():  # the parent turns the instrumentation on, then removes the file
        time.sleep(0.01)
    for k in range(warm, warm + decisions):
        answer(k)
    os._exit(0)  # nothing after the last answer is counted


def count(layer: str, *, warm: int = WARM, decisions: int = DECISIONS) -> float:
    """Instructions per request of ``layer`` (see the module docstring)."""
    valgrind, control = shutil.which("valgrind"), shutil.which("callgrind_control")
    if valgrind is None or control is None:
        raise SystemExit("bench.route_instructions needs valgrind: apt install valgrind")
    with tempfile.TemporaryDirectory() as tmp:
        ready = Path(tmp) / "ready"
        log = Path(tmp) / "callgrind.log"
        cmd = [
            valgrind,
            "--tool=callgrind",
            "--instr-atstart=no",
            f"--callgrind-out-file={tmp}/callgrind.out",
            f"--log-file={log}",
            sys.executable,
            "-m",
            "bench.route_instructions",
            "--child",
            layer,
            str(warm),
            str(decisions),
            str(ready),
        ]
        child = subprocess.Popen(cmd, env={**os.environ, "PYTHONHASHSEED": "0"})
        while not ready.exists():
            if child.poll() is not None:
                raise SystemExit(f"the measured process exited with status {child.returncode}")
            time.sleep(0.2)
        subprocess.run([control, "-i", "on", ready.read_text()], check=True, capture_output=True)
        ready.unlink()
        if child.wait() != 0:
            raise SystemExit(f"the measured process exited with status {child.returncode}")
        found = _COLLECTED.search(log.read_text())
        if found is None:
            raise SystemExit(f"no instruction count in callgrind's log {log}")
        return int(found.group(1)) / decisions


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--child"]:
        _child(args[1], int(args[2]), int(args[3]), Path(args[4]))
        return
    parser = argparse.ArgumentParser(prog="python -m bench.route_instructions")
    parser.add_argument("--layer", choices=(*LAYERS, "both"), default="both")
    parser.add_argument("--decisions", type=int, default=DECISIONS)
    parser.add_argument("--warm", type=int, default=WARM)
    parser.add_argument("--out", type=Path)
    opts = parser.parse_args(args)
    if opts.decisions <= 0 or opts.warm <= 0:
        parser.error("--decisions and --warm must be positive")
    layers = LAYERS if opts.layer == "both" else (opts.layer,)
    result: dict[str, Any] = {"decisions": opts.decisions, "warm": opts.warm}
    for layer in layers:
        result[f"{layer}_instructions_per_request"] = per = count(
            layer, warm=opts.warm, decisions=opts.decisions
        )
        print(f"{layer}: {per:,.0f} instructions per request", flush=True)
    if opts.out is not None:
        opts.out.parent.mkdir(parents=True, exist_ok=True)
        opts.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
