"""One HTTP request's ext_proc stream: each message Envoy sends in, the answers it expects out.

**Request, BUFFERED body** (and BUFFERED_PARTIAL): the headers are answered at once (go on);
the whole body arrives in one message, and its answer carries the destination header and
metadata. **Request, FULL_DUPLEX_STREAMED body**: Envoy streams headers and body chunks without
waiting; nothing is answered until the body is complete (its last chunk, or the trailers), then
the headers' answer carries the destination and the body goes back unchanged, in chunks, as
the mode requires. (STREAMED, which the protocol does not name, is answered chunk by chunk and
decided on the last; whether the proxy still applies a header mutation then is its own
affair.) A request without a body (or with the body mode NONE) is placed from its
headers alone (:meth:`EndpointPicker.pick_any`). A Content-Length, or a body, over the limit is
answered 413 at once. With flow control on, the decision may wait in the flow-control queue
(:meth:`EndpointPicker.place`): the stream holds, and the answer that carries the destination
(or the 429) is sent when it comes; when the wait starts, Envoy is first asked to wait that long
for it (``override_message_timeout``, beyond the filter's ``message_timeout``, up to its
``max_message_timeout``) — :meth:`Exchange.answers`. When the replicas schedule by priority
(the service's ``engine_priority``), the body goes on with the priority the service set (vLLM's
``priority``, over the client's) and the Content-Length that matches it: replaced in the
BUFFERED body's answer, streamed back in FULL_DUPLEX_STREAMED.

**Response**: the headers tell the status and, from the proxy, the endpoint that served
(``envoy.lb`` metadata, or the same-named header, which is removed before the client sees it);
the first body bytes are the first token; the end of the body (or trailers) completes the
lease with the output tokens counted in :mod:`serving.epp.usage`. A FULL_DUPLEX_STREAMED
response body is handed back chunk by chunk; other modes are answered "go on". If the stream
ends first (client gone, proxy error, body mode NONE), :meth:`Exchange.close` completes the
lease from what was seen.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

from serving.epp.body import BadBody, parse_body
from serving.epp.picker import EndpointPicker, Pick
from serving.epp.protocol import (
    FULL_DUPLEX_STREAMED,
    NONE,
    SERVED,
    STREAMED,
    Message,
    body_modes,
    continue_response,
    destination_mutation,
    header_map,
    message_kind,
    override_timeout,
    request_body_response,
    request_headers_response,
    served_endpoint,
    streamed_body,
    subset_hint,
    with_destination_metadata,
)
from serving.epp.refusals import Refusal
from serving.epp.usage import OutputTokens
from serving.gateway.prompt import with_priority

_SERVER_ERROR = 500
CONTENT_LENGTH = "content-length"
# Envoy is asked to wait this much longer than the queue may hold a request (the 429 at its
# deadline comes from the queue's next pump)
OVERRIDE_MARGIN_S = 1.0


class Exchange:
    def __init__(self, picker: EndpointPicker) -> None:
        self.picker = picker
        config = picker.config
        self.request_mode = config.request_body_mode
        self.response_mode = config.response_body_mode
        self.headers: dict[str, str] = {}
        self.subset: tuple[str, ...] | None = None
        self.body = bytearray()
        self.decided = False  # the destination (or a refusal) was answered
        self.pick: Pick | None = None
        self.refusal: Refusal | None = None
        self.status = 0
        self.first_token = False
        self.finished = False
        self.output = OutputTokens()
        self.arrival = picker.now()  # the stream opens with the request's headers
        self._queued = asyncio.Event()  # the decision started waiting in the queue
        self._queued_for = 0.0  # … for at most this long
        # the messages that may have to wait for a decision
        self._deciding: dict[str, Callable[[Message], Awaitable[list[Message]]]] = {
            "request_headers": self._request_headers,
            "request_body": self._request_body,
            "request_trailers": self._request_trailers,
        }
        self._handlers: dict[str, Callable[[Message], list[Message]]] = {
            "response_headers": self._response_headers,
            "response_body": self._response_body,
            "response_trailers": self._response_trailers,
        }

    def may_wait(self, request: Message) -> bool:
        """Could answering ``request`` wait in the flow-control queue?"""
        return (
            self.picker.room is not None
            and not self.decided
            and message_kind(request) in self._deciding
        )

    async def answers(self, request: Message) -> AsyncIterator[Message]:
        """:meth:`handle`'s answers; a decision that starts waiting in the flow-control queue
        first asks Envoy to wait for it. Cancelled (the stream was), it leaves the queue."""
        handling = asyncio.ensure_future(self.handle(request))
        queued = asyncio.ensure_future(self._queued.wait())
        try:
            await asyncio.wait((handling, queued), return_when=asyncio.FIRST_COMPLETED)
            if not handling.done():
                yield override_timeout(self._queued_for + OVERRIDE_MARGIN_S)
            for answer in await handling:
                yield answer
        finally:
            queued.cancel()
            if not handling.done():
                handling.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await handling

    def _on_queued(self, longest_s: float) -> None:
        self._queued_for = longest_s
        self._queued.set()

    async def handle(self, request: Message) -> list[Message]:
        """The answers to one ProcessingRequest (none while a full-duplex body streams in)."""
        modes = body_modes(request)
        if modes is not None:
            self.request_mode, self.response_mode = modes
        subset = subset_hint(request)
        if subset is not None:
            self.subset = subset
        kind = message_kind(request)
        deciding = self._deciding.get(kind)
        if deciding is not None:
            return await deciding(request)
        handler = self._handlers.get(kind)
        return [] if handler is None else handler(request)

    # --- the request ---------------------------------------------------------------------

    async def _request_headers(self, request: Message) -> list[Message]:
        headers = request.request_headers
        self.headers = header_map(headers)
        length = self.headers.get(CONTENT_LENGTH, "")
        limit = self.picker.config.max_body_bytes
        if length.isdigit() and int(length) > limit:
            return self._refuse(_too_large(limit))
        if headers.end_of_stream or self.request_mode == NONE:
            return await self._decide(None, duplex=False, end_of_stream=True)
        if self.request_mode == FULL_DUPLEX_STREAMED:
            return []
        return [request_headers_response()]

    async def _request_body(self, request: Message) -> list[Message]:
        if self.decided:  # a refusal was answered: Envoy stops the request
            return []
        chunk = request.request_body
        self.body += chunk.body
        limit = self.picker.config.max_body_bytes
        if len(self.body) > limit:
            return self._refuse(_too_large(limit))
        if self.request_mode == FULL_DUPLEX_STREAMED:
            if not chunk.end_of_stream:
                return []
            return await self._decide(bytes(self.body), duplex=True, end_of_stream=True)
        if self.request_mode == STREAMED and not chunk.end_of_stream:
            return [continue_response("request_body")]  # each chunk answered; decide at the end
        return await self._decide(bytes(self.body), duplex=False, end_of_stream=True)

    async def _request_trailers(self, request: Message) -> list[Message]:
        answers = []
        if not self.decided and self.request_mode == FULL_DUPLEX_STREAMED:
            answers = await self._decide(bytes(self.body), duplex=True, end_of_stream=False)
        if self.refusal is None:
            answers.append(continue_response("request_trailers"))
        return answers

    async def _decide(
        self, raw: bytes | None, *, duplex: bool, end_of_stream: bool
    ) -> list[Message]:
        self.decided = True
        picker = self.picker
        outcome: Pick | Refusal
        if raw is None:
            outcome = picker.pick_any(self.subset)
        else:
            try:
                body = parse_body(raw)
            except BadBody as exc:
                outcome = Refusal(status=400, message=str(exc), code="invalid_request_body")
                picker.count(outcome)
            else:
                outcome = await picker.place(
                    body,
                    self.headers,
                    self.subset,
                    arrival=self.arrival,
                    on_queued=self._on_queued,
                )
        if isinstance(outcome, Refusal):
            return self._refuse(outcome)
        self.pick = outcome
        headers = outcome.headers
        sent = raw
        if raw is not None and outcome.priority is not None:  # replicas scheduling by priority
            sent = with_priority(raw, outcome.priority)
            headers = {**headers, CONTENT_LENGTH: str(len(sent))}
        mutation = destination_mutation(outcome.endpoints, headers, remove=(SERVED,))
        if raw is None or duplex:
            first = request_headers_response(mutation)
        else:
            first = request_body_response(mutation, None if sent is raw else sent)
        answers = [with_destination_metadata(first, outcome.endpoints)]
        if duplex:
            answers += streamed_body("request_body", sent or b"", end_of_stream=end_of_stream)
        return answers

    def _refuse(self, refusal: Refusal) -> list[Message]:
        if not self.decided:
            self.picker.count(refusal)
        self.decided = True
        self.refusal = refusal
        return [refusal.response()]

    # --- the response --------------------------------------------------------------------

    def _response_headers(self, request: Message) -> list[Message]:
        headers = header_map(request.response_headers)
        status = headers.get(":status", "")
        self.status = int(status) if status.isdigit() else 0
        served = served_endpoint(request) or headers.get(SERVED)
        if served and self.pick is not None:
            self.picker.served(self.pick, served)
        answer = continue_response("response_headers")
        if SERVED in headers:  # the proxy's note to the picker, not for the client
            answer.response_headers.response.header_mutation.remove_headers.append(SERVED)
        if request.response_headers.end_of_stream:
            self._finish(ok=self._ok())
        return [answer]

    def _response_body(self, request: Message) -> list[Message]:
        chunk = request.response_body
        if chunk.body:
            self.output.feed(chunk.body)
            if not self.first_token and self.pick is not None:
                self.first_token = True
                self.picker.first_token(self.pick)
        if self.response_mode == FULL_DUPLEX_STREAMED:
            answers = streamed_body("response_body", chunk.body, end_of_stream=chunk.end_of_stream)
        else:
            answers = [continue_response("response_body")]
        if chunk.end_of_stream:
            self._finish(ok=self._ok())
        return answers

    def _response_trailers(self, request: Message) -> list[Message]:
        self._finish(ok=self._ok())
        return [continue_response("response_trailers")]

    def _ok(self) -> bool:
        return 0 < self.status < _SERVER_ERROR

    def _finish(self, *, ok: bool) -> None:
        if self.finished:
            return
        self.finished = True
        pick = self.pick
        if pick is not None:
            default = pick.max_output_tokens if ok else 0
            self.picker.finish(pick, ok=ok, output_tokens=self.output.tokens(default))

    def close(self) -> None:
        """The stream ended: complete the lease from what was seen, if the response did not."""
        if not self.finished and self.pick is not None and self.pick.decision_id is not None:
            # with the response body mode NONE the headers are all the picker sees of a response
            complete = self.status > 0 and self.response_mode == NONE
            if not complete:
                self.picker.metrics.incomplete.inc()
            self._finish(ok=complete and self._ok())
        self.finished = True


def _too_large(limit: int) -> Refusal:
    return Refusal(
        status=413,
        message=f"The request body is over {limit} bytes.",
        code="request_too_large",
    )
