"""adaptlab's benchmarks: each ``bench_*.py`` is a script run from the repository root as
``python -m benchmarks.bench_x``; what several of them use (synthetic texts, ratios of timed
rounds, JSON output) is in :mod:`benchmarks.common`, device information in
:mod:`benchmarks.gpu.devinfo`, and the loopback Ray cluster and the previous-layout store writer
they share with the tests in the ``testkit`` package."""
