"""An embedding (pooling) model's engine in real time: one forward pass at a time.

The server this stands for runs each request's inputs as one batch through the model and
takes requests one after another (a sentence-transformers or ONNX server with one model
instance, Triton without its dynamic batcher): it does *not* merge requests on its own. A pass
over ``n`` inputs of ``t_i`` tokens costs what the engine cost model gives for one iteration
that prefills them all, ``overhead_s + linear_s(Σ t_i) + Σ prefill_attention_s(t_i, 0)``: a
fixed cost per pass (the framework's launch and host work, the weights read once) plus a cost
per input. So a request of 32 inputs costs far less than 32 requests of one — what batching
in front of such a server buys. A request of more than ``max_num_seqs`` inputs is run in
several passes. Times are engine seconds, stretched by the emulator's time scale and a
replica's slowdown.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field

from sim.costmodel.base import IterationCostModel


@dataclass(slots=True, eq=False)
class PoolJob:
    """One request: its inputs' token counts; ``done`` is set when all its passes ran."""

    tokens: tuple[int, ...]
    arrival_s: float  # engine time
    finish_s: float = -1.0
    error: str = ""
    done: asyncio.Event = field(default_factory=asyncio.Event)


class PoolingEngine:
    """A FIFO of requests and one forward pass at a time (create it on the running loop)."""

    def __init__(
        self,
        cost: IterationCostModel,
        *,
        max_num_seqs: int,
        time_scale: float = 1.0,
    ) -> None:
        self.cost = cost
        self.max_num_seqs = max(1, max_num_seqs)
        self.time_scale = time_scale
        self.slowdown = 1.0
        self._queue: deque[PoolJob] = deque()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._origin = time.monotonic()
        self.running: PoolJob | None = None
        # the counters a vLLM /metrics page shows
        self.prompt_tokens = 0
        self.passes = 0
        self.busy_s = 0.0  # engine seconds spent in passes
        self.start()

    # the counters VllmMetrics reads (a pooling model has no decode and no KV cache to speak of)
    @property
    def replica(self) -> PoolingEngine:
        return self

    @property
    def num_running(self) -> int:
        return 0 if self.running is None else 1

    @property
    def num_waiting(self) -> int:
        return len(self._queue)

    kv_usage = 0.0
    generated_tokens = 0
    cached_tokens = 0
    preemptions = 0
    lag_count = 0
    lag_total_s = 0.0
    lag_max_s = 0.0

    def now(self) -> float:
        return (time.monotonic() - self._origin) / self.time_scale

    def pass_s(self, tokens: tuple[int, ...]) -> float:
        """Engine seconds of one forward pass over inputs of these token counts."""
        return self.cost.iteration_s([(t, 0) for t in tokens], 0, 0) * self.slowdown

    def request_s(self, tokens: tuple[int, ...]) -> float:
        """Engine seconds of a request: its passes of at most ``max_num_seqs`` inputs."""
        step = self.max_num_seqs
        return sum(self.pass_s(tokens[i : i + step]) for i in range(0, len(tokens), step))

    async def embed(self, tokens: tuple[int, ...]) -> PoolJob:
        """Queue a request and wait until its passes ran (or the engine stopped)."""
        job = PoolJob(tokens, self.now())
        self._queue.append(job)
        self._wake.set()
        await job.done.wait()
        return job

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    def stop(self) -> None:
        """Stop: what is queued or running fails (the connection is cut by the caller)."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
        for job in [*([self.running] if self.running else []), *self._queue]:
            job.error = "the replica stopped"
            job.done.set()
        self._queue.clear()
        self.running = None

    async def _run(self) -> None:
        while True:
            while not self._queue:
                self._wake.clear()
                await self._wake.wait()
            job = self._queue.popleft()
            self.running = job
            seconds = self.request_s(job.tokens)
            await asyncio.sleep(seconds * self.time_scale)
            self.running = None
            self.passes += -(-len(job.tokens) // self.max_num_seqs)
            self.busy_s += seconds
            self.prompt_tokens += sum(job.tokens)
            job.finish_s = self.now()
            job.done.set()
