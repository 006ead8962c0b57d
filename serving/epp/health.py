"""The picker's gRPC health services (grpc.health.v1), as the Inference Extension names them.

- ``liveness``: SERVING while the process answers;
- ``readiness`` and ``envoy.service.ext_proc.v3.ExternalProcessor``: SERVING when the service
  is ready (a plan, or greedy routing allowed without one: :meth:`PlacementService.readiness`)
  and has a replica to route to; NOT_SERVING otherwise;
- the empty service name (the server as a whole) follows readiness.

:meth:`PickerHealth.run` re-reads readiness every interval; shutdown turns everything
NOT_SERVING before the servers stop.
"""

from __future__ import annotations

import asyncio

from grpc_health.v1 import health_pb2
from grpc_health.v1.health import aio

from serving.epp.protocol import EXT_PROC_SERVICE
from serving.service import PlacementService

LIVENESS = "liveness"
READINESS = "readiness"
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
DEFAULT_INTERVAL_S = 1.0


class PickerHealth:
    def __init__(self, service: PlacementService) -> None:
        self.service = service
        self.servicer = aio.HealthServicer()

    def ready(self) -> bool:
        ready, _ = self.service.readiness()
        return ready and any(s.healthy for s in self.service.replicas.values())

    async def refresh(self) -> None:
        ready = SERVING if self.ready() else NOT_SERVING
        await self.servicer.set(LIVENESS, SERVING)
        for name in (READINESS, EXT_PROC_SERVICE, ""):
            await self.servicer.set(name, ready)

    async def run(self, interval_s: float = DEFAULT_INTERVAL_S) -> None:
        while True:
            await self.refresh()
            await asyncio.sleep(interval_s)

    async def shutdown(self) -> None:
        await self.servicer.enter_graceful_shutdown()
