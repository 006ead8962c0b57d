"""Telemetry: per-request records and per-replica samples, their schemas, checks and store.

Producers: :func:`training.telemetry.simulated.telemetry_frames` (a simulated run) and
:func:`serving.scrape.scrape` (a vLLM replica's ``/metrics``). Consumers read the store with
:func:`read_requests` / :func:`read_samples` and build features with
:func:`training.dataset.build_training_frame`.
"""

from training.telemetry.schema import (
    REPLICA_SAMPLES_SCHEMA,
    REQUEST_COLUMNS,
    REQUESTS_SCHEMA,
    SAMPLE_COLUMNS,
    empty_frame,
    frame_from_rows,
)
from training.telemetry.store import (
    read_requests,
    read_samples,
    summarise_store,
    write_telemetry,
)
from training.telemetry.validate import validate_requests, validate_samples

__all__ = [
    "REPLICA_SAMPLES_SCHEMA",
    "REQUESTS_SCHEMA",
    "REQUEST_COLUMNS",
    "SAMPLE_COLUMNS",
    "empty_frame",
    "frame_from_rows",
    "read_requests",
    "read_samples",
    "summarise_store",
    "validate_requests",
    "validate_samples",
    "write_telemetry",
]
