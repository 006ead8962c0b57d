"""A request as a replica's engine holds it: prompt progress, KV held, decode bookkeeping."""

from __future__ import annotations

from placement.domain.requests import Request

WAITING = 0
PREFILLING = 1
DECODING = 2
FINISHED = 3


class Sequence:
    """Engine-side state of one request on one replica.

    A decoding sequence's context grows by one token per iteration; rather than touching every
    sequence each iteration, the replica keeps an iteration counter ``G`` and each sequence
    remembers the ``g_join`` at which it started decoding, so its context is
    ``ctx_join + (G - g_join)`` and it finishes when ``G`` reaches ``g_finish``.
    """

    __slots__ = (
        "cacheable",
        "computed",
        "ctx_join",
        "g_finish",
        "g_join",
        "generated",
        "held",
        "pinned",
        "private_join",
        "private_tokens",
        "prompt_len",
        "req",
        "slot_denied_s",
        "state",
        "uid",
    )

    def __init__(self, req: Request, uid: int) -> None:
        self.req = req
        self.uid = uid
        self.state = WAITING
        # full prompt blocks: the only blocks that can be shared through the prefix cache
        full = req.input_tokens // req.block_tokens if req.block_tokens > 0 else 0
        self.cacheable = req.block_hashes[:full]
        self.prompt_len = req.input_tokens  # grows by the generated tokens after a preemption
        self.computed = 0  # prompt tokens whose KV exists (cached or prefilled)
        self.generated = 0
        self.pinned = False  # holds a LoRA slot for its adapter (while admitted)
        self.slot_denied_s = -1.0  # when the engine first passed it over for want of a slot
        self.held: tuple[int, ...] = ()  # block hashes this sequence references in the cache
        self.private_tokens = 0  # KV tokens charged to this sequence alone (while prefilling)
        self.private_join = 0
        self.ctx_join = 0
        self.g_join = 0
        self.g_finish = 0
