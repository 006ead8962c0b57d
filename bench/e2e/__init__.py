"""The routers side by side, end to end: ``placement bench e2e`` (see :mod:`bench.e2e.run`)."""

from bench.e2e.routers import ROUTERS
from bench.e2e.run import E2EOptions, run_e2e_bench

__all__ = ["ROUTERS", "E2EOptions", "run_e2e_bench"]
