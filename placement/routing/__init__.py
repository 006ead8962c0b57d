"""The route path as plugins: filters narrow replicas, scorers grade them in [0,1], a picker picks.

The same plugins run in the simulator and (later) in the service; they see only what a real
router sees: its own counters and replica metrics as of the last scrape.
"""

from placement.routing.base import (
    Filter,
    Picker,
    Pipeline,
    ReplicaView,
    RoutingPolicy,
    Scorer,
)

__all__ = ["Filter", "Picker", "Pipeline", "ReplicaView", "RoutingPolicy", "Scorer"]
