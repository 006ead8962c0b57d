"""The planner's worker processes: solves (and what-if jobs) run there, never in the service.

A :class:`WorkerPool` is a ``ProcessPoolExecutor`` whose children cannot outlive the service
or hold its port:

* **spawned, not forked.** A child starts from a fresh interpreter, so it inherits neither the
  listening socket (a forked child kept the port after its parent stopped, and a restart
  failed with "address already in use") nor the service's signal handlers (a forked child ran
  uvicorn's, which only set a flag in the child's copy of the server: it ignored SIGTERM).
* **SIGTERM and SIGINT end it** at once (the kernel's default action: no handler that a
  solve stuck in C code would delay, no traceback when Ctrl-C reaches the process group).
* **It dies with its parent** (Linux ``PR_SET_PDEATHSIG``), so a service killed with SIGKILL
  leaves no solver behind. The kernel ties this to the *thread* that started the child: the
  pool starts its workers on ``submit``, from the event loop's thread, which lives as long as
  the service.
* **It runs at a lower CPU priority** (``nice`` +:data:`WORKER_NICE`): on a busy machine the
  route path keeps the CPU while a solve runs.
* :meth:`WorkerPool.stop` terminates running workers (a solve in progress included) and joins
  them, rather than waiting for the solve to reach its time limit.

A worker that died (a signal, a crash) breaks the pool; its owner replaces it
(:meth:`serving.planner.Planner.executor`).
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
import sys
import time
from concurrent.futures import ProcessPoolExecutor

WORKER_NICE = 10
STOP_TIMEOUT_S = 3.0
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent(parent_pid: int) -> None:
    """Have the kernel send SIGTERM to this process when its parent exits (Linux); exit now if
    the parent is already gone."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent_pid:
        os._exit(0)


def _start_worker(parent_pid: int) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    die_with_parent(parent_pid)
    with contextlib.suppress(OSError):  # not permitted here: run at the service's priority
        os.nice(WORKER_NICE)


class WorkerPool(ProcessPoolExecutor):
    """A process pool with the properties of the module doc."""

    def __init__(self, max_workers: int = 1) -> None:
        super().__init__(
            max_workers=max_workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_start_worker,
            initargs=(os.getpid(),),
        )

    @property
    def broken(self) -> bool:
        """A worker died (a signal, a crash): the pool takes no more work."""
        return bool(self._broken)

    def pids(self) -> list[int]:
        """The live workers' process ids."""
        return [p.pid for p in list((self._processes or {}).values()) if p.pid is not None]

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """Cancel queued work, terminate the workers (running work included), join them;
        SIGKILL any still alive after ``timeout_s``."""
        processes = list((self._processes or {}).values())
        self.shutdown(wait=False, cancel_futures=True)
        for p in processes:
            if p.is_alive():
                p.terminate()
        deadline = time.monotonic() + timeout_s
        for p in processes:
            p.join(max(0.0, deadline - time.monotonic()))
            if p.is_alive():
                p.kill()
                p.join(1.0)
