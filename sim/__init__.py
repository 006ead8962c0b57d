"""The fleet simulator: replicas with continuous batching over measured engine timings."""
