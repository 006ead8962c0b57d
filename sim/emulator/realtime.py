"""The simulator's engine driven in real (optionally scaled) time on an asyncio loop.

One :class:`RealtimeEngine` wraps one :class:`sim.engine.Replica` (continuous batching, chunked
prefill, paged prefix cache, timings from the engine cost model). The replica advances from one
batch change to the next exactly as in the simulator; here each run's end is a timer on the
event loop, and an arrival is applied at the engine time it happens. Engine time is wall time
divided by ``time_scale`` (2.0: everything takes twice as long on the wall clock, for a machine
that cannot keep up).

A streamed request also needs the tokens *within* a run: after every run end, and then at each
iteration boundary while streamed requests decode, the engine reads
:meth:`~sim.engine.Replica.iteration_clock` and tells each streamed :class:`Job` how many
tokens it has so far.
"""

from __future__ import annotations

import asyncio
import itertools
import math
from collections.abc import Callable

from placement.domain.fleet import ReplicaSpec
from placement.domain.requests import Request
from sim.costmodel.base import IterationCostModel
from sim.engine import FCFS, Replica

MIN_TICK_S = 0.002  # streamed tokens are read at most this often (engine seconds)


class Job:
    """One request inside the engine, as its HTTP handler waits on it."""

    __slots__ = (
        "arrival_s",
        "changed",
        "done",
        "error",
        "finish_s",
        "first_token_s",
        "req",
        "stream",
        "tokens",
    )

    def __init__(self, req: Request, *, stream: bool) -> None:
        self.req = req
        self.stream = stream
        self.tokens = 0  # output tokens produced so far (streamed jobs: updated as they come)
        self.first_token_s = -1.0  # engine time
        self.finish_s = -1.0
        self.arrival_s = req.arrival_s
        self.error = ""
        self.changed = asyncio.Event()  # set whenever tokens grow or the job ends
        self.done = False

    @property
    def cached_tokens(self) -> int:
        return self.req.cached_tokens


class RealtimeEngine:
    """A replica's engine on the running event loop (create it inside the loop)."""

    def __init__(
        self,
        index: int,
        spec: ReplicaSpec,
        cost: IterationCostModel,
        *,
        time_scale: float = 1.0,
        on_finished: Callable[[Job], None] | None = None,
        scheduling: str = FCFS,
    ) -> None:
        self.loop = asyncio.get_running_loop()
        self.time_scale = time_scale
        self.replica = Replica(index, spec, cost, self, scheduling=scheduling)
        self._t0 = self.loop.time()
        self._jobs: dict[int, Job] = {}
        self._streamed = 0  # streamed jobs in the engine
        self._ids = itertools.count(1)
        self._timer: asyncio.TimerHandle | None = None
        self._tick: asyncio.TimerHandle | None = None
        self._on_finished = on_finished
        # how late run-end timers fire (wall seconds): the emulator keeps up while this is small
        self._due = 0.0
        self.lag_count = 0
        self.lag_total_s = 0.0
        self.lag_max_s = 0.0

    # ---- time ----------------------------------------------------------------------------
    def now(self) -> float:
        """Engine seconds since start."""
        return (self.loop.time() - self._t0) / self.time_scale

    def _wall(self, engine_s: float) -> float:
        return self._t0 + engine_s * self.time_scale

    # ---- requests ------------------------------------------------------------------------
    def submit(
        self,
        *,
        input_tokens: int,
        output_tokens: int,
        block_hashes: tuple[int, ...],
        block_tokens: int,
        model: str,
        stream: bool,
        priority: int = 0,
    ) -> Job:
        now = self._catch_up()
        req = Request(
            next(self._ids),
            now,
            input_tokens,
            output_tokens,
            model=model,
            block_hashes=block_hashes,
            block_tokens=block_tokens,
        )
        req.priority = priority
        job = Job(req, stream=stream)
        self._jobs[req.id] = job
        if stream:
            self._streamed += 1
        if not self.replica.alive:
            self._end(job, now, "replica stopped")
            return job
        end = self.replica.enqueue(req, now)
        if end is not None:
            self._schedule(end)
        return job

    def abandon(self, job: Job) -> None:
        """The client went away: stop streaming to it (the engine still finishes the work,
        as vLLM does until it notices the disconnect)."""
        if job.stream and not job.done:
            job.stream = False
            self._streamed -= 1

    def stop(self) -> None:
        """The replica dies: every request it held fails; it refuses new ones until started."""
        now = self._catch_up()
        self._cancel()
        for req in self.replica.fail():
            job = self._jobs.get(req.id)
            if job is not None:
                self._end(job, now, "replica stopped")

    def start(self) -> None:
        self.replica.alive = True

    def set_slowdown(self, factor: float) -> None:
        """Iteration times × ``factor`` from the next run on."""
        self.replica.slowdown = factor

    # ---- the engine's listener (sim.engine.EngineListener) -------------------------------
    def on_first_token(self, req: Request, replica: int, now: float) -> None:
        job = self._jobs.get(req.id)
        if job is not None:
            job.first_token_s = now
            job.tokens = max(job.tokens, 1)
            job.changed.set()

    def on_complete(self, req: Request, replica: int, now: float) -> None:
        job = self._jobs.get(req.id)
        if job is not None:
            self._end(job, now, req.error)

    def _end(self, job: Job, now: float, error: str) -> None:
        del self._jobs[job.req.id]
        if job.stream:
            self._streamed -= 1
        job.finish_s = now
        job.error = error
        if not error:
            job.tokens = job.req.output_tokens
        job.done = True
        job.changed.set()
        if self._on_finished is not None:
            self._on_finished(job)

    # ---- runs on the loop ----------------------------------------------------------------
    def _catch_up(self) -> float:
        """Apply every run that has ended by now (a late timer) before anything new happens."""
        now = self.now()
        replica = self.replica
        while replica.busy and replica.run_end_s <= now:
            self._cancel()
            end = replica.step(replica.run_end_s)
            if end is not None:
                self._schedule(end)
        return now

    def _schedule(self, end_s: float) -> None:
        self._cancel()
        self._due = self._wall(end_s)
        self._timer = self.loop.call_at(self._due, self._run_ended)

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _run_ended(self) -> None:
        self._timer = None
        lag = max(0.0, self.loop.time() - self._due)
        self.lag_count += 1
        self.lag_total_s += lag
        self.lag_max_s = max(self.lag_max_s, lag)
        replica = self.replica
        if replica.busy:
            end = replica.step(replica.run_end_s)
            if end is not None:
                self._schedule(end)
        self._catch_up()
        if self._streamed:
            self._stream_tokens()

    def _stream_tokens(self) -> None:
        """Tell streamed decoders their tokens so far; come back at the next iteration end."""
        if self._tick is not None:
            self._tick.cancel()
            self._tick = None
        replica = self.replica
        now = self.now()
        done, next_end = replica.iteration_clock(now)
        g = replica.G + done
        jobs = self._jobs
        for seq in replica.decoders.values():
            job = jobs.get(seq.req.id)
            if job is not None and job.stream:
                tokens = seq.generated + g - seq.g_join
                if tokens > job.tokens:
                    job.tokens = tokens
                    job.changed.set()
        if self._streamed and math.isfinite(next_end) and next_end < replica.run_end_s:
            at = max(next_end, now + MIN_TICK_S)
            self._tick = self.loop.call_at(self._wall(at), self._stream_tokens)
