"""Support code shared by the tests and the benchmarks (not part of the installed package):
real loopback-only Ray nodes started and stopped by pid (:mod:`testkit.ray_cluster`) and a writer
of the previous results-store layout (:mod:`testkit.legacy_writer`). Imported by package from the
repository root (``python -m benchmarks.bench_x``; pytest puts the root on ``sys.path``)."""
