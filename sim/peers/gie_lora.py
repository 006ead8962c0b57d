"""``gie_lora``: the Gateway API Inference Extension's LoRA-aware endpoint picking.

Reimplemented from the project's published scheduling description (its scheduling flowchart
and the model-server protocol's "LoRA Adapter Serving" section): from the pods serving the
base model and healthy,

1. keep those whose waiting queue is at most :data:`QUEUE_THRESHOLD` (all, when none is);
2. **LoRA affinity**: keep those where the request's adapter is already active (running or
   waiting there: vLLM's ``lora_requests_info`` metric, as of the last scrape); else those that
   can take one more adapter (fewer active adapters than ``max_loras``); else leave the set as
   it is. (GIE's soft affinity leaves the affine set with probability 0.001 to spread load;
   here always affine: deterministic);
3. least waiting queue, then least KV-cache usage; the router's own in-flight count breaks
   ties between scrapes.

Requests with no adapter skip step 2. The adapter-unaware peers route adapter requests like
any other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from placement.domain.requests import Request
from sim.router import ReplicaView

if TYPE_CHECKING:
    from sim.peers.context import PolicyContext

QUEUE_THRESHOLD = 128


class GieLora:
    name = "gie_lora"

    def route(self, req: Request, replicas: Sequence[ReplicaView], now: float) -> int:
        model = req.model
        pods = [v for v in replicas if v.healthy and (not model or v.model == model)]
        if not pods:
            return -1
        pods = [v for v in pods if v.num_waiting <= QUEUE_THRESHOLD] or pods
        adapter = req.adapter
        if adapter:
            affine = [v for v in pods if adapter in v.adapters]
            if not affine:
                affine = [v for v in pods if len(v.adapters) < v.max_loras]
            pods = affine or pods
        best = min(pods, key=lambda v: (v.num_waiting, v.kv_usage, v.outstanding, v.index))
        return best.index

    def on_first_token(self, req: Request, replica: ReplicaView, now: float) -> None:
        return None

    def on_complete(self, req: Request, replica: ReplicaView, now: float) -> None:
        return None


def build(ctx: PolicyContext) -> GieLora:
    """The GIE LoRA-affinity picker (deterministic: no seed needed)."""
    del ctx
    return GieLora()
