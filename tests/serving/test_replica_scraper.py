"""The scraper against emulated replicas over real HTTP: pages read in full only when they
changed (a 304 otherwise), and a stopped replica found unhealthy after ``lost_after`` scrapes
whatever the last page's entity tag."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from placement.domain.fleet import Fleet, fleet_from_dict
from serving.replica_scraper import ReplicaScraper
from serving.route import PlacementRoutePath, ReplicaState
from serving.service import PlacementService
from serving.telemetry_sink import TelemetrySink
from sim.emulator import EmulatorOptions, EmulatorThread
from training.telemetry.store import read_samples

MODEL = "llama-3-8b"
IDS = ("h100-0", "h100-1")


def _fleet() -> Fleet:
    return fleet_from_dict(
        {
            "name": "two",
            "replicas": [{"kind": "h100", "accelerator": "H100-SXM", "count": 2, "model": MODEL}],
        }
    )


@pytest.fixture
def emulator() -> Iterator[EmulatorThread]:
    with EmulatorThread(_fleet(), EmulatorOptions(base_port=0)) as emu:
        yield emu


def _service(emulator: EmulatorThread) -> PlacementService:
    service = PlacementService(route_path_factory=lambda r: PlacementRoutePath(list(r.values())))
    for replica, address in emulator.addresses().items():
        service.register_replica(
            ReplicaState(
                id=replica,
                address=address,
                model=MODEL,
                accelerator="H100-SXM",
                tp=1,
                kv_capacity_tokens=400_000,
            )
        )
    return service


def _complete(emulator: EmulatorThread, replica: str) -> None:
    with httpx.Client(base_url=emulator.addresses()[replica], timeout=20) as c:
        r = c.post("/v1/completions", json={"model": MODEL, "prompt": "Hi", "max_tokens": 3})
        assert r.status_code == 200, r.text


def test_a_page_is_read_in_full_only_when_it_changed(emulator: EmulatorThread) -> None:
    service = _service(emulator)
    scraper = ReplicaScraper(service, interval_s=0.5)

    async def scenario() -> None:
        try:
            await scraper.scrape_all()
            assert (scraper.pages_read, scraper.pages_unchanged) == (2, 0)
            first = {r: service.replicas[r].scraped_at for r in IDS}
            assert all(t > 0 for t in first.values())

            service.replicas["h100-0"].first_tokens = 3  # first tokens the route path saw
            await scraper.scrape_all()  # nothing changed: two 304s, both stamped fresh again
            assert (scraper.pages_read, scraper.pages_unchanged) == (2, 2)
            assert all(service.replicas[r].scraped_at > first[r] for r in IDS)
            # the gauges hold as of this scrape: earlier first tokens are in its waiting count
            assert service.replicas["h100-0"].first_tokens_at_scrape == 3

            await asyncio.to_thread(_complete, emulator, "h100-1")
            await scraper.scrape_all()  # h100-1 served a request: its page is read again
            assert (scraper.pages_read, scraper.pages_unchanged) == (3, 3)
            assert service.registrations["h100-1"].metrics_etag != (
                service.registrations["h100-0"].metrics_etag
            )
        finally:
            await scraper.session.close()

    asyncio.run(scenario())


def test_a_stopped_replica_is_unhealthy_after_lost_after_scrapes_and_back_after_one(
    emulator: EmulatorThread,
) -> None:
    service = _service(emulator)
    scraper = ReplicaScraper(service, interval_s=0.5, lost_after=2)

    async def scenario() -> None:
        try:
            await scraper.scrape_all()
            await scraper.scrape_all()  # h100-0 holds a tag its next answer would match
            emulator.set_faults("h100-0", stopped=True)
            await scraper.scrape_all()
            assert service.replicas["h100-0"].healthy  # one failure of two
            await scraper.scrape_all()
            assert not service.replicas["h100-0"].healthy
            assert service.replicas["h100-1"].healthy
            assert service.registrations["h100-0"].metrics_etag is None
            emulator.set_faults("h100-0", stopped=False)
            read = scraper.pages_read
            await scraper.scrape_all()  # back at its first good answer, read in full
            assert service.replicas["h100-0"].healthy
            assert scraper.pages_read == read + 1
        finally:
            await scraper.session.close()

    asyncio.run(scenario())


def test_every_scrape_is_a_sample_in_the_telemetry_store(
    emulator: EmulatorThread, tmp_path: Path
) -> None:
    service = _service(emulator)
    sink = TelemetrySink(tmp_path / "telemetry")
    scraper = ReplicaScraper(service, interval_s=0.5, sink=sink)

    async def scenario() -> None:
        try:
            await scraper.scrape_all()
            await scraper.scrape_all()  # two 304s: the last pages, stamped now
            await asyncio.to_thread(_complete, emulator, "h100-1")
            await scraper.scrape_all()
            await sink.flush()
        finally:
            await scraper.session.close()

    asyncio.run(scenario())
    samples = read_samples(tmp_path / "telemetry").sort_values(["replica", "time"])
    assert sorted(samples["replica"]) == sorted(IDS * 3)
    for replica in IDS:
        times = samples[samples["replica"] == replica]["time"]
        assert times.is_monotonic_increasing and times.is_unique
    served = samples[samples["replica"] == "h100-1"]["generation_tokens_total"].to_list()
    assert served[0] == served[1] < served[2]  # the request it served shows in its last sample


def test_a_page_with_lora_requests_info_gives_the_route_path_the_engines_adapter_lists() -> None:
    from serving.replica_scraper import _read
    from serving.service import ReplicaRegistration

    page = (
        'vllm:num_requests_running{model_name="llama-3-8b"} 2.0\n'
        'vllm:num_requests_waiting{model_name="llama-3-8b"} 1.0\n'
        'vllm:kv_cache_usage_perc{model_name="llama-3-8b"} 0.5\n'
        'vllm:prompt_tokens_total{model_name="llama-3-8b"} 10.0\n'
        'vllm:generation_tokens_total{model_name="llama-3-8b"} 10.0\n'
        'vllm:lora_requests_info{max_lora="2",running_lora_adapters="a,b",'
        'waiting_lora_adapters="c"} 5.0\n'
    )
    state = ReplicaState(
        id="r0",
        address="http://r0",
        model=MODEL,
        accelerator="H100-SXM",
        tp=1,
        kv_capacity_tokens=400_000,
        max_loras=2,
    )
    service = PlacementService(route_path_factory=lambda r: PlacementRoutePath(list(r.values())))
    service.register_replica(state)
    reg = ReplicaRegistration(state=state, metrics_url="http://r0/metrics")
    row, etag, adapters = _read(reg, page, "tag")
    assert adapters == (("a", "b"), ("c",)) and etag == "tag"
    ReplicaScraper(service, interval_s=1.0)._apply(reg, row, etag, adapters)
    assert (state.running_lora_adapters, state.waiting_lora_adapters) == (("a", "b"), ("c",))
    path = service.route_path
    assert isinstance(path, PlacementRoutePath)
    assert path._engine_slots["r0"].handovers("d") == 2  # behind c, and its own
    # a replica serving no adapters: the lists are not read
    plain = ReplicaRegistration(state=dataclasses.replace(state, max_loras=0), metrics_url="x")
    assert _read(plain, page, None)[2] is None
