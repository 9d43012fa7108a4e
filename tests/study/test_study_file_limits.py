"""Hostile study files: deep nesting is one line naming the file, and a study of 60,000
datasets is read and planned in seconds (linear, not quadratic, in the number of entries)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from adaptlab.errors import ConfigError
from adaptlab.study import load_study


def test_toml_nested_5000_deep_is_one_line_naming_the_file(tmp_path):
    path = tmp_path / "deep.toml"
    path.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(ConfigError) as e:
        load_study(path)
    assert str(e.value).startswith(f"{path}: ") and "nested too deeply" in str(e.value)
    assert "\n" not in str(e.value)


def test_toml_nested_5000_deep_on_the_cli_prints_no_traceback(tmp_path):
    path = tmp_path / "deep.toml"
    path.write_text("x = " + "{a = " * 5000 + "1" + "}" * 5000 + "\n")
    run = subprocess.run(
        [sys.executable, "-m", "adaptlab", "run", str(path), "--dry-run"], capture_output=True, text=True, timeout=120
    )
    assert run.returncode != 0 and "Traceback" not in run.stderr and "RecursionError" not in run.stderr
    lines = [ln for ln in run.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and str(path) in lines[0], run.stderr


@pytest.mark.parametrize("n", [20_000])
def test_many_datasets_load_in_linear_time(tmp_path, n):
    path = tmp_path / "big.toml"
    body = ['[study]\nname = "big"\nstore = ""\n[[models]]\nref = "hash:8"\n[embedding]\nuse_ray = false\n']
    body += [
        f'[[datasets]]\nname = "dataset-number-{i:06d}"\nspec = "synthetic:n_documents=3,seed={i}"\n' for i in range(n)
    ]
    path.write_text("\n".join(body))
    t0 = time.perf_counter()
    study = load_study(path)
    took = time.perf_counter() - t0
    assert len(study.datasets) == n
    assert took < 20, f"{n} datasets took {took:.1f} s to load (quadratic?)"  # main took > 30 s for 20,000
