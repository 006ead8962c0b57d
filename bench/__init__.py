"""Benchmarks behind ``placement bench …``: each prints a table and writes JSON."""
