"""A real endpoint picker for the tests: the placement service with the real route path, the
gRPC servers on free 127.0.0.1 ports in their own event-loop thread, and builders of the
ProcessingRequest messages Envoy sends."""

from __future__ import annotations

import asyncio
import json
import queue
import threading
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import grpc
from envoy.config.core.v3 import base_pb2
from envoy.extensions.filters.http.ext_proc.v3 import processing_mode_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as ext_proc
from envoy.service.ext_proc.v3 import external_processor_pb2_grpc

from serving.epp import EndpointPicker, EppServer, PickerConfig
from serving.epp.protocol import DESTINATION, DESTINATION_NAMESPACE
from serving.route import PlacementRoutePath, ReplicaState, RouteQuery
from serving.service import Lease, PlacementService, Routed

T = TypeVar("T")
Mode = processing_mode_pb2.ProcessingMode
BUFFERED = Mode.BUFFERED
FULL_DUPLEX = Mode.FULL_DUPLEX_STREAMED
NONE = Mode.NONE
STREAMED = Mode.STREAMED
MODEL = "llama-3-8b"


class RecordingService(PlacementService):
    """The real service, remembering every query it routed and every outcome reported."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.queries: list[RouteQuery] = []
        self.outcomes: list[tuple[str, int, bool]] = []

    def route(
        self, query: RouteQuery, *, routed_by: str | None = None, retry: bool = False
    ) -> Routed:
        self.queries.append(query)
        return super().route(query, routed_by=routed_by, retry=retry)

    def complete(
        self,
        decision_id: str,
        *,
        output_tokens: int,
        ok: bool,
        ttft_s: float | None = None,
        tpot_s: float | None = None,
    ) -> Lease:
        lease = super().complete(
            decision_id, output_tokens=output_tokens, ok=ok, ttft_s=ttft_s, tpot_s=tpot_s
        )
        self.outcomes.append((lease.replica_id, output_tokens, ok))
        return lease


def make_service(
    addresses: Sequence[str],
    *,
    models: Sequence[str] | None = None,
    in_flight_per_replica: int = 64,
    engine_priority: str | None = None,
) -> RecordingService:
    """The service over replicas at ``addresses`` (ids ``r0``, ``r1``, …), freshly scraped;
    ``engine_priority``: the replicas schedule by the priority each request is sent with."""

    def route_path(replicas: dict[str, ReplicaState]) -> PlacementRoutePath:
        return PlacementRoutePath(list(replicas.values()))

    service = RecordingService(
        route_path_factory=route_path,
        no_plan_fallback=True,
        in_flight_per_replica=in_flight_per_replica,
        engine_priority=engine_priority,
    )
    for i, address in enumerate(addresses):
        service.register_replica(
            ReplicaState(
                id=f"r{i}",
                address=address,
                model=models[i] if models else MODEL,
                accelerator="H100-SXM",
                tp=1,
                kv_capacity_tokens=400_000,
                scraped_at=time.monotonic(),
            )
        )
    return service


class RunningPicker:
    """An :class:`EppServer` on free ports, its event loop in a thread; call :meth:`stop`."""

    def __init__(self, service: PlacementService, config: PickerConfig | None = None) -> None:
        self.service = service
        self.picker = EndpointPicker(service, config)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server = EppServer(
            self.picker, port=0, health_port=0, metrics_port=0, health_interval_s=0.05
        )
        self.run(self.server.start())
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.server.port}")
        self.stub = external_processor_pb2_grpc.ExternalProcessorStub(self.channel)

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=10)

    def on_loop(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the picker's loop (where the service's state is written)."""

        async def call() -> T:
            return fn()

        return self.run(call())

    def exchange(self, requests: Iterable[Any]) -> list[Any]:
        """One ext_proc stream: send ``requests``, half-close, return every answer."""
        return list(self.stub.Process(iter(list(requests)), timeout=10))

    def stream(self) -> Stream:
        """An ext_proc stream driven one message at a time, as Envoy does."""
        return Stream(self.stub)

    def stop(self) -> None:
        self.channel.close()
        self.run(self.server.stop(0.1))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


class Stream:
    _END = object()

    def __init__(self, stub: Any) -> None:
        self._outbox: queue.Queue[Any] = queue.Queue()
        self._answers = stub.Process(iter(self._outbox.get, self._END), timeout=10)

    def send(self, *requests: Any) -> None:
        for request in requests:
            self._outbox.put(request)

    def receive(self, n: int = 1) -> list[Any]:
        return [next(self._answers) for _ in range(n)]

    def close(self) -> list[Any]:
        """Half-close; every answer still to come."""
        self._outbox.put(self._END)
        return list(self._answers)

    def cancel(self) -> None:
        """Cancel the call, as Envoy does when its client goes away."""
        self._answers.cancel()


def wait_until(condition: Callable[[], bool], timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


# --- what Envoy sends ----------------------------------------------------------------------


def _header_map(headers: Mapping[str, str]) -> Any:
    return base_pb2.HeaderMap(
        headers=[base_pb2.HeaderValue(key=k, raw_value=v.encode()) for k, v in headers.items()]
    )


def request_headers(
    headers: Mapping[str, str] | None = None,
    *,
    end_of_stream: bool = False,
    request_mode: int | None = None,
    response_mode: int = NONE,
    subset: Sequence[str] | None = None,
    path: str = "/v1/completions",
) -> Any:
    all_headers = {":method": "POST", ":path": path, "content-type": "application/json"}
    all_headers.update(headers or {})
    message = ext_proc.ProcessingRequest(
        request_headers=ext_proc.HttpHeaders(
            headers=_header_map(all_headers), end_of_stream=end_of_stream
        )
    )
    if request_mode is not None:
        message.protocol_config.request_body_mode = request_mode
        message.protocol_config.response_body_mode = response_mode
    if subset is not None:
        hint = message.metadata_context.filter_metadata["envoy.lb.subset_hint"]
        hint.fields["x-gateway-destination-endpoint-subset"].list_value.values.add()
        values = hint.fields["x-gateway-destination-endpoint-subset"].list_value.values
        del values[:]
        for endpoint in subset:
            values.add().string_value = endpoint
    return message


def request_body(body: bytes, *, end_of_stream: bool = True) -> Any:
    return ext_proc.ProcessingRequest(
        request_body=ext_proc.HttpBody(body=body, end_of_stream=end_of_stream)
    )


def request_trailers() -> Any:
    return ext_proc.ProcessingRequest(
        request_trailers=ext_proc.HttpTrailers(trailers=_header_map({"x-trailer": "1"}))
    )


def response_headers(
    status: int = 200,
    *,
    served: str | None = None,
    served_header: str | None = None,
    end_of_stream: bool = False,
) -> Any:
    headers = {":status": str(status), "content-type": "application/json"}
    if served_header is not None:
        headers["x-gateway-destination-endpoint-served"] = served_header
    message = ext_proc.ProcessingRequest(
        response_headers=ext_proc.HttpHeaders(
            headers=_header_map(headers), end_of_stream=end_of_stream
        )
    )
    if served is not None:
        lb = message.metadata_context.filter_metadata["envoy.lb"]
        lb.fields["x-gateway-destination-endpoint-served"].string_value = served
    return message


def response_body(body: bytes, *, end_of_stream: bool = True) -> Any:
    return ext_proc.ProcessingRequest(
        response_body=ext_proc.HttpBody(body=body, end_of_stream=end_of_stream)
    )


def completion(prompt: Any = "Hello, world", *, model: str = MODEL, **extra: Any) -> bytes:
    return json.dumps({"model": model, "prompt": prompt, **extra}).encode()


# --- reading what the picker answered ------------------------------------------------------


def set_headers(answer: Any) -> dict[str, str]:
    """The request headers an answer sets (from a headers or a body answer)."""
    part = answer.WhichOneof("response")
    mutation = getattr(answer, part).response.header_mutation
    return {h.header.key: h.header.raw_value.decode() for h in mutation.set_headers}


def metadata_destination(answer: Any) -> str | None:
    fields = answer.dynamic_metadata.fields
    if DESTINATION_NAMESPACE not in fields:
        return None
    namespace = fields[DESTINATION_NAMESPACE].struct_value.fields
    return namespace[DESTINATION].string_value if DESTINATION in namespace else None


def kinds(answers: Sequence[Any]) -> list[str]:
    return [a.WhichOneof("response") for a in answers]


def streamed(answers: Sequence[Any], part: str) -> tuple[bytes, list[bool]]:
    """The body an answer list streams back for ``part``, and each chunk's end_of_stream."""
    body = b""
    ends = []
    for a in answers:
        if a.WhichOneof("response") == part:
            chunk = getattr(a, part).response.body_mutation.streamed_response
            body += chunk.body
            ends.append(chunk.end_of_stream)
    return body, ends
