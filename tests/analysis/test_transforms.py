import numpy as np
import pytest

from adaptlab.analysis import AllButTheTop, Standardize, Whiten, make_transform, transform_space
from adaptlab.errors import ConfigError


@pytest.fixture(scope="module")
def corpus():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 12)) * np.geomspace(5, 0.2, 12) + 2.0
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_standardize(corpus):
    t = Standardize(renormalize=False).fit(corpus)
    z = t.transform(corpus)
    np.testing.assert_allclose(z.mean(axis=0), 0, atol=1e-5)
    np.testing.assert_allclose(z.std(axis=0), 1, atol=1e-4)
    assert z.dtype == np.float32


def test_whiten_gives_identity_covariance(corpus):
    z = Whiten(renormalize=False).fit_transform(corpus).astype(np.float64)
    np.testing.assert_allclose(np.cov(z, rowvar=False), np.eye(12), atol=1e-4)
    assert Whiten(n_components=3, renormalize=False).fit_transform(corpus).shape == (400, 3)


def test_all_but_the_top_removes_mean_and_top_directions(corpus):
    t = AllButTheTop(n_components=2, renormalize=False).fit(corpus)
    z = t.transform(corpus).astype(np.float64)
    np.testing.assert_allclose(z.mean(axis=0), 0, atol=1e-5)
    np.testing.assert_allclose(z @ t.components_.T, 0, atol=1e-5)
    assert AllButTheTop().fit(corpus).components_.shape == (1, 12)  # default D = max(1, round(d / 100))


def test_queries_use_the_corpus_fit_and_outputs_are_unit_norm(corpus):
    rng = np.random.default_rng(1)
    queries = rng.normal(size=(7, 12))
    sp = transform_space(corpus, queries, "whitening")
    manual = (queries - sp.transform.mean_) @ sp.transform.matrix_
    manual /= np.linalg.norm(manual, axis=1, keepdims=True)
    np.testing.assert_allclose(sp.queries, manual, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(sp.corpus, axis=1), 1, rtol=1e-5)
    assert make_transform("none").fit(corpus).transform(queries).shape == (7, 12)
    assert make_transform("pca").name == "abtt" and sp.transform.params()["name"] == "whiten"


def test_transform_errors(corpus):
    with pytest.raises(ConfigError, match="unknown transform"):
        make_transform("rotate")
    with pytest.raises(ConfigError, match="not fitted"):
        Standardize().transform(corpus)
    with pytest.raises(ConfigError, match="dimension"):
        Standardize().fit(corpus).transform(np.ones((2, 3)))
    with pytest.raises(ConfigError, match="invalid parameters"):
        make_transform("standardize", n_components=3)
