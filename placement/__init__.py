"""Placement service for LLM inference fleets: domain, routing plugins, solver, CLI."""

__version__ = "0.1.0"
