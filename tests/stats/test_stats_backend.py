"""Array backend selection, and the index kernel through a non-NumPy array module."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from adaptlab.errors import ConfigError
from adaptlab.stats import _kernels, bootstrap_ci, resample_indices
from adaptlab.stats.backend import cupy_available, get_xp, to_numpy


def test_numpy_backend_and_validation() -> None:
    assert get_xp("numpy") is np
    with pytest.raises(ConfigError, match="backend"):
        get_xp("jax")
    assert isinstance(to_numpy([1, 2]), np.ndarray)


@pytest.mark.skipif(cupy_available(), reason="CuPy with a GPU is present")
def test_auto_falls_back_to_numpy_and_cupy_request_fails_clearly() -> None:
    assert get_xp("auto") is np
    with pytest.raises(ConfigError, match="cupy"):
        get_xp("cupy")
    with pytest.raises(ConfigError):
        bootstrap_ci([0.1, 0.2], backend="cupy")


@pytest.mark.parametrize("elems", [1 << 17, 64, 8])  # whole resamples, split, tiny pieces
@pytest.mark.parametrize("n_sys", [1, 3])
def test_index_kernel_through_a_foreign_array_module(monkeypatch: pytest.MonkeyPatch, elems: int, n_sys: int) -> None:
    """The non-NumPy branch (device arrays, host indices) gives the NumPy result, and the
    gather pieces (whole resamples or accumulated parts) do not change the sums."""
    fake = SimpleNamespace(
        asarray=lambda a: np.array(a), take=np.take, ones=np.ones, zeros=np.zeros, matmul=np.matmul, float64=np.float64
    )
    vals = np.random.default_rng(0).random((n_sys, 120))
    kw = dict(sample_size=40, n_resamples=70, seed=5, n_jobs=1)
    ref = _kernels.index_sums(vals, xp=np, **kw)
    idx = resample_indices(120, n_resamples=70, sample_size=40, seed=5)
    np.testing.assert_allclose(ref, vals[:, idx].sum(axis=-1).T, rtol=1e-13)
    monkeypatch.setattr(_kernels, "_GATHER_ELEMS", elems)
    monkeypatch.setattr(_kernels, "_GATHER_ELEMS_GPU", elems)
    np.testing.assert_allclose(_kernels.index_sums(vals, xp=np, **kw), ref, rtol=1e-13)
    np.testing.assert_allclose(_kernels.index_sums(vals, xp=fake, **kw), ref, rtol=1e-13)


@pytest.mark.gpu
@pytest.mark.skipif(not cupy_available(), reason="needs CuPy and a CUDA GPU")
def test_cupy_and_numpy_give_the_same_intervals() -> None:
    vals = np.random.default_rng(1).random((4, 3000))
    kw = dict(n_resamples=500, seed=3, method="index")
    gpu = bootstrap_ci(vals, backend="cupy", **kw)
    cpu = bootstrap_ci(vals, backend="numpy", **kw)
    np.testing.assert_allclose(gpu.ci_low, cpu.ci_low, rtol=1e-12)
    np.testing.assert_allclose(gpu.ci_high, cpu.ci_high, rtol=1e-12)
