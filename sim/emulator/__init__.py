"""A vLLM-compatible fleet emulator: OpenAI endpoints and vLLM ``/metrics`` per replica, with
timings from the simulator's engine (continuous batching, chunked prefill, a paged prefix cache
keyed on real BPE tokens) driven in real time, and faults to inject.

``placement emulate --fleet F`` serves it; :class:`EmulatorThread` runs it beside other code.
"""

from sim.emulator.faults import ReplicaFaults
from sim.emulator.fleet import EmulatorOptions, EmulatorThread, FleetEmulator, replica_port

__all__ = ["EmulatorOptions", "EmulatorThread", "FleetEmulator", "ReplicaFaults", "replica_port"]
