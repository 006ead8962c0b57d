"""The endpoint picker protocol of the Gateway API Inference Extension, as Envoy ext_proc messages.

What the proxy and the picker tell each other (nothing here decides anything):

- **destination** (picker → proxy, on the request): the endpoints, ``ip:port``, the primary
  first and then the fallbacks in the order the proxy should try them, comma-separated; given
  twice with the same value, as the ``x-gateway-destination-endpoint`` request header and under
  the same key in the ``envoy.lb`` dynamic-metadata namespace;
- **subset** (proxy → picker, on the request, optional): the endpoints the picker may choose
  from, a list under ``x-gateway-destination-endpoint-subset`` in the ``envoy.lb.subset_hint``
  filter-metadata namespace;
- **served** (proxy → picker, on the response): the endpoint that served, which differs from
  the primary after a retry, under ``x-gateway-destination-endpoint-served`` in ``envoy.lb``;
- **refusals**: an ImmediateResponse, 429 with Retry-After when the request is shed, 503 when
  nothing can serve.

The messages are the generated ones of the ``xds-protos`` package (Envoy's data-plane API). It
ships no type stubs, so they are built and read here and the rest of the picker handles plain
Python values; :data:`Message` marks where a protobuf message passes through.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from envoy.config.core.v3 import base_pb2
from envoy.extensions.filters.http.ext_proc.v3 import processing_mode_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as ext_proc

Message = Any  # a generated protobuf message (xds-protos has no stubs)

DESTINATION = "x-gateway-destination-endpoint"
DESTINATION_NAMESPACE = "envoy.lb"
SUBSET = "x-gateway-destination-endpoint-subset"
SUBSET_NAMESPACE = "envoy.lb.subset_hint"
SERVED = "x-gateway-destination-endpoint-served"
# request headers the Inference Extension defines for the request's objective and fairness
OBJECTIVE = "x-gateway-inference-objective"
FAIRNESS_ID = "x-gateway-inference-fairness-id"
EXT_PROC_SERVICE = "envoy.service.ext_proc.v3.ExternalProcessor"
# recommended ceiling of one streamed body chunk sent back to Envoy
MAX_CHUNK_BYTES = 64 * 1024

_mode = processing_mode_pb2.ProcessingMode
NONE: int = _mode.NONE
STREAMED: int = _mode.STREAMED
BUFFERED: int = _mode.BUFFERED
BUFFERED_PARTIAL: int = _mode.BUFFERED_PARTIAL
FULL_DUPLEX_STREAMED: int = _mode.FULL_DUPLEX_STREAMED
BODY_MODES: dict[str, int] = {
    "NONE": NONE,
    "STREAMED": STREAMED,
    "BUFFERED": BUFFERED,
    "BUFFERED_PARTIAL": BUFFERED_PARTIAL,
    "FULL_DUPLEX_STREAMED": FULL_DUPLEX_STREAMED,
}
_OVERWRITE = base_pb2.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD


# --- reading what the proxy sent ---------------------------------------------------------------


def message_kind(request: Message) -> str:
    """Which part of the HTTP exchange a ProcessingRequest carries (``request_headers``, …)."""
    return str(request.WhichOneof("request"))


def header_map(headers: Message) -> dict[str, str]:
    """An HttpHeaders (or trailers) message as a dict, names in lower case. Envoy sends values
    as ``raw_value`` bytes; older versions as ``value``."""
    out: dict[str, str] = {}
    for h in headers.headers.headers:
        out[h.key.lower()] = h.raw_value.decode("latin-1") if h.raw_value else h.value
    return out


def body_modes(request: Message) -> tuple[int, int] | None:
    """(request body mode, response body mode) from the ``protocol_config`` Envoy puts on the
    first message of a stream; None when absent."""
    if not request.HasField("protocol_config"):
        return None
    config = request.protocol_config
    return int(config.request_body_mode), int(config.response_body_mode)


def _filter_metadata(request: Message, namespace: str) -> Message | None:
    if not request.HasField("metadata_context"):
        return None
    entries = request.metadata_context.filter_metadata
    return entries.get(namespace)


def subset_hint(request: Message) -> tuple[str, ...] | None:
    """The endpoints the proxy allows for this request; None when it sets no subset (an empty
    tuple when it sets an empty one: nothing may be chosen)."""
    namespace = _filter_metadata(request, SUBSET_NAMESPACE)
    if namespace is None or SUBSET not in namespace.fields:
        return None
    value = namespace.fields[SUBSET]
    if value.WhichOneof("kind") == "list_value":
        return tuple(v.string_value for v in value.list_value.values if v.string_value)
    return tuple(split_endpoints(value.string_value))


def served_endpoint(request: Message) -> str | None:
    """The endpoint that served, as the proxy reports it in the ``envoy.lb`` metadata."""
    namespace = _filter_metadata(request, DESTINATION_NAMESPACE)
    if namespace is None or SERVED not in namespace.fields:
        return None
    return str(namespace.fields[SERVED].string_value) or None


def split_endpoints(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


# --- answering --------------------------------------------------------------------------------


def destination_mutation(
    endpoints: Sequence[str],
    extra: Mapping[str, str] | None = None,
    remove: Iterable[str] = (),
) -> Message:
    """Set the destination header (``endpoints`` comma-separated) and ``extra`` headers on the
    request, overwriting whatever the client sent under those names; remove ``remove``."""
    mutation = ext_proc.HeaderMutation(remove_headers=list(remove))
    for key, value in ((DESTINATION, ",".join(endpoints)), *(extra or {}).items()):
        mutation.set_headers.append(
            base_pb2.HeaderValueOption(
                header=base_pb2.HeaderValue(key=key, raw_value=value.encode("latin-1")),
                append_action=_OVERWRITE,
            )
        )
    return mutation


def with_destination_metadata(response: Message, endpoints: Sequence[str]) -> Message:
    """``response`` carrying the same destination in the ``envoy.lb`` dynamic metadata."""
    namespace = response.dynamic_metadata.fields[DESTINATION_NAMESPACE].struct_value
    namespace.fields[DESTINATION].string_value = ",".join(endpoints)
    return response


def request_headers_response(mutation: Message | None = None) -> Message:
    common = ext_proc.CommonResponse()
    if mutation is not None:
        common.header_mutation.CopyFrom(mutation)
    return ext_proc.ProcessingResponse(request_headers=ext_proc.HeadersResponse(response=common))


def request_body_response(mutation: Message | None = None, body: bytes | None = None) -> Message:
    """The answer to a buffered request body: continue, with the request headers mutated and,
    given ``body``, the body replaced by it (the mutation must then set its Content-Length:
    in BUFFERED mode that is the processor's job)."""
    common = ext_proc.CommonResponse()
    if mutation is not None:
        common.header_mutation.CopyFrom(mutation)
    if body is not None:
        common.body_mutation.body = body
    return ext_proc.ProcessingResponse(request_body=ext_proc.BodyResponse(response=common))


def streamed_body(part: str, body: bytes, *, end_of_stream: bool) -> list[Message]:
    """A body handed back to Envoy in FULL_DUPLEX_STREAMED mode (``part``: ``request_body`` or
    ``response_body``), in chunks of at most :data:`MAX_CHUNK_BYTES`."""
    chunks = [body[i : i + MAX_CHUNK_BYTES] for i in range(0, len(body), MAX_CHUNK_BYTES)] or [b""]
    out = []
    for i, chunk in enumerate(chunks):
        last = i == len(chunks) - 1
        common = ext_proc.CommonResponse(
            body_mutation=ext_proc.BodyMutation(
                streamed_response=ext_proc.StreamedBodyResponse(
                    body=chunk, end_of_stream=end_of_stream and last
                )
            )
        )
        out.append(ext_proc.ProcessingResponse(**{part: ext_proc.BodyResponse(response=common)}))
    return out


def continue_response(part: str) -> Message:
    """Go on unchanged (``part``: ``response_headers``, ``response_body``, ``request_body``)."""
    if part.endswith("_trailers"):
        return ext_proc.ProcessingResponse(**{part: ext_proc.TrailersResponse()})
    if part.endswith("_headers"):
        return ext_proc.ProcessingResponse(**{part: ext_proc.HeadersResponse()})
    return ext_proc.ProcessingResponse(**{part: ext_proc.BodyResponse()})


def override_timeout(seconds: float) -> Message:
    """Ask Envoy to wait up to ``seconds`` for the answer to the message in flight (honoured up
    to the filter's ``max_message_timeout``): sent when a request starts waiting in the
    flow-control queue, which may outlast the filter's ``message_timeout``."""
    response = ext_proc.ProcessingResponse()
    response.override_message_timeout.FromNanoseconds(int(seconds * 1e9))
    return response


def immediate_response(
    status: int, body: bytes, *, headers: Mapping[str, str], details: str
) -> Message:
    """Answer the client now, without an upstream (``details`` goes to Envoy's access log)."""
    mutation = ext_proc.HeaderMutation()
    for key, value in headers.items():
        mutation.set_headers.append(
            base_pb2.HeaderValueOption(
                header=base_pb2.HeaderValue(key=key, raw_value=value.encode("latin-1")),
                append_action=_OVERWRITE,
            )
        )
    immediate = ext_proc.ImmediateResponse(body=body, headers=mutation, details=details)
    immediate.status.code = status
    return ext_proc.ProcessingResponse(immediate_response=immediate)
