"""How a study's entries become inputs of the evaluation: a ``[[models]]`` entry becomes a
cached :class:`~adaptlab.embedding.cache.Embedder`, a ``[[datasets]]`` entry a loaded
:class:`~adaptlab.data.Dataset`.

Relative paths (dataset paths, model directories) resolve against the project root
(:meth:`~adaptlab.study.schema.Study.resolve_path`), for plain and scale studies alike.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adaptlab.data import load_dataset
from adaptlab.data.dataset import Dataset
from adaptlab.data.loaders import check_dataset_options, parse_dataset_spec
from adaptlab.data.pairs import check_pair_columns
from adaptlab.embedding.cache import Embedder, EmbeddingCache
from adaptlab.errors import ConfigError, DataError
from adaptlab.models import check_backend_packages, pick_backend, resolve_model
from adaptlab.models.inference import AUTO, Inference
from adaptlab.models.variants import BI_ENCODER_BACKEND, BM25_REF, COLBERT_BACKEND
from adaptlab.runtime.progress import progress_enabled
from adaptlab.study.schema import DatasetSection, ModelSection, Study, is_store_uri

__all__ = [
    "EvalDataset",
    "check_inputs",
    "embedding_backends",
    "embedding_cache",
    "load_dataset_section",
    "log",
    "model_embedder",
    "pool_settings",
]


def log(msg: str) -> None:
    """A progress line on stderr (the CLI's stdout carries only results); silent under
    ``--quiet`` (``ADAPTLAB_PROGRESS=0``, see :func:`adaptlab.runtime.progress.progress_enabled`)."""
    if progress_enabled():
        print(msg, file=sys.stderr, flush=True)


def pool_settings(study: Study) -> dict[str, Any]:
    """The study's ``[embedding]`` settings every embedder takes (dense and ColBERT alike): Ray or
    in-process, number of actors, placement time-out and the in-process size bound."""
    emb = study.embedding
    return {
        "use_ray": emb.use_ray,
        "num_actors": emb.num_actors or None,
        "placement_timeout": emb.placement_timeout,
        "local_below": emb.local_below,
    }


def embedding_cache(study: Study) -> EmbeddingCache | None:
    """The shared embedding cache of the study's ``[embedding]`` section (``cache``,
    ``cache_max_gib``): a relative folder resolves against the project root as the study's other
    paths; errors name the file (:meth:`~adaptlab.embedding.cache.EmbeddingCache.resolve`)."""
    section = study.embedding
    root = section.cache.strip()
    if root and root.lower() != "off" and not is_store_uri(root):
        root = str(study.resolve_path(root))
    return EmbeddingCache.resolve(root, section.cache_max_gib, where=f"{study.source}: [embedding]")


def model_embedder(
    model: ModelSection,
    study: Study,
    cache_dir: EmbeddingCache | Path | None,
    *,
    exact: bool = False,
    inference: Inference | None = None,
) -> Embedder:
    """The cached :class:`~adaptlab.embedding.cache.Embedder` of a ``[[models]]`` entry, with the
    study's ``[embedding]`` settings (batch size, Ray or in-process, number of actors, placement
    time-out, backend and precision: :meth:`~adaptlab.study.schema.Study.inference`). ``exact``: on
    torch in fp32 whatever the settings (the adaptation data's hard-negative mining, so adapted
    models never depend on an evaluation's precision); ``inference``: this backend and precision
    whatever the settings (the mining of ``[adapt].mining_precision``)."""
    ref = resolve_model(study.resolve_model_ref(model.ref))
    if inference is None:
        inference = Inference() if exact else study.inference(model, pick_backend(ref, model.backend or "auto"))
    options = {
        "backend": model.backend,
        "query_instruction": model.query_instruction,
        "document_instruction": model.document_instruction,
        "max_seq_length": model.max_seq_length,
        "trust_remote_code": model.trust_remote_code,
        **model.options,
        **inference.options(),
    }
    return Embedder(
        ref,
        options=options,
        batch_size=study.embedding.batch_size or model.batch_size,
        cache_dir=cache_dir,
        **pool_settings(study),
    )


def embedding_backends(study: Study, embedders: Mapping[str, object]) -> dict[str, dict[str, str]]:
    """The runs' record of the backend and precision that computed each dense system's vectors:
    ``{"embedding_backends": {system: "openvino fp32", ...}}``. Every dense system is listed when
    the study asks for ``"auto"`` anywhere (what it resolved to here), else only those not on torch
    fp32; a study on torch fp32 alone records nothing, so its configuration, and the run ids keyed
    on it, stay what they were before backends existed."""
    asked_auto = study.embedding.backend == AUTO or any(m.embedding_backend == AUTO for m in study.models)
    used = {name: Inference.of(e.options) for name, e in embedders.items() if isinstance(e, Embedder)}
    shown = {name: f"{inf.backend} {inf.precision}" for name, inf in used.items() if asked_auto or not inf.is_default}
    if asked_auto and shown:
        log("[adaptlab] embedding backend auto: " + ", ".join(sorted(set(shown.values()))))
    return {"embedding_backends": shown} if shown else {}


def check_inputs(study: Study) -> None:
    """Validate the study's inputs whole before any work: every ``[[datasets]]`` spec names a
    known format and an existing path, every ``[[models]]`` entry resolves (alias, local
    directory or hub id). Raises :class:`ConfigError` naming the study file, the entry and
    what is expected, so a study never fails on its second dataset after the first one's
    results were stored. (Files are read when their dataset's turn comes: a malformed file
    still fails then, and the error says which datasets were already committed.)"""
    for i, ds in enumerate(study.datasets):
        where = f"{study.source}: [[datasets]] entry {i + 1} ({ds.name or ds.spec!r})"
        try:
            fmt, rest = parse_dataset_spec(ds.spec)
        except ConfigError as e:
            raise ConfigError(f"{where}: {e}") from e
        if fmt != "beir" and ds.split != "test":
            raise ConfigError(
                f"{where}: split {ds.split!r}: format {fmt!r} has a single set of questions; "
                "split is only available for beir datasets (leave it at 'test')"
            )
        if fmt == "synthetic":
            continue
        if not rest:
            raise ConfigError(f"{where}: spec {ds.spec!r} names no path after '{fmt}:'")
        path = Path(rest).expanduser()
        path = path if path.is_absolute() else study.resolve_path(rest)
        if not path.exists():
            raise ConfigError(
                f"{where}: {path} does not exist; expected the dataset's {fmt} file or folder "
                "(relative paths resolve against the project root); nothing was run"
            )
        _check_columns(fmt, path, ds, where)
    for i, m in enumerate(study.models):
        try:
            ref = resolve_model(study.resolve_model_ref(m.ref))
            kind = BM25_REF if ref.backend == BM25_REF else pick_backend(ref, m.backend or "auto")
            inf = study.inference(m, kind)
            if kind != BI_ENCODER_BACKEND and not inf.is_default:
                raise ConfigError(
                    f"embedding_backend {inf.backend!r} and precision {inf.precision!r} apply to "
                    f"sentence-transformers models; this is a {kind!r} model, which runs on torch in "
                    'fp32: set embedding_backend = "torch" and precision = "fp32" in this entry'
                )
            if kind != BM25_REF:  # the model's extra (colbert, flag, fast): one line before any work
                check_backend_packages(kind, inf.backend)
            if ref.backend == BM25_REF:
                from adaptlab.retrieval.lexical import BM25Settings

                BM25Settings.from_options(m.options)
            elif m.backend == COLBERT_BACKEND or any(k in m.options for k in ("search", "nbits")):
                from adaptlab.models.colbert import search_options  # light: no torch or colbert import

                search_options(m.options)
        except ConfigError as e:
            raise type(e)(
                f"{study.source}: [[models]] entry {i + 1} ({m.name or m.ref!r}): {e}; nothing was run"
            ) from e


def _check_columns(fmt: str, path: Path, ds: DatasetSection, where: str) -> None:
    """A pairs file's header holds the columns its options name (read now, not when its turn comes)."""
    if fmt != "pairs" or not path.is_file():
        return
    try:
        check_dataset_options(ds.spec, **ds.reader_options())
        check_pair_columns(path, **ds.reader_options())
    except (ConfigError, DataError) as e:
        raise ConfigError(f"{where}: {e}; nothing was run") from e


def load_dataset_section(ds: DatasetSection, study: Study) -> Dataset:
    """Load a ``[[datasets]]`` entry; relative paths resolve against the project root."""
    spec = ds.spec
    fmt, sep, path = spec.partition(":")
    if sep and fmt != "synthetic" and path and not Path(path).expanduser().is_absolute():
        spec = f"{fmt}:{study.resolve_path(path)}"
    log(f"[adaptlab] loading dataset {ds.name!r} ({ds.spec}, split {ds.split})")
    return load_dataset(spec, split=ds.split, name=ds.name, **ds.reader_options())


@dataclass(frozen=True)
class EvalDataset:
    """One dataset of the evaluation loop: its store name, spec and split, and how to load it
    (a ``[[datasets]]`` entry loads when its turn comes; the held-out set is already built)."""

    name: str
    spec: str
    split: str
    load: Callable[[], Dataset]

    @classmethod
    def from_section(cls, ds: DatasetSection, study: Study) -> EvalDataset:
        return cls(ds.name, ds.spec, ds.split, lambda: load_dataset_section(ds, study))

    @classmethod
    def loaded(cls, name: str, spec: str, dataset: Dataset, split: str = "test") -> EvalDataset:
        return cls(name, spec, split, lambda: dataset)
