"""``placement bench`` subcommands (thin: parse options, call the benchmark, print, write)."""

from __future__ import annotations
