"""The planner's worker processes, with real processes and real signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from concurrent.futures import CancelledError
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from process_tree import alive, descendants, wait_gone

from serving.plan_store import DirectoryPlanStore
from serving.planner import Planner
from serving.workers import WORKER_NICE, WorkerPool


def _busy_worker(pool: WorkerPool) -> int:
    pool.submit(time.sleep, 60)
    for _ in range(400):
        if pool.pids():
            return pool.pids()[0]
        time.sleep(0.01)
    pytest.fail("no worker started")


def test_stop_ends_a_running_solve_at_once() -> None:
    pool = WorkerPool()
    future = pool.submit(time.sleep, 60)
    while not future.running():
        time.sleep(0.01)
    (pid,) = pool.pids()
    started = time.monotonic()
    pool.stop()
    assert time.monotonic() - started < 3.0
    assert not alive(pid)
    with pytest.raises((BrokenProcessPool, CancelledError)):
        future.result(timeout=5)


def test_a_worker_runs_below_the_service_priority() -> None:
    pool = WorkerPool()
    try:
        pid = _busy_worker(pool)
        wanted = min(19, os.getpriority(os.PRIO_PROCESS, 0) + WORKER_NICE)
        for _ in range(400):  # once the worker has started
            if os.getpriority(os.PRIO_PROCESS, pid) == wanted:
                break
            time.sleep(0.01)
        assert os.getpriority(os.PRIO_PROCESS, pid) == wanted
    finally:
        pool.stop()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signalled_worker_exits_and_the_planner_replaces_its_pool(
    tmp_path: Path, sig: signal.Signals
) -> None:
    planner = Planner(
        solve=lambda *a, **k: None,  # type: ignore[arg-type,return-value]
        snapshot=lambda: None,
        store=DirectoryPlanStore(tmp_path),
        install=lambda plan: None,
    )
    try:
        pool = planner.executor()
        assert isinstance(pool, WorkerPool)
        pid = _busy_worker(pool)
        os.kill(pid, sig)
        assert wait_gone({pid}, 5.0) == set()
        for _ in range(200):  # the pool notices its worker died
            if pool.broken:
                break
            time.sleep(0.01)
        fresh = planner.executor()
        assert fresh is not pool
        assert fresh.submit(sum, (1, 2)).result(timeout=60) == 3
    finally:
        planner.close()
    assert planner.worker_pids() == []


def test_a_worker_dies_with_its_parent(tmp_path: Path) -> None:
    """A service killed with SIGKILL (no clean-up runs) leaves no worker behind."""
    script = tmp_path / "service.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys, time
            from serving.workers import WorkerPool

            if __name__ == "__main__":
                pool = WorkerPool()
                pool.submit(time.sleep, 60)
                while not pool.pids():
                    time.sleep(0.01)
                print(pool.pids()[0], flush=True)
                time.sleep(60)
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    with subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, env=env, text=True
    ) as service:
        try:
            assert service.stdout is not None
            worker = int(service.stdout.readline())
            children = descendants(service.pid)
            assert worker in children
        finally:
            service.kill()
            service.wait(timeout=10)
        assert wait_gone(children, 5.0) == set()
