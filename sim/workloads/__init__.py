"""Request generators: real traces (Mooncake, Azure), ServeGen tenants, synthetic tenants."""

from sim.workloads.base import Workload

__all__ = ["Workload"]
