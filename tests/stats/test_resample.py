"""Shared bootstrap resample indices: shape, determinism, prefix stability, chunked variant."""

from __future__ import annotations

import numpy as np
import pytest

from adaptlab.errors import ConfigError
from adaptlab.stats import bootstrap_ci, iter_resample_indices, resample_indices
from adaptlab.stats import resample as rs


def test_shape_dtype_range_and_default_sample_size() -> None:
    idx = resample_indices(7, n_resamples=5, seed=3)
    assert idx.shape == (5, 7) and idx.dtype == np.int64
    assert idx.min() >= 0 and idx.max() < 7
    assert resample_indices(7, n_resamples=5, sample_size=3, seed=3).shape == (5, 3)


def test_same_seed_same_indices_other_seed_differs() -> None:
    a = resample_indices(1000, n_resamples=20, seed=9)
    np.testing.assert_array_equal(a, resample_indices(1000, n_resamples=20, seed=9))
    assert not np.array_equal(a, resample_indices(1000, n_resamples=20, seed=10))


def test_more_resamples_only_appends(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rs, "_BLOCK_ELEMS", 64)  # several blocks even for small sizes
    short = resample_indices(50, n_resamples=7, sample_size=10, seed=1)
    long = resample_indices(50, n_resamples=30, sample_size=10, seed=1)
    np.testing.assert_array_equal(long[:7], short)


def test_chunked_variant_concatenates_to_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rs, "_BLOCK_ELEMS", 100)
    blocks = list(iter_resample_indices(40, n_resamples=23, sample_size=30, seed=2))
    assert len(blocks) == 8 and all(b.shape[1] == 30 for b in blocks)  # 3 rows per block
    np.testing.assert_array_equal(np.concatenate(blocks), resample_indices(40, n_resamples=23, sample_size=30, seed=2))


def test_uniform_with_replacement() -> None:
    idx = resample_indices(10, n_resamples=2000, sample_size=50, seed=0, allow_oversampling=True)
    freq = np.bincount(idx.ravel(), minlength=10) / idx.size
    np.testing.assert_allclose(freq, 0.1, atol=0.004)  # SE ~ 0.0007
    assert any(len(np.unique(r)) < 10 for r in idx[:, :10])  # repeats occur


def test_index_path_of_bootstrap_ci_uses_these_resamples() -> None:
    rng = np.random.default_rng(0)
    values = rng.random((3, 200))
    res = bootstrap_ci(values, n_resamples=300, sample_size=50, seed=4, method="index", keep_distribution=True)
    idx = resample_indices(200, n_resamples=300, sample_size=50, seed=4)
    np.testing.assert_allclose(res.distribution, values[:, idx].mean(axis=-1), rtol=1e-12)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(n_resamples=0),
        dict(n_resamples=2.5),
        dict(n_resamples=True),
        dict(n_resamples=3, sample_size=0),
        dict(n_resamples=3, seed=-1),
        dict(n_resamples=3, seed="a"),
    ],
)
def test_invalid_arguments(kwargs: dict) -> None:
    with pytest.raises(ConfigError):
        resample_indices(10, **kwargs)
    with pytest.raises(ConfigError):
        resample_indices(0, n_resamples=3)
