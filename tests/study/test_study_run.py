"""Study files and ``adaptlab run``: validation errors, ad-hoc runs, store contents, overrides."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from adaptlab.errors import ConfigError
from adaptlab.study import load_study, parse_study

REPO = Path(__file__).resolve().parents[2]


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "study.toml"
    p.write_text(text)
    return p


MINIMAL = """
[study]
name = "t"
[[datasets]]
spec = "synthetic:n_documents=6,seed=1"
[[models]]
ref = "hash:64"
"""


def test_jobs_parse():
    assert [m.ref for m in load_study(REPO / "jobs" / "quickstart.toml").models] == ["bm25", "minilm"]
    assert load_study(REPO / "jobs" / "scifact.toml").models[0].ref == "minilm"
    assert load_study(REPO / "jobs" / "scifact.toml").resolve_path("x") == REPO / "x"


@pytest.mark.parametrize(
    "patch,needle",
    [
        ("[study]\nnmae = 1\n", "[study]: unknown key 'nmae'"),
        ("[evaluation]\nk = 'ten'\n", "[evaluation].k: expected an integer"),
        ("[evaluation]\nmetrics = ['ndcg@x']\n", "[evaluation].metrics"),
        ("[bootstrap]\nn_resamples = 0\n", "[bootstrap].n_resamples"),
        ("[colour]\nx = 1\n", "unknown section 'colour'"),
        ("[[models]]\nref = 'hash:64'\nbatch_size = 'big'\n", "models[1].batch_size"),
    ],
)
def test_study_errors_name_the_key(tmp_path, patch, needle):
    text = MINIMAL.replace('[study]\nname = "t"\n', "") if patch.startswith("[study]") else MINIMAL
    with pytest.raises(ConfigError) as e:
        load_study(_write(tmp_path, text + patch))
    assert needle in str(e.value) and "study.toml" in str(e.value)


def test_invalid_toml_names_file(tmp_path):
    with pytest.raises(ConfigError, match="study.toml: invalid TOML"):
        load_study(_write(tmp_path, "[study\n"))


def test_duplicate_model_names_rejected():
    with pytest.raises(ConfigError, match="two entries are named"):
        parse_study({"datasets": [{"spec": "synthetic:"}], "models": [{"ref": "hash:8"}, {"ref": "hash:8"}]})


def test_adhoc_run_json_store_and_export(tmp_path, cli):
    store, run_file = tmp_path / "store", tmp_path / "out.trec"
    res = cli(
        "run",
        "--model",
        "hash:64",
        "--dataset",
        "synthetic:n_documents=6,seed=1",
        "--metrics",
        "acc@1,acc@5,ndcg@10",
        "--bootstrap",
        "200",
        "--no-ray",
        "--store",
        str(store),
        "--export-run",
        str(run_file),
        "--format",
        "json",
    )
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    sysname = next(iter(out["systems"]))
    assert set(out["systems"][sysname]) == {"acc@1", "acc@5", "ndcg@10"}
    assert out["n_queries"] > 20 and out["n_resamples"] == 200
    # the exported run re-scores to the same value with the library's trec_eval-exact metrics
    from adaptlab.data import load_dataset, read_trec_run
    from adaptlab.metrics import evaluate

    ds = load_dataset("synthetic:n_documents=6,seed=1")
    per_query = evaluate(ds.qrels, read_trec_run(run_file), "ndcg@10")
    assert per_query.mean()["ndcg@10"] == pytest.approx(out["systems"][sysname]["ndcg@10"]["value"], abs=1e-12)
    from adaptlab import results

    st = results.open(store)
    runs = st.runs().to_pylist()
    assert len(runs) == 1 and runs[0]["model_revision"] and runs[0]["dataset_fingerprint"] == ds.fingerprint()
    assert st.per_query().num_rows == out["n_queries"]
    assert st.metrics(measure="acc@5").num_rows == 1


def test_run_two_models_pairs_and_cli_overrides(tmp_path, cli):
    study = _write(
        tmp_path,
        MINIMAL + "[[models]]\nname = 'h16'\nref = 'hash:16'\n[embedding]\nuse_ray = false\n"
        "[bootstrap]\nn_resamples = 100\n",
    )
    res = cli(
        "run",
        str(study),
        "--store",
        str(tmp_path / "s"),
        "--metrics",
        "acc@5",
        "--bootstrap",
        "150",
        "--format",
        "json",
    )
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["n_resamples"] == 150 and len(out["pairs"]) == 1
    assert out["pairs"][0]["measure"] == "acc@5"


def test_run_missing_model_is_clear(tmp_path, cli):
    res = cli(
        "run",
        "--model",
        str(tmp_path / "no-such-model"),
        "--dataset",
        "synthetic:n_documents=3",
        "--no-ray",
        "--no-store",
    )
    assert res.returncode == 2
    assert "no-such-model" in res.stderr and "Traceback" not in res.stderr


def test_run_on_embedded_ray_with_analyses(tmp_path, shared_ray, cli):
    """On the session's embedded Ray (a fresh process starting its own is tests/runtime's claim):
    the actor pool embeds, and [analysis] rows reach the store."""
    study = _write(
        tmp_path,
        MINIMAL + "[embedding]\nnum_actors = 1\n[bootstrap]\nn_resamples = 100\n"
        "[analysis]\nthresholds = true\ncoe_roe = true\nisotropy = true\n",
    )
    res = cli("run", str(study), "--store", str(tmp_path / "s"))
    assert res.returncode == 0, res.stderr
    from adaptlab import results

    measures = set(results.open(tmp_path / "s").metrics().column("measure").to_pylist())
    assert {"threshold", "coe", "roe", "isoscore", "isotropy_mu", "acc@5"} <= measures


def test_bootstrap_seed_explicit_or_derived_from_the_study_seed():
    from adaptlab.stats import BootstrapConfig, derive_seed

    base = {"datasets": [{"spec": "synthetic:"}], "models": [{"ref": "hash:8"}]}
    explicit = parse_study({**base, "study": {"seed": 7}, "bootstrap": {"seed": 0, "n_resamples": 50}})
    assert explicit.bootstrap_config() == BootstrapConfig(n_resamples=50, seed=0)
    derived = parse_study({**base, "study": {"seed": 7}})
    assert derived.bootstrap_config().seed == derive_seed(7, "bootstrap") != derive_seed(8, "bootstrap")


def test_with_overrides_returns_a_new_study():
    study = parse_study(
        {"datasets": [{"spec": "synthetic:"}], "models": [{"ref": "hash:8"}], "bootstrap": {"n_resamples": 100}}
    )
    new = study.with_overrides(
        models=["hash:16"],
        datasets=["beir:data/scifact"],
        split="dev",
        metrics="acc@5",
        k=20,
        bootstrap={"n_resamples": 150, "seed": None},
        use_ray=False,
        store="",
    )
    assert [m.name for m in new.models] == ["16"] and new.datasets[0].name == "scifact"
    assert new.datasets[0].split == "dev" and new.evaluation.metrics == ["acc@5"] and new.evaluation.k == 20
    assert new.bootstrap.n_resamples == 150 and new.bootstrap.seed is None and not new.embedding.use_ray
    assert new.store_root() is None
    assert study.models[0].ref == "hash:8" and study.bootstrap.n_resamples == 100  # unchanged
    with pytest.raises(ConfigError, match=r"\[bootstrap\]\.n_resamples"):
        study.with_overrides(bootstrap={"n_resamples": "many"})


def test_public_api_is_light():
    code = (
        "import sys\nfrom adaptlab import load_study, run_study, submit_study, results, bootstrap_ci, "
        "paired_bootstrap, evaluate, BootstrapConfig\nimport adaptlab\n"
        "assert adaptlab.__all__ == sorted(adaptlab.__all__)\n"
        "print(sorted(m for m in ('torch', 'ray', 'transformers') if m in sys.modules))"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"
