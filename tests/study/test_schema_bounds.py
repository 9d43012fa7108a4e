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


@pytest.mark.parametrize(
    "section, line, key",
    [
        ("bootstrap", "sample_size = -3", "[bootstrap].sample_size"),
        ("embedding", "num_actors = -2", "[embedding].num_actors"),
        ("embedding", "batch_size = -1", "[embedding].batch_size"),
        ("embedding", "placement_timeout = 0", "[embedding].placement_timeout"),
        ("embedding", "placement_timeout = -30", "[embedding].placement_timeout"),
        ("embedding", "placement_timeout = inf", "[embedding].placement_timeout"),
        ("embedding", 'placement_timeout = "5m"', "[embedding].placement_timeout"),
        ("embedding", "local_below = -1", "[embedding].local_below"),
        ("embedding", "local_below = 0.5", "[embedding].local_below"),
        ("analysis", "top_k = -1", "[analysis].top_k"),
        ("analysis", "psi = 0", "[analysis].psi"),
        ("analysis", "psi = 101", "[analysis].psi"),
        ("evaluation", 'baseline = "nope"', "[evaluation].baseline"),
        ("evaluation", "k = 0", "[evaluation].k"),
    ],
)
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


def test_placement_timeout_reaches_every_embedder_of_the_study(tmp_path, monkeypatch):
    """[embedding].placement_timeout goes to the dense embedding calls of a run (and so to the
    scale study's mining embedder, built the same way) and to ColBERT's token embedder."""
    import adaptlab.embedding.cache as cache
    from adaptlab.study.inputs import model_embedder
    from adaptlab.study.runner import system_embedder
    from adaptlab.study.schema import ModelSection

    path = tmp_path / "study.toml"
    path.write_text(
        BASE.replace('ref = "minilm"', 'ref = "hash:8"') + "[embedding]\nuse_ray = false\n"
        "placement_timeout = 42\n[bootstrap]\nn_resamples = 20\n"
    )
    study = load_study(path)
    seen: list[float | None] = []
    real = cache.embed_texts

    def spy(*args, **kwargs):
        seen.append(kwargs.get("placement_timeout"))
        return real(*args, **kwargs)

    monkeypatch.setattr(cache, "embed_texts", spy)
    dense = system_embedder(study.models[0], study, None)  # what run_study embeds each system with
    assert dense(["a text", "another text"], "document").shape == (2, 8)
    assert seen == [42.0]
    assert model_embedder(study.models[0], study, None).placement_timeout == 42.0
    tokens = system_embedder(ModelSection(ref="hash:8", name="cb", backend="colbert"), study, None)
    assert type(tokens).__name__ == "TokenEmbedder" and tokens.placement_timeout == 42.0
    path.write_text(BASE)  # left out: None, so the pool takes $ADAPTLAB_POOL_PLACEMENT_TIMEOUT or 180 s
    default = load_study(path)
    assert default.embedding.placement_timeout is None
    assert model_embedder(default.models[0], default, None).placement_timeout is None


def test_local_below_reaches_every_embedder_and_decides_where_a_call_runs(tmp_path):
    """[embedding].local_below (the quickstart sets 0, so its ~400 texts embed on the Ray actor
    it advertises) reaches the dense and the ColBERT embedders; left out, calls under 512 texts
    stay in-process."""
    from adaptlab.embedding.cache import LOCAL_BELOW
    from adaptlab.study.runner import system_embedder
    from adaptlab.study.schema import ModelSection

    path = tmp_path / "study.toml"
    path.write_text(BASE + "[embedding]\nlocal_below = 0\n")
    study = load_study(path)
    dense = system_embedder(study.models[0], study, None)
    assert dense.local_below == 0 and dense.wants_ray(1)
    tokens = system_embedder(ModelSection(ref="hash:8", name="cb", backend="colbert"), study, None)
    assert tokens.local_below == 0
    path.write_text(BASE)
    default = system_embedder(load_study(path).models[0], load_study(path), None)
    assert LOCAL_BELOW == 512 and default.local_below == 512
    assert not default.wants_ray(511) and default.wants_ray(512)
