"""``tiers``: interactive and batch classes on the heterogeneous fleet, unequal credits, tight
TTFT SLOs — where the cheapest feasible assignment of classes to accelerators decides goodput.

The workload is the tenant mix of :data:`TIERS_TENANTS` (``data/tenants/tiers.yaml``, see it for
the figures): two interactive tenants (Azure chat and code completion, first token within
0.5 s) and two batch tenants (Mooncake's long documents and ServeGen's reasoning clients, 60 s),
each sending the requests of its real trace in its one class, thinned to the file's request
shares (:mod:`sim.workloads.mix`). It runs on ``data/fleets/hetero.yaml``: on an L40S an
interactive request meets its SLO only while the replica is nearly idle, a batch one at any
load the KV memory holds, and an H100 costs 3.3× an L40S.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from placement.domain.tenancy import load_tenancy
from placement.paths import repo_root
from sim.workloads.base import Workload
from sim.workloads.mix import SourceLoader, mix_tenants

TIERS_TENANTS = repo_root() / "data" / "tenants" / "tiers.yaml"
TIERS_FLEET = repo_root() / "data" / "fleets" / "hetero.yaml"
DEFAULT_SPAN_S = 900.0


def load_tiers(
    load: SourceLoader,
    known: Collection[str],
    *,
    seed: int = 0,
    duration_s: float | None = None,
    tenants: Path = TIERS_TENANTS,
) -> Workload:
    """The ``tiers`` workload over ``duration_s`` (default :data:`DEFAULT_SPAN_S`): the tenant
    mix of ``tenants``, its sources (``known`` names) loaded by ``load``."""
    span = DEFAULT_SPAN_S if duration_s is None else duration_s
    return mix_tenants(load_tenancy(tenants), load, known, name="tiers", seed=seed, duration_s=span)
