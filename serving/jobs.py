"""Jobs that run off the request path (what-if solves): submit, then poll for the result.

A job's function runs in an executor (a worker process for solves); the job table keeps the
latest ``max_jobs`` so a busy planner's memory stays bounded.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, Literal

JobStatus = Literal["queued", "running", "done", "failed"]
DEFAULT_MAX_JOBS = 256


@dataclass(slots=True, kw_only=True)
class Job:
    id: str
    kind: str
    owner: str
    status: JobStatus = "queued"
    submitted_at: float = field(default_factory=time.time)
    finished_at: float | None = None
    result: dict[str, Any] | None = None
    error: str | None = None


class JobRunner:
    def __init__(
        self, *, executor: Callable[[], Executor | None], max_jobs: int = DEFAULT_MAX_JOBS
    ) -> None:
        self._executor = executor  # None runs in a thread (tests, light jobs)
        self._max_jobs = max_jobs
        self.jobs: OrderedDict[str, Job] = OrderedDict()
        self._ids = itertools.count(1)
        self._tasks: set[asyncio.Task[None]] = set()

    def submit(self, kind: str, owner: str, fn: Callable[..., dict[str, Any]], *args: Any) -> Job:
        job = Job(id=f"{kind}-{next(self._ids)}", kind=kind, owner=owner)
        self.jobs[job.id] = job
        while len(self.jobs) > self._max_jobs:
            self.jobs.popitem(last=False)
        task = asyncio.get_running_loop().create_task(self._run(job, fn, *args))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return job

    async def _run(self, job: Job, fn: Callable[..., dict[str, Any]], *args: Any) -> None:
        job.status = "running"
        try:
            executor = self._executor()
            if executor is None:
                job.result = await asyncio.to_thread(fn, *args)
            else:
                job.result = await asyncio.get_running_loop().run_in_executor(executor, fn, *args)
            job.status = "done"
        except Exception as exc:  # the job failed, not the service: report it on the job
            job.status = "failed"
            job.error = f"{type(exc).__name__}: {exc}"
        job.finished_at = time.time()

    def get(self, job_id: str) -> Job | None:
        return self.jobs.get(job_id)

    async def drain(self) -> None:
        """Wait for running jobs (tests, shutdown)."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
