"""Everything a running API holds: settings, keys, the placement service, the planner, jobs.

Built by :func:`serving.api.main.create_app` (or by ``placement serve``) and stored on
``app.state.runtime``; routes reach it through :mod:`serving.api.deps`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from serving.api.security import KeyRing
from serving.api.settings import Settings
from serving.jobs import JobRunner
from serving.planner import Planner
from serving.replica_scraper import ReplicaScraper
from serving.service import PlacementService
from serving.shared import SharedSync
from serving.telemetry_sink import TelemetrySink
from serving.tenants import LiveTenancy
from serving.tracing import decision_tracer

WhatIfFn = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(kw_only=True)
class ServiceRuntime:
    settings: Settings
    keys: KeyRing
    service: PlacementService
    planner: Planner | None = None
    scraper: ReplicaScraper | None = None
    # a scenario → its result; a module-level function (it runs in a worker process)
    whatif: WhatIfFn | None = None
    # what a what-if job needs of this service, added to its body as ``context`` at submission
    whatif_context: Callable[[], dict[str, Any]] | None = None
    jobs: JobRunner = field(default_factory=lambda: JobRunner(executor=lambda: None))
    background: bool = True  # run the scraper and the planner loop while serving
    # tenants, credits and classes as persisted and edited through the admin API
    tenancy: LiveTenancy | None = None
    # the state shared with the fleet's other service processes (None: this process alone)
    shared: SharedSync | None = None
    # where request outcomes are recorded (None: not recorded)
    telemetry: TelemetrySink | None = None


def build_runtime(
    settings: Settings,
    *,
    service: PlacementService,
    planner: Planner | None = None,
    whatif: WhatIfFn | None = None,
    whatif_context: Callable[[], dict[str, Any]] | None = None,
    background: bool = True,
    tenancy: LiveTenancy | None = None,
    tenants_doc: Mapping[str, Any] | None = None,
) -> ServiceRuntime:
    """The runtime for ``settings``: keys (plus the development key), the scraper, a planner
    that has resumed the store's last good plan and the persisted credit counters, and the
    tenancy (the stored one, else ``tenants_doc``: the tenants file's)."""
    all_keys = settings.all_keys()
    keys = KeyRing(all_keys, dev_key=settings.dev_key)
    if tenancy is not None:
        tenancy.on_keys = keys.set_tenant_keys
        tenancy.start(tenants_doc)
    # a tenant-scoped key's tenant is a declared one: its name may label metrics
    service.metrics.tenant_label.declare(k.tenant for k in all_keys if k.tenant is not None)
    if planner is not None:
        planner.resume()
        service.admission.vtc.restore(planner.store.load_credits())
    service.tracer = decision_tracer(settings.otlp_endpoint)
    jobs = JobRunner(executor=planner.executor if planner is not None else lambda: None)
    return ServiceRuntime(
        settings=settings,
        keys=keys,
        service=service,
        planner=planner,
        scraper=ReplicaScraper(service, interval_s=settings.scrape_interval_s),
        whatif=whatif,
        whatif_context=whatif_context,
        jobs=jobs,
        background=background,
        tenancy=tenancy,
        telemetry=TelemetrySink(settings.telemetry_dir)
        if settings.telemetry_dir is not None
        else None,
    )
