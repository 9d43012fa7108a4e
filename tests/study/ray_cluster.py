"""The loopback Ray cluster helpers, now in :mod:`testkit.ray_cluster` (shared with the benchmarks);
this name stays for the tests that import it from tests/study."""

from testkit.ray_cluster import *  # noqa: F403
from testkit.ray_cluster import HeadPorts  # noqa: F401  (named for readers and type checkers)
