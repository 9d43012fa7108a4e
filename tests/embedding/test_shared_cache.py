"""The shared embedding cache (issue 22): one cache outside any store, keyed by model revision,
options, texts and adaptlab version, bounded by least-recently-used eviction, shown and cleared by
``adaptlab cache``; a study into a fresh store after a first run embeds nothing."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import numpy as np
import pytest

import adaptlab._version
from adaptlab.embedding import cache as cache_mod
from adaptlab.embedding.cache import CacheFile, Embedder, EmbeddingCache
from adaptlab.errors import ConfigError
from adaptlab.models.hashing import HashingEncoder
from s3servers import running

REPO = Path(__file__).resolve().parents[2]
TEXTS = ["alpha beta", "gamma", "delta eps zeta"]


class CountingFactory:
    """factory(device) -> a hashing encoder; counts the texts it was asked to encode."""

    def __init__(self) -> None:
        self.texts = 0

    def __call__(self, device=None):  # noqa: ANN001
        factory = self

        class _Counting(HashingEncoder):
            def _encode(self, texts, kind, batch_size):  # noqa: ANN001
                factory.texts += len(texts)
                return super()._encode(texts, kind, batch_size)

        return _Counting(8)


def _embedder(cache, factory: CountingFactory | None = None, **options) -> Embedder:
    emb = Embedder(factory or CountingFactory(), options=options, batch_size=4, use_ray=False, cache_dir=cache)
    emb._revision = "rev-1"  # no model files: the revision is given
    return emb


def _fill(cache: EmbeddingCache, names: list[str], nbytes: int = 800) -> None:
    folder = cache.folder("embeddings")
    for name in names:
        folder.save(name, np.zeros(nbytes // 4, np.float32))


def test_a_second_embedder_on_the_shared_cache_encodes_nothing(tmp_path, caplog):
    cache = EmbeddingCache(tmp_path / "c")
    first = _embedder(cache)
    out = first(TEXTS, "document")
    assert first.ref.texts == 3 and first.from_cache == 0
    second = _embedder(cache)  # another study, another store: the same cache
    with caplog.at_level(logging.INFO, logger="adaptlab.embedding.cache"):
        again = second(TEXTS, "document")
    assert second.ref.texts == 0 and second.from_cache == 3
    np.testing.assert_array_equal(again, out)
    assert f"embeddings: 3 of 3 texts from cache {tmp_path / 'c'}" in caplog.text
    assert [p.parent.name for p in (tmp_path / "c").rglob("*.npy")] == ["embeddings"]


def test_another_adaptlab_version_or_kind_misses(tmp_path, monkeypatch):
    cache = EmbeddingCache(tmp_path)
    _embedder(cache)(TEXTS, "document")
    other_kind = _embedder(cache)
    other_kind(TEXTS, "query")
    monkeypatch.setattr(adaptlab._version, "__version__", "999.0")
    other_version = _embedder(cache)
    other_version(TEXTS, "document")
    assert [e.ref.texts for e in (other_kind, other_version)] == [3, 3]
    monkeypatch.undo()
    same = _embedder(cache)
    same(TEXTS, "document")
    assert same.ref.texts == 0


def test_every_option_and_the_revision_are_in_the_key():
    def key(revision: str = "rev-1", **options) -> str:
        emb = Embedder(
            "unused", options={"backend": "sbert", "max_seq_length": 128, **options}, batch_size=4, use_ray=False
        )
        emb._revision = revision
        return emb.cache_key(TEXTS, "document")

    variants = [
        key(),
        key(max_seq_length=256),
        key(query_instruction="q: "),
        key(normalize=False),
        key(pooling="cls"),
        key(revision="rev-2"),
    ]
    assert len(set(variants)) == len(variants)
    assert key() == key()


def test_two_sizes_of_one_encoder_never_share_vectors(tmp_path):
    """``hash:16`` and ``hash:32`` have one revision (``hash-v1``); the reference's own options
    (its ``dim``) are in the key, so the second size embeds instead of reading the first's
    16-column vectors (a real run gave nDCG@10 0.113 instead of 0.170 before)."""
    from adaptlab.models import resolve_model

    cache = EmbeddingCache(tmp_path)
    small, large = (
        Embedder(resolve_model(f"hash:{d}"), options={}, batch_size=4, use_ray=False, cache_dir=cache) for d in (16, 32)
    )
    assert small.cache_key(TEXTS, "document") != large.cache_key(TEXTS, "document")
    assert small(TEXTS, "document").shape[1] == 16
    assert large(TEXTS, "document").shape[1] == 32 and large.from_cache == 0


def test_the_bound_evicts_the_least_recently_used(tmp_path):
    cache = EmbeddingCache(tmp_path, max_bytes=2500)  # room for two 928-byte files, not three
    _fill(cache, ["a.npy", "b.npy"])
    folder = tmp_path / "embeddings"
    os.utime(folder / "a.npy", (100, 100))
    os.utime(folder / "b.npy", (200, 200))
    assert cache.folder("embeddings").load("a.npy") is not None  # a read: a is now the most recent
    _fill(cache, ["c.npy"])  # over the bound: b, the least recently used, goes
    assert sorted(p.name for p in folder.iterdir()) == ["a.npy", "c.npy"]
    assert cache.summary()["bytes"] <= 2500


def test_eviction_tolerates_vanished_files_and_removes_stale_temporaries(tmp_path):
    cache = EmbeddingCache(tmp_path, max_bytes=10**6)
    _fill(cache, ["a.npy"])
    stale = tmp_path / "embeddings" / ".b.npy.123.abcd.tmp"  # a killed writer's
    fresh = tmp_path / "embeddings" / ".c.npy.124.abcd.tmp"  # a writer still at work
    stale.write_bytes(b"x" * 10)
    fresh.write_bytes(b"x" * 10)
    os.utime(stale, (time.time() - 7200,) * 2)
    assert cache.evict() == (1, 10)
    assert not stale.exists() and fresh.exists() and (tmp_path / "embeddings" / "a.npy").exists()
    gone = CacheFile(str(tmp_path / "embeddings" / "gone.npy"), 5, 0.0)  # evicted by another process
    assert cache._delete([gone]) == (0, 0)
    assert cache.summary()["entries"] == 1  # temporaries are not entries


def test_concurrent_writers_and_evictors_never_fail(tmp_path, caplog):
    from concurrent.futures import ThreadPoolExecutor

    cache = EmbeddingCache(tmp_path, max_bytes=5 * 928)  # five of the 928-byte files fit

    def writer(w: int) -> None:
        folder = cache.folder("embeddings")
        for i in range(15):
            folder.save(f"w{w}-{i % 5}.npy", np.full(200, w, np.float32))  # rewrites race with evictions
            got = folder.load(f"w{(w + 1) % 4}-{i % 5}.npy")  # a file another thread may be evicting
            assert got is None or got.shape == (200,)

    with caplog.at_level(logging.WARNING, logger="adaptlab.embedding.cache"):
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(writer, range(4)))
    assert "cannot" not in caplog.text  # no read or write was turned into a warning
    assert cache.summary()["bytes"] <= 5 * 928
    assert not [p for p in (tmp_path / "embeddings").iterdir() if p.name.startswith(".")]


def test_clear_all_or_older_than(tmp_path):
    cache = EmbeddingCache(tmp_path)
    _fill(cache, ["old.npy", "new.npy"])
    os.utime(tmp_path / "embeddings" / "old.npy", (time.time() - 10 * 86400,) * 2)
    assert cache.clear(older_than_s=7 * 86400)[0] == 1
    assert [p.name for p in (tmp_path / "embeddings").iterdir()] == ["new.npy"]
    assert cache.clear()[0] == 1 and cache.summary()["entries"] == 0


def test_a_uri_cache_is_bounded_too(tmp_path):
    cache = EmbeddingCache((tmp_path / "u").as_uri(), max_bytes=1000)
    emb = _embedder(cache)
    out = emb(TEXTS, "document")
    hit = _embedder(cache)
    np.testing.assert_array_equal(hit(TEXTS, "document"), out)
    assert hit.ref.texts == 0
    _fill(cache, ["x.npy", "y.npy"])  # 928 bytes each: only the newest fits
    assert [p.name for p in (tmp_path / "u" / "embeddings").iterdir()] == ["y.npy"]


def test_where_the_cache_is(tmp_path, monkeypatch):
    for var in ("ADAPTLAB_EMBEDDING_CACHE", "ADAPTLAB_CACHE", "XDG_CACHE_HOME", "ADAPTLAB_CACHE_MAX_GIB"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert EmbeddingCache.resolve().root == tmp_path / "home" / ".cache" / "adaptlab"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert EmbeddingCache.resolve().root == tmp_path / "xdg" / "adaptlab"
    monkeypatch.setenv("ADAPTLAB_CACHE", str(tmp_path / "ac"))
    assert EmbeddingCache.resolve().root == tmp_path / "ac"
    monkeypatch.setenv("ADAPTLAB_EMBEDDING_CACHE", "s3://bucket/cache")
    assert EmbeddingCache.resolve().root == "s3://bucket/cache"
    assert EmbeddingCache.resolve(str(tmp_path / "study")).root == tmp_path / "study"  # the study's setting wins
    assert EmbeddingCache.resolve("off") is None
    assert EmbeddingCache.resolve().max_bytes == 10 * 1024**3
    monkeypatch.setenv("ADAPTLAB_CACHE_MAX_GIB", "0.5")
    assert EmbeddingCache.resolve().max_bytes == 1024**3 // 2
    assert EmbeddingCache.resolve(max_gib=2).max_bytes == 2 * 1024**3


def test_bad_bounds_name_the_setting(monkeypatch):
    with pytest.raises(ConfigError, match=r"s\.toml: \[embedding\]\.cache_max_gib: expected a number of GiB"):
        EmbeddingCache.resolve("", -1.0, where="s.toml: [embedding]")
    monkeypatch.setenv("ADAPTLAB_CACHE_MAX_GIB", "lots")
    with pytest.raises(ConfigError, match=r"\$ADAPTLAB_CACHE_MAX_GIB='lots': expected a positive number of GiB"):
        EmbeddingCache.resolve()


def test_cli_shows_and_clears(tmp_path, cli):
    cache = EmbeddingCache(tmp_path)
    _fill(cache, ["a.npy", "b.npy"])
    shown = cli("cache", "--root", str(tmp_path))
    assert shown.returncode == 0, shown.stderr
    assert f"root     {tmp_path}" in shown.stdout
    assert "entries  2 (embeddings 2, tokens 0)" in shown.stdout
    assert "1.8 KiB of 10.0 GiB" in shown.stdout
    refused = cli("cache", "clear", "--root", str(tmp_path))  # no terminal to ask: nothing deleted
    assert refused.returncode == 1 and "add --yes" in refused.stderr and cache.summary()["entries"] == 2
    cleared = cli("cache", "clear", "--yes", "--root", str(tmp_path))
    assert cleared.returncode == 0 and "deleted 2 files (1.8 KiB)" in cleared.stdout
    assert cache.summary()["entries"] == 0
    bad = cli("cache", "clear", "--older-than", "soon", "--root", str(tmp_path))
    assert bad.returncode == 2 and "expected an age such as 7d" in bad.stderr


_STUDY = """
[study]
name = "cached"
seed = 0

[[datasets]]
name = "synthetic"
spec = "synthetic:n_documents=12,seed=0"

[[models]]
name = "hashed"
ref = "hash:32"

[evaluation]
metrics = ["acc@1", "ndcg@10"]
k = 10

[bootstrap]
n_resamples = 50

[embedding]
use_ray = false
cache = "{cache}"
"""


def _count_embedding(monkeypatch) -> list[int]:
    """Texts embedded (not answered from the cache) in this test, counted at the one call site."""
    counted = [0]
    real = cache_mod.embed_texts

    def counting(texts, *args, **kwargs):  # noqa: ANN001
        counted[0] += len(texts)
        return real(texts, *args, **kwargs)

    monkeypatch.setattr(cache_mod, "embed_texts", counting)
    return counted


def _metric_rows(store: Path) -> list[tuple]:
    from adaptlab import results

    handle = results.open(store)
    try:
        rows = handle.metrics().to_pylist()
    finally:
        handle.close()
    keep = ("dataset", "system", "compared_to", "measure", "value", "ci_low", "ci_high", "p_value")
    assert rows, f"no metric rows in {store}"
    return sorted(tuple(str(r.get(k)) for k in keep) for r in rows)


def test_a_study_into_a_fresh_store_reuses_the_cache(tmp_path, monkeypatch, capsys):
    from adaptlab.study import load_study, run_study

    (tmp_path / "s.toml").write_text(_STUDY.format(cache=tmp_path / "cache"))
    counted = _count_embedding(monkeypatch)
    run_study(load_study(tmp_path / "s.toml"), store=tmp_path / "store1")
    first = counted[0]
    run_study(load_study(tmp_path / "s.toml"), store=tmp_path / "store2")
    assert first > 0 and counted[0] == first  # the second store embedded nothing
    assert f"texts from the embedding cache {tmp_path / 'cache'}" in capsys.readouterr().err
    assert not (tmp_path / "store1" / ".cache").exists()
    assert _metric_rows(tmp_path / "store1") == _metric_rows(tmp_path / "store2")


def test_a_relative_cache_folder_resolves_against_the_project_root(tmp_path, monkeypatch):
    from adaptlab.study import load_study
    from adaptlab.study.inputs import embedding_cache  # the study resolves it and hands down a path

    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "s.toml").write_text(_STUDY.format(cache="caches/emb"))
    monkeypatch.chdir(tmp_path / "jobs")
    cache = embedding_cache(load_study(tmp_path / "jobs" / "s.toml"))
    assert cache is not None and cache.root == tmp_path / "caches" / "emb"
    (tmp_path / "jobs" / "s.toml").write_text(_STUDY.format(cache="off"))
    assert embedding_cache(load_study(tmp_path / "jobs" / "s.toml")) is None


def test_a_bad_cache_setting_fails_before_any_work(tmp_path):
    from adaptlab.study import load_study, run_study

    text = _STUDY.format(cache="").replace('cache = ""', "cache_max_gib = -2.0")
    (tmp_path / "s.toml").write_text(text)
    with pytest.raises(ConfigError, match=r"s\.toml: \[embedding\]\.cache_max_gib"):
        run_study(load_study(tmp_path / "s.toml"), store=tmp_path / "store")
    assert not (tmp_path / "store").exists()


@pytest.mark.slow
def test_quickstart_into_a_fresh_store_embeds_nothing(tmp_path, monkeypatch, caplog):
    """The acceptance of issue 22 (cache part): jobs/quickstart.toml (minilm), fewer resamples and
    in-process embedding for speed (the texts are under the pool's threshold either way)."""
    from adaptlab.study import load_study, run_study

    monkeypatch.setenv("ADAPTLAB_EMBEDDING_CACHE", str(tmp_path / "cache"))
    study = load_study(REPO / "jobs" / "quickstart.toml").with_overrides(use_ray=False, bootstrap={"n_resamples": 200})
    counted = _count_embedding(monkeypatch)
    run_study(study, store=tmp_path / "a")
    first = counted[0]
    with caplog.at_level(logging.INFO, logger="adaptlab.embedding.cache"):
        run_study(study, store=tmp_path / "b")
    assert first > 0 and counted[0] == first
    assert "embeddings: 0 of" not in caplog.text and "texts from cache" in caplog.text
    assert _metric_rows(tmp_path / "a") == _metric_rows(tmp_path / "b")


@pytest.fixture(scope="module")
def s3_env(tmp_path_factory):
    """A moto S3 server of this module's own on 127.0.0.1 (tests/s3servers.py, stopped by pid) with
    the bucket ``emb-cache``; yields the environment that points boto3 and pyarrow at it."""
    with running("moto", tmp_path_factory.mktemp("moto-data"), "emb-cache") as server:
        yield server.env


def test_a_cache_on_s3_is_shared_bounded_and_cleared(s3_env, monkeypatch, cli):
    for key, value in s3_env.items():
        monkeypatch.setenv(key, value)
    cache = EmbeddingCache("s3://emb-cache/shared", max_bytes=1000)
    out = _embedder(cache)(TEXTS, "document")
    other_node = _embedder(EmbeddingCache("s3://emb-cache/shared", max_bytes=1000))  # another driver
    np.testing.assert_array_equal(other_node(TEXTS, "document"), out)
    assert other_node.ref.texts == 0
    _fill(cache, ["x.npy", "y.npy"])  # 928 bytes each: only the newest fits
    assert [f.path.rsplit("/", 1)[1] for f in cache.files()] == ["y.npy"]
    shown = cli("cache", "--root", "s3://emb-cache/shared")
    assert "entries  1 (embeddings 1, tokens 0)" in shown.stdout, shown.stderr
    assert cli("cache", "clear", "--yes", "--root", "s3://emb-cache/shared").returncode == 0
    assert cache.files() == []


def test_an_array_over_10_mib_round_trips_on_s3_in_parts(s3_env, monkeypatch, caplog):
    """pyarrow's S3 writer fails above 10 MiB on moto 5.2.1; the cache writes through
    adaptlab.storage.objects (here in 5 MiB parts) and reads back the same bytes."""
    for key, value in s3_env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("ADAPTLAB_S3_PART_SIZE", str(5 << 20))
    big = np.random.default_rng(3).standard_normal((3000, 1024), dtype=np.float32)  # 11.7 MiB
    folder = EmbeddingCache("s3://emb-cache/big", max_bytes=1 << 30).folder("embeddings")
    parts = []
    client = folder._s3().client  # the cached boto3 client the cache writes through

    def seen(**_: object) -> None:
        parts.append(1)

    client.meta.events.register("after-call.s3.UploadPart", seen)
    try:
        with caplog.at_level(logging.WARNING, logger="adaptlab.embedding.cache"):
            folder.save("big.npy", big)
            assert folder.load("missing.npy") is None
            again = EmbeddingCache("s3://emb-cache/big").folder("embeddings").load("big.npy")  # another node
    finally:
        client.meta.events.unregister("after-call.s3.UploadPart", seen)
    assert caplog.records == []
    assert len(parts) == 3
    assert again is not None and again.dtype == np.float32
    np.testing.assert_array_equal(again, big)
