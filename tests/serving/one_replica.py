"""The one H100 replica the service's unit tests register: always freshly scraped."""

from __future__ import annotations

import math

from serving.route import ReplicaState


def one_h100() -> ReplicaState:
    """Replica ``h100-0`` at 10.0.0.1:8000 serving Llama-3-8B, its scrape never stale."""
    return ReplicaState(
        id="h100-0",
        address="10.0.0.1:8000",
        model="llama-3-8b",
        accelerator="H100-SXM",
        tp=1,
        kv_capacity_tokens=400_000,
        scraped_at=math.inf,
    )
