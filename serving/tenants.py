"""The live tenancy: tenants, credits, request classes and allowed models as the service
applies them, edited by operators through the admin API and persisted in the plan store.

One document (the tenants file's shape, :mod:`placement.domain.tenancy`) is the truth. Every
edit is made on a copy, validated whole (credit shares still sum to at most 1, a burst cap
still at or above its credit, …), saved to the store as a new version and then applied, so a
refused edit changes nothing and an accepted one survives a restart. Every process sharing the
store follows the version (:meth:`LiveTenancy.follow`) and applies what another one saved.

At start, the stored document wins over the tenants file when one was saved (the file seeds an
empty store); a credit in GPU-seconds is converted with the GPUs of the replicas registered.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Mapping
from typing import Any

from placement.domain.tenancy import Tenancy, TenantKey, tenancy_from_dict
from placement.errors import InputError, PlacementError
from serving.plan_store.base import PlanStore
from serving.service import PlacementService

log = logging.getLogger(__name__)

STORE_SOURCE = "the stored tenants"


class TenancyConflict(PlacementError):
    """The edit names a tenant or class that exists (create) or does not (update, delete), or
    leaves a tenancy that does not hold together (credits over the fleet, …)."""

    def __init__(self, message: str, *, status: int) -> None:
        self.status = status
        super().__init__(message)


class LiveTenancy:
    """``on_keys`` is told the tenant-scoped keys whenever they change (the API's key ring)."""

    def __init__(
        self,
        service: PlacementService,
        store: PlanStore,
        *,
        on_keys: Callable[[tuple[TenantKey, ...]], None] = lambda keys: None,
    ) -> None:
        self.service = service
        self.store = store
        self.on_keys = on_keys
        self.version = 0
        self.doc: dict[str, Any] = {"tenants": {}}
        self.tenancy: Tenancy | None = None

    def fleet_gpus(self) -> float:
        return float(sum(s.tp for s in self.service.replicas.values()))

    def parse(self, doc: Mapping[str, Any], *, source: str = "tenants") -> Tenancy:
        return tenancy_from_dict(
            dict(doc), source=source, fleet_gpus=self.fleet_gpus(), allow_empty=True
        )

    def start(self, file_doc: Mapping[str, Any] | None) -> None:
        """Apply the stored document if any (a restart), else seed the store with the
        tenants file's (``file_doc``; None: nothing declared)."""
        try:
            stored = self.store.load_tenancy()
        except PlacementError as exc:
            log.warning("cannot read the stored tenants (%s): using the tenants file", exc)
            stored = None
        if stored is not None:
            self._apply(self.parse(stored.doc, source=STORE_SOURCE), stored.version)
            return
        if file_doc is None:
            return
        tenancy = self.parse(file_doc, source="the tenants file")
        try:
            version = self.store.save_tenancy(tenancy.doc)
        except PlacementError as exc:
            log.warning("cannot persist the tenants file's tenants: %s", exc)
            version = 0
        self._apply(tenancy, version)

    def _apply(self, tenancy: Tenancy, version: int) -> None:
        self.service.apply_tenancy(tenancy)
        self.on_keys(tenancy.keys)
        self.tenancy = tenancy
        self.doc = dict(tenancy.doc)
        self.version = version

    def follow(self) -> bool:
        """Apply a version another process saved; True when one was applied. An emptied store
        (a Redis replaced) gets this process's document back. Raises the store's errors."""
        version = self.store.tenancy_version()
        if version == self.version:
            return False
        if version == 0:
            if self.tenancy is not None:
                self.store.save_tenancy(self.doc, version=self.version)
            return False
        stored = self.store.load_tenancy()
        if stored is None:
            return False
        try:
            tenancy = self.parse(stored.doc, source=STORE_SOURCE)
        except InputError as exc:
            log.warning("not applying stored tenants version %d: %s", stored.version, exc)
            self.version = stored.version
            return False
        self._apply(tenancy, stored.version)
        return True

    # --- edits ------------------------------------------------------------------------------

    def edit(self, change: Callable[[dict[str, Any]], None]) -> Tenancy:
        """Apply ``change`` to a copy of the document, validate it, persist it, apply it."""
        try:  # start from the newest saved version (another process may have edited it)
            self.follow()
        except PlacementError as exc:
            log.warning("editing tenants without the store's newest version: %s", exc)
        doc = copy.deepcopy(self.doc)
        doc.setdefault("tenants", {})
        change(doc)
        try:
            tenancy = self.parse(doc)
        except InputError as exc:  # well-formed, but not with the other tenants as they are
            raise TenancyConflict(str(exc), status=409) from None
        version = self.store.save_tenancy(tenancy.doc)
        self._apply(tenancy, version)
        return tenancy

    def put_tenant(self, name: str, spec: Mapping[str, Any], *, create: bool) -> Tenancy:
        """Declare a tenant (``create``: 409 if it exists) or replace one (404 if missing);
        its API keys are kept unless ``spec`` gives them."""

        def change(doc: dict[str, Any]) -> None:
            tenants = doc["tenants"]
            exists = name in tenants
            if create and exists:
                raise TenancyConflict(f"tenant {name!r} exists", status=409)
            if not create and not exists:
                raise TenancyConflict(f"no tenant {name!r}", status=404)
            new = dict(spec)
            if "api_keys" not in new and exists and "api_keys" in tenants[name]:
                new["api_keys"] = tenants[name]["api_keys"]
            tenants[name] = new

        return self.edit(change)

    def delete_tenant(self, name: str) -> Tenancy:
        def change(doc: dict[str, Any]) -> None:
            if name not in doc["tenants"]:
                raise TenancyConflict(f"no tenant {name!r}", status=404)
            del doc["tenants"][name]

        return self.edit(change)

    def add_key(self, tenant: str, key: Mapping[str, Any]) -> Tenancy:
        """Add a tenant-scoped key (``name``, ``digest``, ``scopes``) to ``tenant``."""

        def change(doc: dict[str, Any]) -> None:
            spec = doc["tenants"].get(tenant)
            if spec is None:
                raise TenancyConflict(f"no tenant {tenant!r}", status=404)
            keys = list(spec.get("api_keys", ()))
            if any(k["name"] == key["name"] for k in keys):
                raise TenancyConflict(f"tenant {tenant!r} has a key {key['name']!r}", status=409)
            spec["api_keys"] = [*keys, dict(key)]

        return self.edit(change)

    def put_class(self, name: str, spec: Mapping[str, Any]) -> Tenancy:
        def change(doc: dict[str, Any]) -> None:
            doc.setdefault("classes", {})[name] = dict(spec)

        return self.edit(change)

    def delete_class(self, name: str) -> Tenancy:
        def change(doc: dict[str, Any]) -> None:
            classes = doc.get("classes", {})
            if name not in classes:
                raise TenancyConflict(
                    f"no request class {name!r} declared (the built-in classes can be "
                    "redefined, not deleted)",
                    status=404,
                )
            del classes[name]

        return self.edit(change)
