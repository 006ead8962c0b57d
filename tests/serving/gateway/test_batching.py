"""The batcher: an idle backend gets a request at once; while a batch is out, requests gather
and go together when it returns, when they fill ``max_items``, or when the most urgent one's
wait budget is spent; a failed send fails every member."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from placement.errors import InputError
from serving.gateway.batching import Batcher, BatchPolicy


class FakeBackend:
    """Records each batch; a batch returns when the test releases it."""

    def __init__(self, fail: bool = False) -> None:
        self.batches: list[list[str]] = []
        self.release = asyncio.Event()
        self.fail = fail

    async def send(self, key: str, payloads: Sequence[str]) -> list[str]:
        self.batches.append(list(payloads))
        await self.release.wait()
        if self.fail:
            raise ConnectionError("backend gone")
        return [f"{key}:{p}" for p in payloads]


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def _run(policy: BatchPolicy, scenario):
    async def main():
        backend = FakeBackend()
        batcher: Batcher[str, str, str] = Batcher(policy, backend.send)
        try:
            return await scenario(batcher, backend)
        finally:
            backend.release.set()
            await batcher.close()

    return asyncio.run(main())


def test_an_idle_backend_gets_a_request_at_once_then_the_rest_gathers() -> None:
    async def scenario(batcher, backend):
        first = asyncio.create_task(batcher.submit("r", "a", size=1, wait_s=10))
        await _settle()
        assert backend.batches == [["a"]]  # no wait: the backend was idle
        later = [asyncio.create_task(batcher.submit("r", p, size=1, wait_s=10)) for p in "bcd"]
        await _settle()
        assert backend.batches == [["a"]] and batcher.waiting("r") == 3
        backend.release.set()  # the first batch returns: what gathered goes as one
        results = await asyncio.gather(first, *later)
        assert results == ["r:a", "r:b", "r:c", "r:d"]
        assert backend.batches == [["a"], ["b", "c", "d"]]

    _run(BatchPolicy(max_items=64, max_wait_s=10, wait_share=1), scenario)


def test_keys_are_batched_apart() -> None:
    async def scenario(batcher, backend):
        tasks = [asyncio.create_task(batcher.submit(k, p, size=1, wait_s=10)) for k, p in
                 (("x", "1"), ("y", "2"), ("x", "3"), ("y", "4"))]  # fmt: skip
        await _settle()
        backend.release.set()
        assert await asyncio.gather(*tasks) == ["x:1", "y:2", "x:3", "y:4"]
        assert sorted(backend.batches) == [["1"], ["2"], ["3"], ["4"]]

    _run(BatchPolicy(max_items=64, max_wait_s=10, wait_share=1), scenario)


def test_a_full_group_goes_even_while_a_batch_is_out() -> None:
    async def scenario(batcher, backend):
        tasks = [asyncio.create_task(batcher.submit("r", p, size=2, wait_s=10)) for p in "abcd"]
        await _settle()
        # a alone (idle), then b+c fill 4 items and go; d waits (would exceed 4 with b, c)
        assert backend.batches == [["a"], ["b", "c"]]
        assert batcher.waiting("r") == 1
        backend.release.set()
        await asyncio.gather(*tasks)
        assert backend.batches[-1] == ["d"]

    _run(BatchPolicy(max_items=4, max_wait_s=10, wait_share=1), scenario)


def test_the_wait_budget_sends_a_group_while_the_backend_is_busy() -> None:
    async def scenario(batcher, backend):
        first = asyncio.create_task(batcher.submit("r", "a", size=1, wait_s=10))
        await _settle()
        loop = asyncio.get_running_loop()
        started = loop.time()
        task = asyncio.create_task(batcher.submit("r", "b", size=1, wait_s=0.05))
        await asyncio.sleep(0.02)
        assert backend.batches == [["a"]]  # within its budget it waits for company
        while len(backend.batches) < 2:
            await asyncio.sleep(0.005)
        assert loop.time() - started >= 0.05  # and goes once the budget is spent
        assert backend.batches == [["a"], ["b"]]
        backend.release.set()
        await asyncio.gather(first, task)

    _run(BatchPolicy(max_items=64, max_wait_s=10, wait_share=1), scenario)


def test_a_failed_batch_fails_each_member() -> None:
    async def main() -> None:
        backend = FakeBackend(fail=True)
        batcher: Batcher[str, str, str] = Batcher(BatchPolicy(), backend.send)
        tasks = [asyncio.create_task(batcher.submit("r", p, size=1, wait_s=1)) for p in "ab"]
        await _settle()
        backend.release.set()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        assert all(isinstance(r, ConnectionError) for r in results)
        assert batcher.in_flight("r") == 0
        await batcher.close()

    asyncio.run(main())


def test_wait_budget_is_a_share_of_the_slo_up_to_a_cap() -> None:
    policy = BatchPolicy(wait_share=0.1, max_wait_s=0.05)
    assert policy.wait_budget(0.2) == pytest.approx(0.02)
    assert policy.wait_budget(30.0) == pytest.approx(0.05)
    assert not BatchPolicy(max_items=0).enabled


@pytest.mark.parametrize(
    ("field", "value"),
    [("max_items", -1), ("wait_share", 1.5), ("max_wait_s", -0.1), ("in_flight", 0)],
)
def test_bad_policies_name_their_field(field: str, value: float) -> None:
    with pytest.raises(InputError) as err:
        BatchPolicy(**{field: value})
    assert err.value.field == field
