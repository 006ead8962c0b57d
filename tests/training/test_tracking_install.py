"""The install leaves MLflow's OpenTelemetry protos whole (xds-protos ships an older copy of
the same files; the Makefile reinstalls MLflow's last)."""

from __future__ import annotations


def test_mlflow_imports_with_the_tracing_protos_it_needs() -> None:
    from opentelemetry.proto.trace.v1 import trace_pb2

    assert hasattr(trace_pb2, "TracesData")
    import mlflow.tracking  # noqa: F401  (fails on the older protos)
