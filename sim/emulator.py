"""A replica emulator: vLLM-style ``/metrics`` for every replica of a fleet, over real HTTP.

For demos and end-to-end tests of the service without GPUs: one HTTP server on 127.0.0.1
answers ``GET /r/<replica id>/metrics`` with Prometheus text exposition written by
``prometheus_client`` under vLLM's metric names (``vllm:num_requests_running``,
``vllm:num_requests_waiting``, ``vllm:kv_cache_usage_perc``, the token counters). The gauges
are set through :meth:`ReplicaEmulator.set_load`; replicas start idle.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from placement.domain.fleet import ReplicaSpec

METRICS_SUFFIX = "/metrics"


class _ReplicaMetrics:
    def __init__(self, spec: ReplicaSpec) -> None:
        self.registry = CollectorRegistry()
        labels = ["engine", "model_name"]
        self.values = ("0", spec.model.name)

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, labels, registry=self.registry)

        self.running = gauge("vllm:num_requests_running", "Requests in model execution batches.")
        self.waiting = gauge("vllm:num_requests_waiting", "Requests waiting to be processed.")
        self.kv = gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.")
        for name, doc in (
            ("vllm:prompt_tokens", "Prefill tokens processed."),
            ("vllm:generation_tokens", "Generation tokens processed."),
        ):
            Counter(name, doc, labels, registry=self.registry).labels(*self.values)
        for g in (self.running, self.waiting, self.kv):
            g.labels(*self.values).set(0.0)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class ReplicaEmulator:
    """Serve ``/r/<id>/metrics`` for ``replicas`` on 127.0.0.1 (``port=0``: a free port)."""

    def __init__(self, replicas: Iterable[ReplicaSpec], *, port: int = 0) -> None:
        self._replicas = {r.id: _ReplicaMetrics(r) for r in replicas}
        emulator = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = emulator.metrics_text(self.path)
                if body is None:
                    self.send_error(404, "no such replica")
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass  # a scrape every second per replica would flood the terminal

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def address(self, replica_id: str) -> str:
        """The replica's address; its metrics are at ``address + /metrics``."""
        return f"http://127.0.0.1:{self.port}/r/{replica_id}"

    def metrics_text(self, path: str) -> bytes | None:
        if not (path.startswith("/r/") and path.endswith(METRICS_SUFFIX)):
            return None
        replica = self._replicas.get(path[len("/r/") : -len(METRICS_SUFFIX)])
        return None if replica is None else replica.render()

    def set_load(self, replica_id: str, *, running: float, waiting: float, kv: float) -> None:
        r = self._replicas[replica_id]
        r.running.labels(*r.values).set(running)
        r.waiting.labels(*r.values).set(waiting)
        r.kv.labels(*r.values).set(kv)

    def start(self) -> ReplicaEmulator:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
