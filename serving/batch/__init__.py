"""OpenAI's Batch API beside the gateway: files and jobs persisted on disk (:mod:`.store`), the
jobs' life (:mod:`.jobs`), their requests run on idle capacity (:mod:`.runner`), the HTTP
endpoints (:mod:`.api`)."""

from __future__ import annotations

from collections.abc import Sequence

from serving.batch.api import BatchApi
from serving.batch.jobs import BatchJobs
from serving.batch.runner import BatchRunner, Load
from serving.batch.store import BatchStore
from serving.flow import IdlePolicy
from serving.gateway import Companion, Gateway


def batch_companions(gateway: Gateway) -> Sequence[Companion]:
    """The Batch API for ``gateway`` when its settings name a batch folder (else none)."""
    settings = gateway.settings
    if settings.batch_dir is None:
        return ()
    jobs = BatchJobs(BatchStore(settings.batch_dir))
    service = gateway.service
    admission = service.admission
    waiting = gateway.waiting
    queue = waiting.queue

    def load() -> Load:
        quiet = waiting.clock() - waiting.pressed_at
        return Load(queue.waiting, admission.in_flight, admission.fleet_in_flight, quiet)

    runner = BatchRunner(
        jobs,
        gateway.execute,
        load,
        service.metrics.registry,
        idle=IdlePolicy(
            busy_fraction=settings.batch_busy_fraction,
            batch_fraction=settings.batch_share,
            calm_s=settings.batch_calm_s,
        ),
    )
    return (
        BatchApi(
            jobs,
            runner,
            gateway.authenticate,
            max_file_bytes=settings.batch_max_file_bytes,
        ),
    )


__all__ = ["BatchApi", "BatchJobs", "BatchRunner", "BatchStore", "batch_companions"]
