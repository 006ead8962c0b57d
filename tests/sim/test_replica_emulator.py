"""The replica emulator serves vLLM /metrics over real HTTP that the service's scraper reads."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from placement.domain.fleet import load_fleet
from placement.paths import repo_root
from serving.scrape import scrape
from sim.emulator import ReplicaEmulator


@pytest.fixture
def emulator() -> Iterator[ReplicaEmulator]:
    fleet = load_fleet(repo_root() / "data" / "fleets" / "hetero.yaml")
    emu = ReplicaEmulator(fleet.replicas).start()
    yield emu
    emu.stop()


def test_the_scraper_reads_each_replicas_gauges(emulator: ReplicaEmulator) -> None:
    emulator.set_load("h100-1", running=7, waiting=2, kv=0.25)
    row = scrape(
        emulator.address("h100-1") + "/metrics",
        replica="h100-1",
        accelerator="H100-SXM",
        model="llama-3-8b",
        tp=1,
    )
    assert row["num_requests_running"] == 7
    assert row["num_requests_waiting"] == 2
    assert row["kv_cache_usage_perc"] == 0.25
    idle = scrape(
        emulator.address("h100-0") + "/metrics",
        replica="h100-0",
        accelerator="H100-SXM",
        model="llama-3-8b",
        tp=1,
    )
    assert idle["num_requests_running"] == 0


def test_an_unknown_replica_is_404(emulator: ReplicaEmulator) -> None:
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(emulator.address("nope") + "/metrics", timeout=5)
    assert err.value.code == 404
    err.value.close()
