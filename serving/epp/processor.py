"""The gRPC ``envoy.service.ext_proc.v3.ExternalProcessor`` service: one :class:`Exchange` per
stream (Envoy opens one stream per HTTP request). A stream that is cancelled while its request
waits in the flow-control queue cancels the wait (the request leaves the queue at once)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc

from serving.epp.exchange import Exchange
from serving.epp.picker import EndpointPicker
from serving.epp.protocol import Message


class ExternalProcessor:
    def __init__(self, picker: EndpointPicker) -> None:
        self.picker = picker

    async def Process(  # noqa: N802 (the gRPC method's name)
        self, requests: AsyncIterator[Message], context: grpc.aio.ServicerContext[Message, Message]
    ) -> AsyncIterator[Message]:
        exchange = Exchange(self.picker)
        streams = self.picker.metrics.streams
        streams.inc()
        try:
            async for request in requests:
                if exchange.may_wait(request):  # its decision may wait in the queue
                    async for answer in exchange.answers(request):
                        yield answer
                else:
                    for answer in await exchange.handle(request):
                        yield answer
        finally:
            exchange.close()
            streams.dec()
