"""Plan stores: a directory by default, Redis when many service processes share plans."""

from __future__ import annotations

from pathlib import Path

from serving.plan_store.base import CorruptPlan, PlanStore, PlanStoreError
from serving.plan_store.directory import DirectoryPlanStore


def open_plan_store(*, plan_dir: str | Path, redis_url: str | None = None) -> PlanStore:
    """Redis when ``redis_url`` is given, else the directory."""
    if redis_url:
        from serving.plan_store.redis import RedisPlanStore

        return RedisPlanStore(redis_url)
    return DirectoryPlanStore(plan_dir)


__all__ = ["CorruptPlan", "DirectoryPlanStore", "PlanStore", "PlanStoreError", "open_plan_store"]
