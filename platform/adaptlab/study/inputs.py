"""How a study's entries become inputs of the evaluation: a ``[[models]]`` entry becomes a
cached :class:`~adaptlab.embedding.cache.Embedder`, a ``[[datasets]]`` entry a loaded
:class:`~adaptlab.data.Dataset`.

Relative paths (dataset paths, model directories) resolve against the project root
(:meth:`~adaptlab.study.schema.Study.resolve_path`), for plain and scale studies alike.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from adaptlab.data import load_dataset
from adaptlab.data.dataset import Dataset
from adaptlab.embedding.cache import Embedder
from adaptlab.embedding.pool import progress_enabled
from adaptlab.models import resolve_model
from adaptlab.study.schema import DatasetSection, ModelSection, Study

__all__ = ["EvalDataset", "load_dataset_section", "log", "model_embedder"]


def log(msg: str) -> None:
    """A progress line on stderr (the CLI's stdout carries only results); silent under
    ``--quiet`` (``ADAPTLAB_PROGRESS=0``, see :func:`adaptlab.embedding.pool.progress_enabled`)."""
    if progress_enabled():
        print(msg, file=sys.stderr, flush=True)


def model_embedder(model: ModelSection, study: Study, cache_dir: Path | None) -> Embedder:
    """The cached :class:`~adaptlab.embedding.cache.Embedder` of a ``[[models]]`` entry, with the
    study's ``[embedding]`` settings (batch size, Ray or in-process, number of actors)."""
    options = {
        "backend": model.backend, "query_instruction": model.query_instruction,
        "document_instruction": model.document_instruction, "max_seq_length": model.max_seq_length,
        "trust_remote_code": model.trust_remote_code, **model.options,
    }
    emb = study.embedding
    return Embedder(resolve_model(study.resolve_model_ref(model.ref)), options=options,
                    batch_size=emb.batch_size or model.batch_size, use_ray=emb.use_ray,
                    num_actors=emb.num_actors or None, cache_dir=cache_dir)


def load_dataset_section(ds: DatasetSection, study: Study) -> Dataset:
    """Load a ``[[datasets]]`` entry; relative paths resolve against the project root."""
    spec = ds.spec
    fmt, sep, path = spec.partition(":")
    if sep and fmt != "synthetic" and path and not Path(path).expanduser().is_absolute():
        spec = f"{fmt}:{study.resolve_path(path)}"
    log(f"[adaptlab] loading dataset {ds.name!r} ({ds.spec}, split {ds.split})")
    return load_dataset(spec, split=ds.split, name=ds.name, **ds.options)


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
