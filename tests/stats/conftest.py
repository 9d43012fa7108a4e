"""Shared fixtures of the stats tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture
def one_blas_thread() -> Iterator[None]:
    """Run the test's small matrix products on one BLAS thread: on a loaded 2-core machine the
    simulations run several times faster (thread contention), with the same numbers."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        yield
        return
    with threadpool_limits(1):
        yield
