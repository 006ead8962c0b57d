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
from serving.champion_watch import ChampionWatch
from serving.jobs import JobRunner
from serving.planner import Planner
from serving.replica_scraper import ReplicaScraper
from serving.retraining import RetrainSchedule
from serving.service import PlacementService
from serving.shared import SharedSync
from serving.telemetry_sink import TelemetrySink
from serving.tenants import LiveTenancy

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
    # re-solves when the registry's champion changes (None: no planner here)
    champion: ChampionWatch | None = None
    # retraining on a schedule (None: not configured)
    retraining: RetrainSchedule | None = None


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
    jobs = JobRunner(executor=planner.executor if planner is not None else lambda: None)
    sink = TelemetrySink(settings.telemetry_dir) if settings.telemetry_dir is not None else None
    # the process that solves follows the champion; the others follow its plans
    champion = (
        ChampionWatch(service, planner.trigger, interval_s=settings.champion_poll_s)
        if planner is not None and settings.planner
        else None
    )
    return ServiceRuntime(
        settings=settings,
        keys=keys,
        service=service,
        planner=planner,
        scraper=ReplicaScraper(service, interval_s=settings.scrape_interval_s, sink=sink),
        whatif=whatif,
        whatif_context=whatif_context,
        jobs=jobs,
        background=background,
        tenancy=tenancy,
        telemetry=sink,
        champion=champion,
        retraining=_retrain_schedule(settings, service, champion),
    )


def _retrain_schedule(
    settings: Settings, service: PlacementService, champion: ChampionWatch | None
) -> RetrainSchedule | None:
    if settings.telemetry_dir is None or (
        settings.retrain_every_hours is None and settings.retrain_every_records is None
    ):
        return None
    return RetrainSchedule(
        settings.telemetry_dir,
        every_hours=settings.retrain_every_hours,
        every_records=settings.retrain_every_records,
        window_hours=settings.retrain_window_hours,
        experiment=settings.retrain_experiment,
        on_promoted=champion.check if champion is not None else None,
        observe=lambda result, s: service.metrics.retrain_time.labels(result).observe(s),
    )
