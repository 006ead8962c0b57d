"""Flow control: the queue requests wait in instead of being refused (:mod:`.queue`) and the
rule for when batch work may use idle capacity (:mod:`.idle`). Pure: the gateway and the
simulator run the same objects. The asyncio around the queue that the gateway and the endpoint
picker share, :class:`serving.flow.waiting.WaitingRoom`, is imported from its own module."""

from serving.flow.idle import IdlePolicy, shows_load
from serving.flow.queue import FlowPolicy, FlowQueue, Offer, Waiting

__all__ = ["FlowPolicy", "FlowQueue", "IdlePolicy", "Offer", "Waiting", "shows_load"]
