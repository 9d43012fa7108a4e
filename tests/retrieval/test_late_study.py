"""Late interaction inside a study: a ``[[models]]`` entry with ``backend = "colbert"`` is evaluated
by the one evaluation loop (token vectors, exact MaxSim) beside a bi-encoder, paired on the same
queries; the scale study's ``[adapt.colbert]`` section and ColBERT variants are validated."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("colbert", reason="ColBERT needs colbert-ai (pip install ragatouille==0.0.9)")

from adaptlab.errors import ConfigError  # noqa: E402
from adaptlab.study import load_study  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny_colbert_dir(tiny_model, tmp_path_factory):
    from adaptlab.models.colbert import colbert_from_bert

    with pytest.warns(UserWarning, match="UNTRAINED"):  # over the session's tiny BERT
        return colbert_from_bert(
            tiny_model.parent / (tiny_model.name + "-hf"), tmp_path_factory.mktemp("cb") / "ckpt", dim=16, doc_maxlen=48
        )


def test_colbert_models_entry_runs_beside_a_bi_encoder(tiny_colbert_dir, tmp_path):
    from adaptlab.study import run_study

    text = f"""
[study]
name = "late"
store = "{tmp_path / "store"}"
[[datasets]]
name = "syn"
spec = "synthetic:n_documents=8,seed=1"
[[models]]
name = "lex"
ref = "hash:64"
[[models]]
name = "cb"
ref = "{tiny_colbert_dir}"
backend = "colbert"
batch_size = 16
[evaluation]
metrics = ["acc@1", "ndcg@10"]
k = 10
[bootstrap]
n_resamples = 200
[embedding]
use_ray = false
[analysis]
thresholds = true
isotropy = true
"""
    (tmp_path / "s.toml").write_text(text)
    outcome = run_study(load_study(tmp_path / "s.toml"))
    [ds] = outcome.datasets
    cb, lex = ds.records["cb"], ds.records["lex"]
    assert cb.meta["similarity"] == "maxsim" and lex.meta["similarity"] == "inner product"
    assert cb.query_ids == lex.query_ids and cb.random_ids == lex.random_ids  # paired, same random docs
    assert np.all(np.isfinite(cb.sim_gold)) and cb.k == 10
    assert {"cb", "lex"} <= set(ds.summary.systems)
    cache = list((Path(os.environ["ADAPTLAB_EMBEDDING_CACHE"]) / "tokens").glob("*.tokens.offsets.npy"))
    assert len(cache) == 2  # documents and queries of the ColBERT, cached by content hash
    assert all(c.with_name(c.name.replace(".offsets.", ".vectors.")).is_file() for c in cache)
    again = run_study(load_study(tmp_path / "s.toml"))  # from the cache: the same records
    np.testing.assert_array_equal(again.datasets[0].records["cb"].topk_scores, cb.topk_scores)


def test_adapt_colbert_section_is_validated(tmp_path):
    from adaptlab.study.adapt_config import parse_adapt_section

    study = load_study(REPO / "jobs" / "scale_study_small.toml")
    settings = parse_adapt_section(study, store=tmp_path)
    assert "colbert-base" in settings.variants and "colbert-ft" in settings.variants
    assert settings.colbert is not None and settings.colbert.label == "colbert"
    assert settings.colbert.ft.max_steps == 16 and settings.colbert.section.backend == "colbert"
    assert settings.as_dict()["colbert"]["ft"]["doc_maxlen"] == 64
    bad = (REPO / "jobs" / "scale_study_small.toml").read_text().replace("max_steps = 16", "max_stpes = 16")
    (tmp_path / "bad.toml").write_text(bad)
    with pytest.raises(ConfigError, match=r"adapt.colbert.*max_stpes"):
        parse_adapt_section(load_study(tmp_path / "bad.toml"), store=tmp_path)


def test_scale_study_names_colbert_systems(tmp_path):
    """colbert-base and colbert-ft-s<n> sit beside the bi-encoder systems; FT artifacts are
    evaluated as ColBERT checkpoints (backend colbert), the base with from_bert."""
    from adaptlab.adapt.train.artifacts import Artifact
    from adaptlab.study.adapt_config import parse_adapt_section
    from adaptlab.study.adaptation import _systems

    study = load_study(REPO / "jobs" / "scale_study_small.toml")
    settings = parse_adapt_section(study, store=tmp_path)
    arts = [
        Artifact(tmp_path / "a", {"key": "k1", "variant": "ft"}),
        Artifact(tmp_path / "b", {"key": "k2", "variant": "colbert-ft"}),
    ]
    systems = _systems(study, settings, [("ft", 10, None), ("colbert-ft", 10, None)], arts)
    by_name = {s.name: s for s in systems}
    assert list(by_name) == ["minilm-base", "colbert-base", "minilm-ft-s10", "colbert-ft-s10"]
    assert by_name["colbert-base"].section.backend == "colbert"
    assert by_name["colbert-base"].section.options["from_bert"] is True
    ft = by_name["colbert-ft-s10"]
    assert (ft.variant, ft.n_documents, ft.section.backend) == ("colbert-ft", 10, "colbert")
    assert ft.section.ref == str(tmp_path / "b" / "model")
    assert by_name["minilm-ft-s10"].section.backend == "sentence-transformers"
