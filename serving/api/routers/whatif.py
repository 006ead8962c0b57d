"""``POST /v1/whatif``: solve a scenario off the request path; poll ``GET /v1/jobs/{id}``."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Path

from serving.api.deps import Admin, RuntimeDep
from serving.api.responses import AUTH, JSON_BODY, problems
from serving.api.schemas import JobOut, WhatIfRequest
from serving.jobs import Job

router = APIRouter(prefix="/v1", tags=["what-if"])


def _out(job: Job) -> JobOut:
    return JobOut(
        id=job.id,
        kind=job.kind,
        status=job.status,
        submitted_at=job.submitted_at,
        finished_at=job.finished_at,
        result=job.result,
        error=job.error,
    )


@router.post(
    "/whatif",
    response_model=JobOut,
    status_code=202,
    responses=problems(*AUTH, *JSON_BODY, described={409: "no what-if solver configured"}),
    summary="Start a what-if solve; returns the job to poll",
)
async def start_whatif(body: WhatIfRequest, runtime: RuntimeDep, caller: Admin) -> JobOut:
    if runtime.whatif is None:
        raise HTTPException(409, "no what-if solver configured in this process")
    payload = body.model_dump()
    if runtime.whatif_context is not None:
        payload["context"] = runtime.whatif_context()
    job = runtime.jobs.submit("whatif", caller.name, runtime.whatif, payload)
    return _out(job)


@router.get(
    "/jobs/{job_id}",
    response_model=JobOut,
    responses=problems(*AUTH, 422, described={404: "no such job"}),
    summary="A job's status and, when done, its result",
)
async def job_status(runtime: RuntimeDep, _: Admin, job_id: str = Path(max_length=64)) -> JobOut:
    job = runtime.jobs.get(job_id)
    if job is None:
        raise HTTPException(404, f"no job '{job_id}'")
    return _out(job)
