"""One replica's engine: continuous batching with chunked prefill, paged KV, prefix cache.

The engine follows vLLM's scheduler in shape: every iteration the decoding sequences produce
one token each, and what is left of the token budget (``max_num_batched_tokens``) goes to
prefill chunks, first to sequences already prefilling, then to waiting ones in FCFS order while
KV memory and ``max_num_seqs`` allow. When memory runs out a decoding sequence is preempted
and recomputed later (vLLM's recompute preemption), newest first.

With ``priority`` scheduling (vLLM's ``--scheduling-policy priority``) the waiting queue is kept
in the order of each request's ``priority`` (lower first; set by the router), then its arrival,
and the decoder preempted when memory runs out is the one of the worst priority, latest arrival
(vLLM's V1 scheduler; a preempted request waits again in that order). What is already running
keeps running: a request of better priority passes only those still waiting.

For speed the engine does not step token by token. A *run* is either one mixed iteration
(there are prefill tokens to schedule) or ``k`` decode-only iterations during which the batch
does not change; the run's length is known in closed form because the decode cost is affine
in the summed context, which grows by ``n`` tokens per iteration. A run ends early when a
request arrives (at the next iteration boundary), so the simulator only sees batch changes.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, bisect_right
from collections import deque
from operator import itemgetter
from typing import Protocol

from placement.domain.fleet import ReplicaSpec
from placement.domain.requests import Request
from placement.errors import InputError
from sim.costmodel.base import IterationCostModel
from sim.lora import AdapterSlots
from sim.prefix_cache import PrefixCache
from sim.sequence import DECODING, FINISHED, PREFILLING, WAITING, Sequence


class EngineListener(Protocol):
    """Who hears about first tokens and completions (the simulator's router side)."""

    def on_first_token(self, req: Request, replica: int, now: float) -> None: ...

    def on_complete(self, req: Request, replica: int, now: float) -> None: ...


_MIXED = 1
ADAPTER_SCAN = 256
_DECODE = 2
_plan_end = itemgetter(0)
FCFS = "fcfs"
PRIORITY = "priority"
SCHEDULING_POLICIES = (FCFS, PRIORITY)


def _wait_order(seq: Sequence) -> tuple[int, float]:
    """Where a sequence waits under ``priority`` scheduling: its priority, then its arrival."""
    req = seq.req
    return (req.priority, req.arrival_s)


class Replica:
    """A continuous-batching engine advanced from one batch change to the next."""

    def __init__(
        self,
        index: int,
        spec: ReplicaSpec,
        cost: IterationCostModel,
        listener: EngineListener,
        *,
        scheduling: str = FCFS,
    ) -> None:
        if scheduling not in SCHEDULING_POLICIES:
            raise InputError(
                f"{scheduling!r}", field="scheduling", expected=" or ".join(SCHEDULING_POLICIES)
            )
        self.index = index
        # waiting requests served by (priority, arrival) rather than in the order they came
        self.by_priority = scheduling == PRIORITY
        self.spec = spec
        self.cost = cost
        self.listener = listener
        self.max_batched_tokens = spec.max_num_batched_tokens
        self.max_num_seqs = spec.max_num_seqs
        self.cache = PrefixCache(spec.kv_capacity_tokens)
        self.alive = True
        # changing base model (sim.model_swap): admits nothing new until it serves again
        self.draining = False
        self.slowdown = 1.0
        # LoRA adapter slots (None: the replica serves its base model only, every request
        # alike); a load stalls the next iteration by its seconds
        self.lora: AdapterSlots | None = None
        self._stall_s = 0.0
        self.now = 0.0  # the time of the last run boundary (stamps adapter loads)
        self.waiting: deque[Sequence] = deque()
        self.prefilling: list[Sequence] = []
        self.decoders: dict[int, Sequence] = {}  # insertion order = join order
        self._finish_heap: list[tuple[int, int, Sequence]] = []
        self.G = 0  # iterations run so far
        self._ctx_base = 0  # Σ (ctx_join - g_join) over decoders; Σ context = base + n·G
        self._uid = 0
        # the run in progress
        self.busy = False
        self.run_kind = 0
        self.run_start_s = 0.0
        self.run_end_s = 0.0
        self.run_k = 0
        self._run_a = 0.0  # per-iteration fixed time of a decode run
        self._run_b = 0.0  # time per context token
        self._run_s0 = 0  # summed context at the run's first iteration
        self._run_chunks: list[tuple[Sequence, int]] = []  # (sequence, prompt tokens this run)
        self._run_plan: list[tuple[float, int]] = []  # a long prefill: (iteration end, chunk)
        # accounting
        self.busy_s = 0.0
        self.iterations = 0
        self.preemptions = 0
        self.prompt_tokens = 0
        self.generated_tokens = 0  # every output token produced (vllm:generation_tokens_total)
        self.cached_tokens = 0

    # ---- what a scrape of /metrics sees -------------------------------------------------
    @property
    def num_running(self) -> int:
        return len(self.decoders) + len(self.prefilling)

    @property
    def num_waiting(self) -> int:
        return len(self.waiting)

    @property
    def kv_usage(self) -> float:
        return self.cache.usage

    @property
    def prefix_hit_rate(self) -> float:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    def waiting_adapters(self) -> tuple[str, ...]:
        """Adapters of waiting requests not running yet (vLLM's ``waiting_lora_adapters``)."""
        if self.lora is None:
            return ()
        running = set(self.lora.active())
        names = (s.req.adapter for s in self.waiting)
        return tuple(dict.fromkeys(a for a in names if a and a not in running))

    # ---- entry points for the simulator --------------------------------------------------
    def enqueue(self, req: Request, now: float) -> float | None:
        """A request arrives; returns the new end time of the run if it changed."""
        if req.input_tokens + req.output_tokens > self.cache.capacity:
            req.error = "too long for this replica's KV cache"
            req.finish_s = now
            self.listener.on_complete(req, self.index, now)
            return None
        self._uid += 1
        if self.by_priority:
            self._wait(Sequence(req, self._uid))
        else:
            self.waiting.append(Sequence(req, self._uid))
        if not self.busy:
            return self._start_run(now)
        if self.run_k > 1 and len(self.decoders) + len(self.prefilling) < self.max_num_seqs:
            if self.run_kind == _DECODE:
                return self._truncate_run(now)
            return self._truncate_long_prefill(now)
        return None

    def step(self, now: float) -> float | None:
        """The run in progress ends at ``now``: apply it, start the next; returns its end."""
        self._finish_run(now)
        return self._start_run(now)

    def fail(self) -> list[Request]:
        """The replica dies: everything it held is lost; returns the requests in flight."""
        lost = [s.req for s in self.waiting]
        lost += [s.req for s in self.prefilling]
        lost += [s.req for s in self.decoders.values()]
        self.alive = False
        self.busy = False
        self.waiting.clear()
        self.prefilling.clear()
        self.decoders.clear()
        self._finish_heap.clear()
        self._ctx_base = 0
        self.cache.clear()
        if self.lora is not None:
            self.lora.clear(self.now)
        return lost

    # ---- a base-model swap (driven by sim.model_swap) ------------------------------------
    @property
    def idle(self) -> bool:
        """Nothing waits or runs."""
        return not (self.busy or self.waiting or self.prefilling or self.decoders)

    def drain(self) -> list[Request]:
        """Stop taking requests: returns the waiting ones never started (to route elsewhere);
        running and preempted ones stay and finish."""
        self.draining = True
        kept: deque[Sequence] = deque()
        out: list[Request] = []
        for seq in self.waiting:
            if seq.generated:
                kept.append(seq)
                continue
            if seq.pinned:
                seq.pinned = False
                assert self.lora is not None
                self.lora.release(seq.req.adapter)
            out.append(seq.req)
        self.waiting = kept
        return out

    def evacuate(self) -> list[Request]:
        """The drain's time is up: everything still held is dropped (returns its requests)."""
        lost = self.fail()
        self.alive = True
        return lost

    def reload(
        self, spec: ReplicaSpec, cost: IterationCostModel, lora: AdapterSlots | None
    ) -> None:
        """Serve ``spec``'s model from now on: empty KV cache, ``lora``'s slots (empty)."""
        assert self.idle
        self.spec = spec
        self.cost = cost
        self.max_batched_tokens = spec.max_num_batched_tokens
        self.max_num_seqs = spec.max_num_seqs
        self.cache = PrefixCache(spec.kv_capacity_tokens)
        if self.lora is not None:
            self.lora.clear(self.now)
        self.lora = lora
        self._stall_s = 0.0
        self.draining = False

    # ---- runs ----------------------------------------------------------------------------
    def _start_run(self, now: float) -> float | None:
        if not self.alive:
            return None
        self.now = now
        if self.waiting:
            if self.lora is not None:
                self._admit_with_adapters()
            else:
                self._admit()
        if self.prefilling:
            return self._start_mixed(now)
        if self.decoders:
            return self._start_decode(now)
        self.busy = False
        return None

    def _admit(self) -> None:
        """Move waiting sequences into prefill while memory and max_num_seqs allow (FCFS)."""
        while self.waiting and len(self.prefilling) + len(self.decoders) < self.max_num_seqs:
            if not self._admit_head():
                break

    def _admit_head(self) -> bool:
        """Admit the head of the waiting queue if KV memory has room for it."""
        cache = self.cache
        n_dec = len(self.decoders)
        seq = self.waiting[0]
        matched = cache.match(seq.cacheable)
        cached = matched * seq.req.block_tokens
        if cached >= seq.prompt_len:  # the last token is always recomputed
            matched -= 1
            cached = matched * seq.req.block_tokens
        held = seq.cacheable[:matched]
        cache.acquire(held, seq.req.block_tokens)
        need = seq.prompt_len - cached + n_dec + 1  # + one token of growth per decoder
        if not cache.make_room(need):
            cache.release(held)
            return False
        self.waiting.popleft()
        seq.held = held
        seq.computed = cached
        seq.private_tokens = seq.prompt_len - cached
        cache.used += seq.private_tokens
        seq.state = PREFILLING
        if seq.generated == 0:  # first admission, not a recompute
            seq.req.cached_tokens = cached
            self.prompt_tokens += seq.req.input_tokens
            self.cached_tokens += cached
        self.prefilling.append(seq)
        return True

    def _admit_with_adapters(self) -> None:
        """:meth:`_admit` where a request whose adapter gets no slot stays waiting, in order,
        and the others go past it (vLLM's scheduler); each adapter loaded stalls the engine.
        At most :data:`ADAPTER_SCAN` requests are passed over per admission (bounds the work
        per iteration when a long queue waits for slots)."""
        lora = self.lora
        assert lora is not None
        kept: list[Sequence] = []
        while self.waiting and len(self.prefilling) + len(self.decoders) < self.max_num_seqs:
            if len(kept) >= ADAPTER_SCAN:
                break
            seq = self.waiting[0]
            adapter = seq.req.adapter
            if adapter and not seq.pinned:
                load = lora.acquire(adapter, self.now)
                if load is None:
                    if seq.slot_denied_s < 0:
                        seq.slot_denied_s = self.now
                    kept.append(self.waiting.popleft())
                    continue
                if seq.slot_denied_s >= 0:
                    seq.req.slot_wait_s += self.now - seq.slot_denied_s
                    seq.slot_denied_s = -1.0
                seq.pinned = True
                self._stall_s += load
            if not self._admit_head():  # no KV room: stop, as vLLM does
                break
        self.waiting.extendleft(reversed(kept))

    def _start_mixed(self, now: float) -> float:
        n_dec = len(self.decoders)
        if n_dec and not self.cache.make_room(n_dec):
            self._preempt_until_fits()
            n_dec = len(self.decoders)
        budget = self.max_batched_tokens - n_dec
        chunks: list[tuple[Sequence, int]] = []
        for seq in self.prefilling:
            if budget <= 0:
                break
            c = min(seq.prompt_len - seq.computed, budget)
            chunks.append((seq, c))
            budget -= c
        cost_chunks = [(c, s.computed) for s, c in chunks]
        context = self._ctx_base + n_dec * self.G
        dt = self.cost.iteration_s(cost_chunks, n_dec, context) * self.slowdown + self._stall_s
        self._stall_s = 0.0
        self._run_chunks = chunks
        self._run_plan = []
        if budget == 0 and len(self.prefilling) == 1 and not self.waiting:
            seq, c = chunks[0]
            if seq.computed + c < seq.prompt_len:
                return self._start_long_prefill(now, seq, c, dt, n_dec, context)
        return self._begin(_MIXED, now, dt, 1)

    def _start_long_prefill(
        self, now: float, seq: Sequence, first: int, dt: float, n_dec: int, context: int
    ) -> float:
        """One prompt fills the token budget for several iterations: plan them all at once.

        Nothing visible happens until the last chunk (its first token) unless a decoder
        finishes or memory runs short first, so those bound the run; an arrival cuts it at the
        next iteration boundary (nothing waits, so no admission is skipped meanwhile).
        """
        k_max = self._next_finish() - self.G if n_dec else 1 << 30
        if n_dec:
            k_max = min(k_max, self.cache.free_for_new() // n_dec)
        full = self.max_batched_tokens - n_dec
        cost, slow = self.cost, self.slowdown
        end = now + dt
        plan = [(end, first)]
        computed = seq.computed + first
        while computed < seq.prompt_len and len(plan) < k_max:
            c = min(seq.prompt_len - computed, full)
            ctx = context + n_dec * len(plan)
            end += cost.iteration_s([(c, computed)], n_dec, ctx) * slow
            plan.append((end, c))
            computed += c
        self._run_plan = plan
        self._run_chunks = [(seq, computed - seq.computed)]
        self._begin(_MIXED, now, 0.0, len(plan))
        self.run_end_s = end
        return end

    def _truncate_long_prefill(self, now: float) -> float | None:
        """End a planned multi-iteration prefill at the iteration boundary at or after ``now``."""
        plan = self._run_plan
        k = bisect_left(plan, now, key=_plan_end) + 1
        if k >= self.run_k:
            return None
        self.run_k = k
        self.run_end_s = plan[k - 1][0]
        seq = self._run_chunks[0][0]
        self._run_chunks = [(seq, sum(c for _, c in plan[:k]))]
        return self.run_end_s

    def _start_decode(self, now: float) -> float | None:
        n = len(self.decoders)
        free = self.cache.free_for_new()
        if free < n:
            self._preempt_until_fits()
            return self._start_run(now)
        k_done = self._next_finish() - self.G
        k = max(1, min(k_done, free // n))
        cost = self.cost
        d0, d1 = cost.decode_attention_coeffs(n)
        slow = self.slowdown
        a = (cost.overhead_s + cost.linear_s(n) + d0) * slow
        b = d1 * slow
        s0 = self._ctx_base + n * self.G
        self._run_a, self._run_b, self._run_s0 = a, b, s0
        self.busy = True
        self.run_kind = _DECODE
        self.run_start_s = now
        self.run_k = k
        self.run_end_s = now + k * (a + b * s0) + b * n * k * (k - 1) / 2
        return self.run_end_s

    def _begin(self, kind: int, now: float, dt: float, k: int) -> float:
        self.busy = True
        self.run_kind = kind
        self.run_start_s = now
        self.run_k = k
        self.run_end_s = now + dt
        return self.run_end_s

    def _decode_time(self, k: int) -> float:
        """Time of the first ``k`` iterations of the current decode run."""
        n = len(self.decoders)
        return k * (self._run_a + self._run_b * self._run_s0) + self._run_b * n * k * (k - 1) / 2

    def _decode_iterations_by(self, elapsed: float) -> int:
        """Iterations of the current decode run finished ``elapsed`` seconds after its start."""
        n = len(self.decoders)
        # solve k·(a + b·s0) + b·n·k(k-1)/2 = elapsed for k
        qa = self._run_b * n / 2
        qb = self._run_a + self._run_b * self._run_s0 - qa
        if qa > 0:
            k_real = (-qb + math.sqrt(qb * qb + 4 * qa * elapsed)) / (2 * qa)
        else:
            k_real = elapsed / qb
        j = int(k_real)
        while j > 0 and self._decode_time(j) > elapsed:
            j -= 1
        while self._decode_time(j + 1) <= elapsed:
            j += 1
        return j

    def iteration_clock(self, now: float) -> tuple[int, float]:
        """The run in progress as a real-time engine streams it: how many of its iterations
        have finished by ``now`` (each gave every decoder one token) and when the next one
        finishes; ``(0, inf)`` when idle. Reads only; :meth:`step` still applies the run."""
        if not self.busy:
            return 0, math.inf
        k = self.run_k
        if self.run_kind == _DECODE:
            j = min(k, self._decode_iterations_by(now - self.run_start_s))
            if j + 1 >= k:
                return j, self.run_end_s
            return j, self.run_start_s + self._decode_time(j + 1)
        plan = self._run_plan
        if not plan:
            return 0, self.run_end_s
        j = min(k, bisect_right(plan, now, key=_plan_end))
        return j, plan[j][0] if j < k else self.run_end_s

    def _truncate_run(self, now: float) -> float | None:
        """End the decode run at the iteration boundary at or after ``now``."""
        j = self._decode_iterations_by(now - self.run_start_s)
        k = j + 1  # the iteration in progress finishes
        if k >= self.run_k:
            return None
        self.run_k = k
        self.run_end_s = self.run_start_s + self._decode_time(k)
        return self.run_end_s

    def _finish_run(self, now: float) -> None:
        self.busy_s += now - self.run_start_s
        k = self.run_k
        self.iterations += k
        n = len(self.decoders)
        self.G += k
        self.cache.used += n * k
        self.generated_tokens += n * k
        if self.run_kind == _MIXED:
            self._finish_prefill_chunks(now)
        heap = self._finish_heap
        if heap and heap[0][0] <= self.G:
            self._complete_decoders(now)

    def _finish_prefill_chunks(self, now: float) -> None:
        done: list[Sequence] = []
        for seq, c in self._run_chunks:
            seq.computed += c
            if seq.computed >= seq.prompt_len:
                done.append(seq)
        self._run_chunks = []
        if not done:
            return
        self.prefilling = [
            s for s in self.prefilling if s.state == PREFILLING and s.computed < s.prompt_len
        ]
        for seq in done:
            self._promote_blocks(seq)
            seq.generated += 1
            self.generated_tokens += 1
            self.cache.used += 1
            seq.private_tokens += 1
            req = seq.req
            if seq.generated == 1:
                req.first_token_s = now
                self.listener.on_first_token(req, self.index, now)
            if seq.generated >= req.output_tokens:
                self._release(seq)
                self._finish(seq, now)
                continue
            seq.state = DECODING
            seq.g_join = self.G
            seq.ctx_join = seq.prompt_len + 1
            seq.private_join = seq.private_tokens
            seq.g_finish = self.G + req.output_tokens - seq.generated
            self._ctx_base += seq.ctx_join - seq.g_join
            self.decoders[seq.uid] = seq
            heapq.heappush(self._finish_heap, (seq.g_finish, seq.uid, seq))

    def _promote_blocks(self, seq: Sequence) -> None:
        """Prefilled full prompt blocks join the prefix cache (shared from now on)."""
        new = seq.cacheable[len(seq.held) :]
        if not new:
            return
        bt = seq.req.block_tokens
        # acquire charges only blocks not cached yet (another sequence may have cached the same
        # prefix meanwhile); the tokens stop being private either way
        self.cache.acquire(new, bt)
        moved = len(new) * bt
        self.cache.used -= moved
        seq.private_tokens -= moved
        seq.held = seq.cacheable

    def _complete_decoders(self, now: float) -> None:
        heap = self._finish_heap
        g = self.G
        while heap and heap[0][0] <= g:
            _, _, seq = heapq.heappop(heap)
            if seq.state != DECODING or seq.g_finish > g:
                continue  # stale entry of a preempted sequence
            seq.generated += g - seq.g_join
            self._drop_decoder(seq)
            self._finish(seq, now)

    def _next_finish(self) -> int:
        heap = self._finish_heap
        while heap and (heap[0][2].state != DECODING or heap[0][2].g_finish != heap[0][0]):
            heapq.heappop(heap)
        return heap[0][0]

    def _drop_decoder(self, seq: Sequence) -> None:
        del self.decoders[seq.uid]
        self._ctx_base -= seq.ctx_join - seq.g_join
        seq.private_tokens = seq.private_join + (self.G - seq.g_join)
        self._release(seq)

    def _release(self, seq: Sequence) -> None:
        if seq.pinned:
            seq.pinned = False
            assert self.lora is not None
            self.lora.release(seq.req.adapter)
        self.cache.used -= seq.private_tokens
        seq.private_tokens = 0
        self.cache.release(seq.held)
        seq.held = ()

    def _finish(self, seq: Sequence, now: float) -> None:
        seq.state = FINISHED
        seq.req.finish_s = now
        self.listener.on_complete(seq.req, self.index, now)

    def _wait(self, seq: Sequence) -> None:
        """Queue ``seq`` in (priority, arrival) order, after those of the same key (priority
        scheduling); a new arrival of the worst priority is found from the back at once."""
        waiting = self.waiting
        key = _wait_order(seq)
        if not waiting or _wait_order(waiting[-1]) <= key:
            waiting.append(seq)
            return
        waiting.insert(bisect_right(waiting, key, key=_wait_order), seq)

    def _victim(self) -> Sequence:
        """The decoder to preempt: the newest (FCFS), or the worst priority's latest arrival."""
        if not self.by_priority:
            return self.decoders[next(reversed(self.decoders))]
        return max(self.decoders.values(), key=_wait_order)

    def _preempt_until_fits(self) -> None:
        """Recompute-preempt decoders (:meth:`_victim`) until every decoder can grow one
        token."""
        while self.decoders and self.cache.free_for_new() < len(self.decoders):
            seq = self._victim()
            seq.generated += self.G - seq.g_join
            self._drop_decoder(seq)
            seq.state = WAITING
            seq.prompt_len = seq.req.input_tokens + seq.generated
            seq.computed = 0
            seq.req.preemptions += 1
            self.preemptions += 1
            if self.by_priority:
                self._wait(seq)
            else:
                self.waiting.appendleft(seq)
