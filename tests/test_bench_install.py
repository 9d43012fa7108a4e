"""benchmarks/bench_install.py without installing anything: what it counts, how it sizes a venv,
the pip arguments it gives, and its ratios (the install itself is measured by running it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import bench_install as bench


def _fake_venv(root: Path) -> Path:
    site = root / "lib" / "python3.11" / "site-packages"
    (site / "pkg").mkdir(parents=True)
    (site / "pkg" / "a.py").write_bytes(b"x" * 1_500_000)
    (site / "pkg" / "b.so").write_bytes(b"y" * 500_000)
    (site / "pkg" / "link.py").symlink_to(site / "pkg" / "a.py")  # not counted twice
    for name in ("pkg-1.0.dist-info", "other-2.0.dist-info", "adaptlab-0.1.0.dist-info"):
        (site / name).mkdir()
    (site / "stray.dist-info").write_text("a file, not a distribution")
    return site


def test_packages_and_size_of_a_venv(tmp_path) -> None:
    site = _fake_venv(tmp_path)
    assert bench.site_packages(tmp_path) == site
    assert bench.count_packages(site) == 3
    assert bench.tree_megabytes(site) == pytest.approx(2.0 + len("a file, not a distribution") / 1e6)


def test_a_venv_without_one_site_packages_exits(tmp_path) -> None:
    with pytest.raises(SystemExit, match="expected one lib/python"):
        bench.site_packages(tmp_path)


def test_pip_arguments_per_target(tmp_path) -> None:
    assert bench.requirement("core", tmp_path, editable=False) == [str(tmp_path)]
    assert bench.requirement("all", tmp_path, editable=False) == [f"{tmp_path}[all]"]
    assert bench.requirement("test", tmp_path, editable=True) == ["-e", f"{tmp_path}[test]"]


def test_every_target_is_an_extra_of_the_project() -> None:
    import tomllib

    extras = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert set(bench.TARGETS) - {"core"} <= set(extras)


def test_ratios_and_reference() -> None:
    got = bench.Install("core", 100, 1750.0, 50.0, 62.5, 300.0)
    assert got.total_seconds == 112.5
    assert bench.ratios(got, 225, 3500) == {"seconds": 0.5, "size": 0.5}
    assert bench.parse_reference("225,3500") == (225.0, 3500.0)
    for bad in ("225", "a,b", "0,3500", "225,3500,1"):
        with pytest.raises(SystemExit, match="expected SECONDS,MB"):
            bench.parse_reference(bad)
    assert "core: 100 packages, 1,750 MB in site-packages, 112 s (50 s torch + 62 s adaptlab" in bench.describe(got)


def test_main_prints_each_target_and_its_ratios(tmp_path, monkeypatch, capsys) -> None:
    made = {
        "core": bench.Install("core", 100, 1750.0, 50.0, 62.5, 300.0),
        "test": bench.Install("test", 250, 3500.0, 50.0, 175.0, 900.0),
    }
    monkeypatch.setattr(bench, "measure", lambda target, workdir, editable=False: made[target])
    assert bench.main(["--compare", "--reference", "225,3500", "--keep", str(tmp_path / "v")]) == 0
    out = capsys.readouterr().out
    assert "core: 100 packages" in out and "test: 250 packages" in out
    assert "core / test: {'seconds': 0.5, 'size': 0.5}" in out
    assert "core / reference 225 s, 3500 MB: {'seconds': 0.5, 'size': 0.5}" in out
