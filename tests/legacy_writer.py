"""The writer of the previous store layout, now in :mod:`testkit.legacy_writer` (shared with
benchmarks/bench_store.py); this name stays for the tests that import it from tests/."""

from testkit.legacy_writer import LegacyWriter

__all__ = ["LegacyWriter"]
