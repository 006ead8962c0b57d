"""A new user's first hour, timed: the CLI's help, a plan solve, the demo service's start and
its idle cost. Every figure comes from the real command run as a subprocess, as a user types it.

- ``help_s``: ``placement --help`` (median of ``repeats`` runs); ``help_cpu_s`` its CPU
  seconds (user + system), as ``plan_solve_cpu_s`` for the plan solve: the wall times depend on
  how busy the machine is, these much less (``load_average`` records how busy it was);
- ``plan_solve_wall_s`` / ``plan_solve_solver_s``: ``placement plan solve`` on the shipped
  hetero fleet and mixed workload (wall time of the command; the solver's own time from the
  plan it publishes), median of ``repeats`` runs;
- ``ready_s``: ``placement serve --demo`` from start to the first ``/readyz`` 200;
- ``first_plan_s``: from start until ``/readyz`` names an installed plan (the demo is ready
  before, routing by its greedy fallback, while its worker process starts and solves the first
  plan); ``settling_cpu_share`` is the service's CPU share between ready and then;
- ``idle_cpu_share``: CPU seconds of the service's whole process tree over ``idle_s`` seconds
  of wall time with no traffic once the first plan is in (1.0 = one core busy): the steady
  cost of a service with nothing to do (scraping its replicas, following its plan store).

Targets (issue "A new user's first hour"): help ≤ 0.5 s, plan solve ≤ 3 × solver + 5 s, ready
≤ 10 s on a warm machine, idle CPU ≤ 2 % of a core.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil

from placement.paths import repo_root
from placement.report import print_table, write_json

HELP_TARGET_S = 0.5
READY_TARGET_S = 10.0
IDLE_CPU_TARGET = 0.02
SOLVE_FACTOR = 3.0
SOLVE_SLACK_S = 5.0
READY_TIMEOUT_S = 180.0
FIRST_PLAN_TIMEOUT_S = 180.0


def placement_command() -> list[str]:
    """The ``placement`` console script beside this interpreter (what a user runs)."""
    script = Path(sys.executable).parent / "placement"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from placement.cli import app; app()"]


def _timed(args: Sequence[str], *, cwd: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of one run; the CPU seconds (user + system, the command and its
    children) depend far less on how busy the machine is than the wall time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(args, cwd=cwd, check=True, capture_output=True, timeout=600)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def measure_help(repeats: int) -> tuple[float, float]:
    """Median (wall, CPU) seconds of ``placement --help``."""
    runs = [_timed([*placement_command(), "--help"], cwd=repo_root()) for _ in range(repeats)]
    return statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs)


def measure_plan_solve(repeats: int) -> tuple[float, float, float]:
    """Median (wall, solver, CPU) seconds of ``placement plan solve`` on hetero/mixed."""
    walls, solvers, cpus = [], [], []
    root = repo_root()
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as out:
            wall, cpu = _timed(
                [
                    *placement_command(),
                    "plan",
                    "solve",
                    "--fleet",
                    str(root / "data" / "fleets" / "hetero.yaml"),
                    "--workload",
                    "mixed",
                    "--out",
                    out,
                ],
                cwd=root,
            )
            walls.append(wall)
            cpus.append(cpu)
            plan_file = max(Path(out).glob("plan-*.json"))
            solvers.append(float(json.loads(plan_file.read_text())["solver"]["solve_s"]))
    return statistics.median(walls), statistics.median(solvers), statistics.median(cpus)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _tree_cpu_s(proc: psutil.Process) -> float:
    total = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            t = p.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += t.user + t.system
    return total


@dataclass(frozen=True)
class ServiceFigures:
    ready_s: float
    first_plan_s: float | None  # None: no plan within FIRST_PLAN_TIMEOUT_S
    settling_cpu_share: float
    idle_cpu_share: float


def measure_service(idle_s: float) -> ServiceFigures:
    """Start the demo; time it to ready and to its first plan; then its idle CPU share over
    ``idle_s``."""
    port = free_port()
    with tempfile.TemporaryDirectory() as plans:
        env = {**os.environ, "PLACEMENT_PORT": str(port), "PLACEMENT_PLAN_DIR": plans}
        t0 = time.perf_counter()
        child = subprocess.Popen(
            [*placement_command(), "serve", "--demo", "--port", str(port), "--plan-dir", plans],
            cwd=repo_root(),
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            ready_s = _wait_ready(child, port, t0)
            proc = psutil.Process(child.pid)
            cpu0, w0 = _tree_cpu_s(proc), time.perf_counter()
            first_plan_s = _wait_first_plan(port, t0)
            cpu1, w1 = _tree_cpu_s(proc), time.perf_counter()
            settling = (cpu1 - cpu0) / max(w1 - w0, 1e-9)
            time.sleep(idle_s)
            idle = (_tree_cpu_s(proc) - cpu1) / (time.perf_counter() - w1)
        finally:
            _stop(child)
    return ServiceFigures(ready_s, first_plan_s, settling, idle)


def _wait_first_plan(port: int, t0: float) -> float | None:
    """Seconds from ``t0`` until ``/readyz`` names an installed plan ("plan N")."""
    url = f"http://127.0.0.1:{port}/readyz"
    deadline = time.perf_counter() + FIRST_PLAN_TIMEOUT_S
    with httpx.Client(timeout=1.0) as client:
        while time.perf_counter() < deadline:
            try:
                if str(client.get(url).json().get("detail", "")).startswith("plan "):
                    return time.perf_counter() - t0
            except (httpx.TransportError, ValueError):
                pass
            time.sleep(0.1)
    return None


def _wait_ready(child: subprocess.Popen[bytes], port: int, t0: float) -> float:
    url = f"http://127.0.0.1:{port}/readyz"
    with httpx.Client(timeout=1.0) as client:
        while time.perf_counter() - t0 < READY_TIMEOUT_S:
            if child.poll() is not None:
                raise RuntimeError(f"placement serve --demo exited with {child.returncode}")
            try:
                if client.get(url).status_code == 200:
                    return time.perf_counter() - t0
            except httpx.TransportError:
                pass
            time.sleep(0.05)
    raise RuntimeError(f"placement serve --demo not ready after {READY_TIMEOUT_S:g} s")


def _stop(child: subprocess.Popen[bytes]) -> None:
    try:
        tree = psutil.Process(child.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        tree = []
    child.send_signal(signal.SIGTERM)
    try:
        child.wait(timeout=10)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
    for p in tree:  # the benchmark leaves nothing behind, whatever the service does
        if p.is_running():
            p.kill()


def run_usability_bench(
    *, repeats: int = 3, idle_s: float = 20.0, out: Path | None = None
) -> dict[str, Any]:
    """Measure, print a table, write JSON; returns the payload."""
    help_s, help_cpu = measure_help(repeats)
    wall, solver, solve_cpu = measure_plan_solve(repeats)
    service = measure_service(idle_s)
    ready_s, idle = service.ready_s, service.idle_cpu_share
    solve_target = SOLVE_FACTOR * solver + SOLVE_SLACK_S
    rows: list[dict[str, Any]] = [
        {
            "figure": "help_s",
            "value": help_s,
            "target": HELP_TARGET_S,
            "met": help_s <= HELP_TARGET_S,
        },
        {
            "figure": "plan_solve_wall_s",
            "value": wall,
            "target": solve_target,
            "met": wall <= solve_target,
        },
        {"figure": "plan_solve_solver_s", "value": solver, "target": None, "met": None},
        {"figure": "help_cpu_s", "value": help_cpu, "target": None, "met": None},
        {"figure": "plan_solve_cpu_s", "value": solve_cpu, "target": None, "met": None},
        {
            "figure": "ready_s",
            "value": ready_s,
            "target": READY_TARGET_S,
            "met": ready_s <= READY_TARGET_S,
        },
        {"figure": "first_plan_s", "value": service.first_plan_s, "target": None, "met": None},
        {
            "figure": "settling_cpu_share",
            "value": service.settling_cpu_share,
            "target": None,
            "met": None,
        },
        {
            "figure": "idle_cpu_share",
            "value": idle,
            "target": IDLE_CPU_TARGET,
            "met": idle <= IDLE_CPU_TARGET,
        },
    ]
    payload: dict[str, Any] = {
        "help_s": help_s,
        "plan_solve_wall_s": wall,
        "plan_solve_solver_s": solver,
        "ready_s": ready_s,
        "idle_cpu_share": idle,
        "help_cpu_s": help_cpu,
        "plan_solve_cpu_s": solve_cpu,
        "load_average": os.getloadavg(),
        "first_plan_s": service.first_plan_s,
        "settling_cpu_share": service.settling_cpu_share,
        "repeats": repeats,
        "idle_window_s": idle_s,
        "rows": rows,
    }
    print_table("a new user's first hour", rows, ["figure", "value", "target", "met"])
    if out is not None:
        write_json(out, payload)
    return payload
