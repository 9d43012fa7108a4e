import numpy as np
import pytest

from adaptlab.analysis import isoscore, isotropy, isotropy_mu, isotropy_mu_exact
from adaptlab.errors import ConfigError


def _unit(x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize(
    "shape,scale",
    [((200, 8), None), ((50, 32), None), ((300, 16), "aniso"), ((10, 24), None), ((300, 128), "aniso")],
)
def test_isoscore_equals_the_isoscore_package(shape, scale):
    IsoScore = pytest.importorskip("IsoScore.IsoScore")
    rng = np.random.default_rng(0)
    x = rng.normal(size=shape)
    if scale == "aniso":
        x = x * np.geomspace(10, 0.1, shape[1]) + 3.0
    x = _unit(x)
    ref = float(IsoScore.IsoScore(x))  # the package takes points as rows [n_samples, dim]
    assert isoscore(x) == pytest.approx(ref, abs=1e-6)


def test_isoscore_extremes():
    rng = np.random.default_rng(1)
    iso = rng.normal(size=(20000, 4))
    assert isoscore(iso) > 0.99
    line = np.outer(rng.normal(size=500), [1.0, 2.0, 3.0]) + 1e-9 * rng.normal(size=(500, 3))
    assert isoscore(line) < 1e-3


def test_mu_approx_formula_by_hand():
    v = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    # |V| = 3, ||1^T V|| = ||(2, 1)|| = sqrt 5, V^T V = diag(2, 1) -> s_min^2 = 1, s_max^2 = 2
    expected = (3 - np.sqrt(5) + 0.5) / (3 + np.sqrt(5) + 1.0)
    assert isotropy_mu(v) == pytest.approx(expected)


def test_mu_exact_by_hand_and_sign_invariance():
    v = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    # eigenvectors +-e1, +-e2: Z(e1) = 2e + 1, Z(-e1) = 2/e + 1, Z(e2) = e + 2, Z(-e2) = 1/e + 2
    z = [2 * np.e + 1, 2 / np.e + 1, np.e + 2, 1 / np.e + 2]
    assert isotropy_mu_exact(v) == pytest.approx(min(z) / max(z))
    assert isotropy_mu_exact(-v) == pytest.approx(isotropy_mu_exact(v))


def test_mu_detects_anisotropy_and_handles_large_norms():
    rng = np.random.default_rng(2)
    iso = _unit(rng.normal(size=(5000, 8)))
    aniso = _unit(rng.normal(size=(5000, 8)) + np.array([3.0] + [0.0] * 7))
    assert isotropy_mu(iso) > 0.9 > 0.5 > isotropy_mu(aniso)
    assert isotropy_mu_exact(iso) > isotropy_mu_exact(aniso)
    big = 1000 * rng.normal(size=(100, 4))  # exp(c^T v) would overflow without log-sum-exp
    assert 0.0 <= isotropy_mu_exact(big) <= 1.0


def test_fewer_points_than_dimensions_and_result_rows():
    rng = np.random.default_rng(3)
    v = _unit(rng.normal(size=(5, 10)))
    n, m = 5.0, np.linalg.norm(v.sum(axis=0))
    smax2 = np.linalg.svd(v, compute_uv=False)[0] ** 2
    assert isotropy_mu(v) == pytest.approx((n - m) / (n + m + 0.5 * smax2))
    r = isotropy(v, system="s", dataset="d", space="corpus+whiten")
    rows = {row["measure"]: row for row in r.to_metric_rows()}
    assert set(rows) == {"isoscore", "isotropy_mu", "isotropy_mu_exact"}
    assert rows["isoscore"]["value"] == pytest.approx(isoscore(v))
    assert '"space": "corpus+whiten"' in rows["isoscore"]["extra"]


def test_errors():
    with pytest.raises(ConfigError, match="2-D"):
        isoscore(np.ones(5))
    with pytest.raises(ConfigError, match="identical"):
        isoscore(np.ones((4, 3)))
    with pytest.raises(ConfigError, match="NaN"):
        isotropy_mu(np.array([[np.nan, 1.0], [1.0, 0.0]]))
