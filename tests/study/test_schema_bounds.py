"""Size-like keys and the baseline are checked when a study is loaded, before any work, with
the file and the dotted key in the message (issue 11, row 13)."""

from __future__ import annotations

import pytest

from adaptlab import load_study
from adaptlab.errors import ConfigError

BASE = """
[study]
name = "x"
store = ""
[[datasets]]
spec = "synthetic:n_documents=5,seed=0"
[[models]]
name = "minilm"
ref = "minilm"
"""


@pytest.mark.parametrize("section, line, key", [
    ("bootstrap", "sample_size = -3", "[bootstrap].sample_size"),
    ("embedding", "num_actors = -2", "[embedding].num_actors"),
    ("embedding", "batch_size = -1", "[embedding].batch_size"),
    ("analysis", "top_k = -1", "[analysis].top_k"),
    ("analysis", "psi = 0", "[analysis].psi"),
    ("analysis", "psi = 101", "[analysis].psi"),
    ("evaluation", 'baseline = "nope"', "[evaluation].baseline"),
    ("evaluation", "k = 0", "[evaluation].k"),
])
def test_out_of_range_keys_fail_at_load_naming_file_and_key(tmp_path, section, line, key):
    path = tmp_path / "study.toml"
    path.write_text(BASE + f"[{section}]\n{line}\n")
    with pytest.raises(ConfigError) as err:
        load_study(path)
    assert str(path) in str(err.value) and key in str(err.value)


def test_model_batch_size_zero_names_the_model_entry(tmp_path):
    path = tmp_path / "study.toml"
    path.write_text(BASE.replace('ref = "minilm"', 'ref = "minilm"\nbatch_size = 0'))
    with pytest.raises(ConfigError, match=r"models\[0\]\.batch_size"):
        load_study(path)


def test_a_valid_baseline_loads(tmp_path):
    path = tmp_path / "study.toml"
    path.write_text(BASE + '[evaluation]\nbaseline = "minilm"\n')
    assert load_study(path).evaluation.baseline == "minilm"
