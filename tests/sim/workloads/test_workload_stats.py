"""workload_stats on a hand-made workload whose reuse can be counted by hand."""

from __future__ import annotations

import pytest

from placement.domain.prefix import chain_block_ids
from placement.domain.requests import Request, Tenant
from sim.workloads.base import Workload
from sim.workloads.stats import workload_stats


def test_prefix_reuse_counts_leading_seen_blocks_capped_at_the_input() -> None:
    a, b, c = chain_block_ids([1, 2, 3]), chain_block_ids([1, 5]), chain_block_ids([9])
    requests = [
        Request(0, 0.0, 8, 1, block_hashes=a[:2], block_tokens=4),  # new: 0 reused
        Request(1, 1.0, 11, 2, block_hashes=a, block_tokens=4),  # a[:2] seen: 8 reused
        Request(2, 2.0, 6, 3, block_hashes=b, block_tokens=4),  # block 1 seen: 4 reused
        Request(3, 4.0, 10, 4, block_hashes=a, block_tokens=4),  # all 3 seen, cap 10: 10
        Request(4, 4.0, 5, 0, block_hashes=c, block_tokens=4),  # new: 0
    ]
    workload = Workload(
        name="t", requests=requests, tenants={"default": Tenant(name="default")}, block_tokens=4
    )
    stats = workload_stats(workload)
    assert stats.requests == 5
    assert stats.duration_s == 4.0
    assert stats.rate_rps == pytest.approx(5 / 4)
    assert stats.mean_input_tokens == pytest.approx(40 / 5)
    assert stats.mean_output_tokens == pytest.approx(10 / 5)
    assert stats.prefix_reuse == pytest.approx((0 + 8 + 4 + 10 + 0) / 40)


def test_empty_workload() -> None:
    stats = workload_stats(Workload(name="e", requests=[], tenants={}))
    assert (stats.requests, stats.prefix_reuse, stats.rate_rps) == (0, 0.0, 0.0)
