"""A tenant mix from the command line: a tenants file whose tenants name the shipped workloads
they send (:mod:`sim.workloads.mix`), loaded from the registry."""

from __future__ import annotations

from placement.domain.tenancy import Tenancy
from sim.workloads.base import Workload
from sim.workloads.mix import DEFAULT_MIX_SPAN_S, mix_tenants
from sim.workloads.registry import WORKLOADS, load_workload

__all__ = ["DEFAULT_MIX_SPAN_S", "tenant_mix"]


def tenant_mix(
    tenancy: Tenancy, *, name: str, seed: int = 0, duration_s: float | None = None
) -> Workload:
    """The workload of a tenants file with a ``source`` per tenant (see :mod:`.mix`)."""
    return mix_tenants(
        tenancy,
        lambda source, s, span: load_workload(source, seed=s, duration_s=span),
        WORKLOADS,
        name=name,
        seed=seed,
        duration_s=duration_s,
    )
