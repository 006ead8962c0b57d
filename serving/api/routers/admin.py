"""The admin API: tenants (credits, burst caps, weights, allowed models, API keys) and request
classes, persisted in the plan store and applied at once (``admin`` scope)."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import APIRouter, HTTPException, Path, Response

from placement.domain.tenancy import Tenancy
from serving.api.admin_schemas import (
    NAME_PATTERN,
    ClassBody,
    ClassOut,
    KeyIn,
    KeyOut,
    TenancyOut,
    TenantBody,
    TenantIn,
    TenantOut,
)
from serving.api.deps import Admin, RuntimeDep
from serving.api.responses import AUTH, JSON_BODY, problems
from serving.api.runtime import ServiceRuntime
from serving.api.security import generate_key, hash_key
from serving.tenants import LiveTenancy, TenancyConflict

router = APIRouter(prefix="/v1/admin", tags=["admin"])
Name = Path(pattern=NAME_PATTERN)
EDIT = problems(
    *AUTH,
    *JSON_BODY,
    503,
    described={
        404: "no such tenant",
        409: "the tenant exists (create), or the edit conflicts with the other tenants (credit "
        "shares over 1, a burst cap below the credit, more GPU-seconds than the fleet has)",
    },
)


def _live(runtime: ServiceRuntime) -> LiveTenancy:
    if runtime.tenancy is None:
        raise HTTPException(409, "no tenancy store in this process")
    return runtime.tenancy


def _tenancy_out(live: LiveTenancy) -> TenancyOut:
    tenancy = live.tenancy
    service = live.service
    specs = live.doc.get("tenants", {})
    keys: dict[str, list[str]] = {}
    for k in tenancy.keys if tenancy is not None else ():
        keys.setdefault(k.tenant, []).append(k.name)
    tenants = [
        TenantOut(
            name=name,
            credit_share=t.credit_share,
            burst_cap=t.burst_cap,
            weight=t.weight,
            models=list(service.allowed_models[name]) if name in service.allowed_models else None,
            keys=keys.get(name, []),
            spec=specs.get(name, {}),
        )
        for name, t in sorted(service.tenants.items())
    ]
    classes = [
        ClassOut(
            name=c.name,
            priority=c.priority,
            ttft_slo_s=c.ttft_slo_s,
            tpot_slo_s=c.tpot_slo_s,
            sheddable=c.sheddable,
        )
        for c in sorted(service.classes.values(), key=lambda c: (c.priority, c.name))
    ]
    return TenancyOut(version=live.version, tenants=tenants, classes=classes)


def _edited(live: LiveTenancy, change: Callable[[], Tenancy]) -> TenancyOut:
    try:
        change()
    except TenancyConflict as exc:
        raise HTTPException(exc.status, str(exc)) from None
    return _tenancy_out(live)


@router.get(
    "/tenants",
    response_model=TenancyOut,
    responses=problems(*AUTH, 409),
    summary="Every tenant and request class, as applied",
)
async def list_tenants(runtime: RuntimeDep, _: Admin) -> TenancyOut:
    return _tenancy_out(_live(runtime))


@router.post(
    "/tenants",
    response_model=TenancyOut,
    status_code=201,
    responses=EDIT,
    summary="Declare a tenant (credit as a share or GPU-seconds per window, cap, weight, "
    "models, keys)",
)
async def create_tenant(body: TenantIn, runtime: RuntimeDep, _: Admin) -> TenancyOut:
    live = _live(runtime)
    spec = body.model_dump(mode="json", exclude_defaults=True, exclude={"name"})
    return _edited(live, lambda: live.put_tenant(body.name, spec, create=True))


@router.put(
    "/tenants/{name}",
    response_model=TenancyOut,
    responses=EDIT,
    summary="Replace a tenant's entry (its keys stay unless the body gives them)",
)
async def update_tenant(
    body: TenantBody, runtime: RuntimeDep, _: Admin, name: str = Name
) -> TenancyOut:
    live = _live(runtime)
    spec = body.model_dump(mode="json", exclude_defaults=True)
    return _edited(live, lambda: live.put_tenant(name, spec, create=False))


@router.delete(
    "/tenants/{name}",
    status_code=204,
    responses=problems(*AUTH, 409, 422, 503, described={404: "no such tenant"}),
    summary="Remove a tenant (its keys stop working)",
)
async def delete_tenant(runtime: RuntimeDep, _: Admin, name: str = Name) -> Response:
    live = _live(runtime)
    _edited(live, lambda: live.delete_tenant(name))
    return Response(status_code=204)


@router.post(
    "/tenants/{name}/keys",
    response_model=KeyOut,
    status_code=201,
    responses=EDIT,
    summary="Make an API key for a tenant (shown once)",
)
async def create_key(body: KeyIn, runtime: RuntimeDep, _: Admin, name: str = Name) -> KeyOut:
    live = _live(runtime)
    key = generate_key()
    digest = hash_key(key)
    declared = {"name": body.name, "digest": digest, "scopes": list(body.scopes)}
    _edited(live, lambda: live.add_key(name, declared))
    return KeyOut(tenant=name, name=body.name, scopes=list(body.scopes), key=key, digest=digest)


@router.put(
    "/classes/{name}",
    response_model=TenancyOut,
    responses=EDIT,
    summary="Declare or redefine a request class (priority, TTFT and TPOT SLOs, sheddable)",
)
async def put_class(body: ClassBody, runtime: RuntimeDep, _: Admin, name: str = Name) -> TenancyOut:
    live = _live(runtime)
    spec = body.model_dump(mode="json")
    return _edited(live, lambda: live.put_class(name, spec))


@router.delete(
    "/classes/{name}",
    status_code=204,
    responses=problems(*AUTH, 409, 422, 503, described={404: "no such declared class"}),
    summary="Remove a declared request class",
)
async def delete_class(runtime: RuntimeDep, _: Admin, name: str = Name) -> Response:
    live = _live(runtime)
    _edited(live, lambda: live.delete_class(name))
    return Response(status_code=204)
