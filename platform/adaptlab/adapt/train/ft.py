"""FT: contrastive fine-tuning of a bi-encoder on (query, positive, hard negatives) triplets.

Loss (sentence-transformers ``MultipleNegativesRankingLoss``, InfoNCE with in-batch negatives):
for a batch of B triplets with n hard negatives each, the candidate documents of every query are
all B positives and all B*n hard negatives of the batch, and

    L = -(1/B) sum_i log( exp(s * cos(q_i, p_i)) / sum_{d in candidates} exp(s * cos(q_i, d)) )

with scale ``s = 1 / temperature`` (default 20, temperature 0.05). Fine-tuning the base model
gives the FT variant; starting from a PT artifact gives PT-FT (Roychowdhury et al., "Towards
Understanding Domain Adapted Sentence Embeddings for Document Retrieval", section 2.4).

Choices the paper leaves open: ``num_negatives`` hard negatives are taken per triplet in the
order given (a triplet with fewer repeats its own negatives cyclically; one with none is an
error when ``num_negatives > 0``); queries (and passages, for models that have one) keep the
model's instruction prefix (BGE style, see :func:`resolve_prefixes`), which is saved with the
adapted model as its ``prompts``; the loop is the plain seeded loop of :mod:`.trainloop`.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from adaptlab.adapt.prep.triplets import read_triplets
from adaptlab.adapt.train.addressing import package_versions
from adaptlab.adapt.train.artifacts import Artifact
from adaptlab.adapt.train.base_model import describe_base
from adaptlab.adapt.train.checks import LoopResult, run_label
from adaptlab.adapt.train.config import AUTO, LoopConfig, check_positive
from adaptlab.adapt.train.knobs import pick_device
from adaptlab.adapt.train.loop import Checkpointing, Examples, run_loop
from adaptlab.adapt.train.run_options import TrainRun, TrainRunOptions, train_run
from adaptlab.adapt.train.third_party import load_sentence_model
from adaptlab.adapt.train.writer import ArtifactWriter, claim
from adaptlab.errors import ConfigError, DataError
from adaptlab.models.instructions import resolve_instructions
from adaptlab.models.resolve import MODEL_ALIASES
from adaptlab.models.variants import FT, PT, PT_FT

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "FTConfig",
    "TripletRows",
    "coerce_triplets",
    "fine_tune_model",
    "resolve_prefixes",
    "save_prefixes",
    "saved_prompts",
    "train_ft",
    "training_rows_fingerprint",
]

_KNOWN_QUERY_PREFIXES = (
    # (substring of the lower-cased model id, query instruction) -- from the models' cards
    ("llm-embedder", "Represent this query for retrieving relevant documents: "),
    ("bge-large-en", "Represent this sentence for searching relevant passages: "),
    ("bge-base-en", "Represent this sentence for searching relevant passages: "),
    ("bge-small-en", "Represent this sentence for searching relevant passages: "),
)
_LLM_EMBEDDER_KEY = "Represent this document for retrieval: "

TripletRows = list[tuple[str, str, tuple[str, ...]]]


@dataclass(frozen=True, kw_only=True)
class FTConfig(LoopConfig):
    """Fine-tuning hyperparameters (all enter the artifact key): the loop's
    (:class:`~adaptlab.adapt.train.config.LoopConfig`), the loss's ``num_negatives`` and ``scale``,
    ``max_seq_length`` (None: the model's) and the instruction prefixes."""

    learning_rate: float = 2e-5
    epochs: int = 1
    batch_size: int = 32
    num_negatives: int = 1
    scale: float = 20.0
    max_seq_length: int | None = None
    query_prefix: str | None = AUTO
    passage_prefix: str | None = AUTO

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive("FTConfig", "scale", self.scale)
        if self.num_negatives < 0:
            raise ConfigError(f"FTConfig.num_negatives = {self.num_negatives!r}: expected >= 0")

    @property
    def temperature(self) -> float:
        return 1.0 / self.scale


def coerce_triplets(data: Any, *, source: str = "triplets") -> TripletRows:
    """Triplets as ``[(query, positive, (negative, ...)), ...]`` from a triplets Parquet file
    (:func:`adaptlab.adapt.prep.triplets.write_triplets`), a pyarrow Table or pandas DataFrame with
    columns ``query, positive, negatives``, a list of objects with those attributes (a
    dataclass), of mappings with those keys, or of 3-tuples."""
    rows: TripletRows = []
    if isinstance(data, (str, os.PathLike)):
        source = os.fspath(data)
        data = read_triplets(source)[0]
    if hasattr(data, "column_names") and hasattr(data, "to_pylist"):  # pyarrow.Table
        missing = {"query", "positive", "negatives"} - set(data.column_names)
        if missing:
            raise DataError(f"{source}: missing columns {sorted(missing)}; expected query, positive, negatives")
        items: Iterable[Any] = data.select(["query", "positive", "negatives"]).to_pylist()
    elif hasattr(data, "to_dict") and hasattr(data, "columns"):  # pandas.DataFrame
        items = data.to_dict("records")
    else:
        items = data
    for i, item in enumerate(items):
        if isinstance(item, Mapping):
            try:
                q, p, negs = item["query"], item["positive"], item["negatives"]
            except KeyError as e:
                raise DataError(f"{source}: row {i} lacks key {e}; expected query, positive, negatives") from e
        elif hasattr(item, "query") and hasattr(item, "positive"):
            q, p, negs = item.query, item.positive, getattr(item, "negatives", ())
        elif isinstance(item, (tuple, list)) and len(item) == 3:
            q, p, negs = item
        else:
            raise DataError(f"{source}: row {i} is {type(item).__name__}; expected (query, positive, negatives)")
        if negs is None:
            negs = ()
        if isinstance(negs, str):
            negs = (negs,)
        if not isinstance(q, str) or not isinstance(p, str) or not q or not p:
            raise DataError(f"{source}: row {i}: query and positive must be non-empty strings")
        negs_t = tuple(negs)
        if not all(isinstance(n, str) for n in negs_t):
            raise DataError(f"{source}: row {i}: negatives must be strings")
        rows.append((q, p, negs_t))
    if not rows:
        raise DataError(f"{source}: no triplets; expected at least one (query, positive, negatives)")
    return rows


def training_rows_fingerprint(rows: TripletRows) -> str:
    """SHA-256 (64 hex digits) over the JSON of each ``[query, positive, [negatives]]`` in order:
    the exact texts a trainer sees, in the order it sees them (the order decides the batches and
    so the in-batch negatives); it enters artifact keys and manifests. Not
    :func:`adaptlab.adapt.prep.triplets.triplets_fingerprint`, which names a triplet file's
    content (ids included, in any order) in its provenance."""
    h = hashlib.sha256()
    for q, p, negs in rows:
        h.update(json.dumps([q, p, list(negs)], ensure_ascii=False).encode())
        h.update(b"\n")
    return h.hexdigest()


def _alias_instructions(model_id: str) -> tuple[str | None, str | None]:
    """(query, document) instructions of a known model alias or hub id (adaptlab.models)."""
    key = model_id.lower()
    alias = MODEL_ALIASES.get(key) or next((a for a in MODEL_ALIASES.values() if a.hub_id.lower() == key), None)
    return resolve_instructions(alias.options) if alias is not None else (None, None)


def resolve_prefixes(
    query_prefix: str | None,
    passage_prefix: str | None,
    prompts: Mapping[str, str] | None = None,
    model_id: str = "",
) -> tuple[str, str]:
    """The instructions put before queries and before passages (positives and negatives).

    ``None`` -> ``""``; any string other than ``"auto"`` is used as is; ``"auto"`` -> the
    model's saved prompt (``prompts["query"]``; ``prompts["document"]`` or ``["passage"]``),
    else the instruction of a known model (``adaptlab.models`` aliases: BGE English models put
    "Represent this sentence for searching relevant passages: " before queries; llm-embedder
    uses its "qa" task prefixes for both), else, for ids naming a BGE English model or
    llm-embedder, the same instructions, else ``""``.
    """
    prompts = prompts or {}
    alias_q, alias_d = _alias_instructions(model_id) if model_id else (None, None)
    low = model_id.lower()
    guess_q = next((text for needle, text in _KNOWN_QUERY_PREFIXES if needle in low), None)
    guess_d = _LLM_EMBEDDER_KEY if "llm-embedder" in low else None

    def pick(given: str | None, saved: str | None, alias: str | None, guess: str | None) -> str:
        if given is None:
            return ""
        if given != AUTO:
            return given
        return saved or alias or guess or ""

    saved_d = prompts.get("document") or prompts.get("passage")
    return (
        pick(query_prefix, prompts.get("query"), alias_q, guess_q),
        pick(passage_prefix, saved_d, alias_d, guess_d),
    )


def _negative_columns(rows: TripletRows, idx: np.ndarray, n: int) -> list[list[str]]:
    cols: list[list[str]] = [[] for _ in range(n)]
    for i in idx:
        negs = rows[int(i)][2]
        if n and not negs:
            raise DataError(
                f"triplet {int(i)} has no negatives but num_negatives = {n}; "
                "mine negatives first or set num_negatives = 0"
            )
        for j in range(n):
            cols[j].append(negs[j % len(negs)])
    return cols


def _example_lengths(model: Any, rows: TripletRows, n_negatives: int, prefixes: tuple[str, str]) -> np.ndarray:
    """The ``length_buckets`` sort key of each triplet (:func:`adaptlab.adapt.train.loop.epoch_order`),
    in tokens truncated as the model truncates: its longest passage (the positive or a negative a
    batch uses), ties broken by its total (query + passages). Each text column of a batch pads to
    its own longest text, and the passage columns are the long ones: a batch costs about the
    longest passage times the columns, so triplets whose passages are all short go together."""
    tokenizer, limit = model.tokenizer, int(model.max_seq_length or 512)

    def count(texts: list[str]) -> np.ndarray:
        ids = tokenizer(texts, truncation=True, max_length=limit)["input_ids"]
        return np.array([len(x) for x in ids], dtype=np.int64)

    q_prefix, p_prefix = prefixes
    passages = [count([p_prefix + r[1] for r in rows])]
    for j in range(n_negatives):
        passages.append(count([p_prefix + r[2][j % len(r[2])] if r[2] else "" for r in rows]))
    total = count([q_prefix + r[0] for r in rows]) + np.sum(passages, axis=0)
    return np.max(passages, axis=0) + total / (1.0 + total.max())


def _tokenizer_call(model: Any) -> Callable[[list[str]], dict[str, Any]]:
    fn = getattr(model, "preprocess", None)
    if fn is None:  # sentence-transformers < 5.7
        fn = model.tokenize
    return fn


def _mnrl(model: Any, scale: float) -> Any:
    try:
        losses = importlib.import_module("sentence_transformers.sentence_transformer.losses")
    except ImportError:  # sentence-transformers < 5.7
        losses = importlib.import_module("sentence_transformers.losses")
    return losses.MultipleNegativesRankingLoss(model, scale=float(scale))


def fine_tune_model(
    model: Any,
    rows: TripletRows,
    config: FTConfig,
    *,
    seed: int,
    prefixes: tuple[str, str],
    device: Any,
    checkpoints: Checkpointing | None = None,
    label: str = "FT",
) -> LoopResult:
    """Fine-tune a loaded ``SentenceTransformer`` in place (the kernel of :func:`train_ft`).

    The loop's checks (:mod:`adaptlab.adapt.train.loop`: enough steps, a learning rate, weights
    that move) apply, with ``label`` naming the run in their messages."""
    import torch

    if config.max_seq_length is not None:
        model.max_seq_length = int(config.max_seq_length)
    loss_fn = _mnrl(model, config.scale)
    tokenize = _tokenizer_call(model)
    dev = torch.device(device)

    def to_dev(features: dict[str, Any]) -> dict[str, Any]:
        return {k: (v.to(dev) if torch.is_tensor(v) else v) for k, v in features.items()}

    q_prefix, p_prefix = prefixes

    def compute_loss(idx: np.ndarray) -> Any:
        queries = [q_prefix + rows[int(i)][0] for i in idx]
        positives = [p_prefix + rows[int(i)][1] for i in idx]
        columns = [queries, positives] + [
            [p_prefix + t for t in col] for col in _negative_columns(rows, idx, config.num_negatives)
        ]
        features = [to_dev(tokenize(col)) for col in columns]
        return loss_fn(features, None)

    lengths = _example_lengths(model, rows, config.num_negatives, prefixes) if config.length_buckets else None
    return run_loop(
        model,
        examples=Examples(len(rows), compute_loss, lengths),
        optim=config.optim(),
        seed=seed,
        device=dev,
        checkpoints=checkpoints,
        label=label,
    )


def train_ft(
    base_model: str | os.PathLike[str] | Artifact,
    triplets: Any,
    *,
    artifact_root: str | os.PathLike[str],
    config: FTConfig | None = None,
    run: TrainRun | None = None,
    **options: Unpack[TrainRunOptions],
) -> Artifact:
    """Fine-tune ``base_model`` on ``triplets`` and store the result as an artifact.

    ``base_model`` is a sentence-transformers directory, an alias (``minilm``) or an artifact;
    when it is a PT artifact the variant is ``pt-ft``, otherwise ``ft``. Returns at once (no
    training) when an artifact with the same inputs exists. A run killed mid-way resumes from
    its last checkpoint (every ``checkpoint_every`` steps and after every epoch; None: none) on
    the next call. ``run`` or its fields as keywords (``seed``, ``scale``, ``device``,
    ``checkpoint_every``, ``on_checkpoint``): :class:`~adaptlab.adapt.train.run_options.TrainRun`.
    """
    config = config or FTConfig()
    run = train_run("train_ft", run, options)
    seed, scale = run.seed, run.scale
    rows = coerce_triplets(triplets)
    base = describe_base(base_model)
    variant = PT_FT if base.parent and base.parent.get("variant") == PT else FT
    # prefixes come from the saved prompts and the root model's id, without loading weights
    prefixes = resolve_prefixes(
        config.query_prefix, config.passage_prefix, saved_prompts(base.path), str(base.root.get("id", ""))
    )
    hyper = config.key_dict() | {
        "query_prefix": prefixes[0],
        "passage_prefix": prefixes[1],
        "temperature": config.temperature,
    }
    inputs = {
        "variant": variant,
        "base_model": base.key_inputs(),
        "data": {
            "kind": "triplets",
            "scale": None if scale is None else str(scale),
            "fingerprint": training_rows_fingerprint(rows),
            "count": len(rows),
        },
        "hyperparameters": hyper,
        "seed": int(seed),
        "packages": package_versions(),
    }
    info = base.info()
    writer = ArtifactWriter(
        artifact_root,
        label=str(base.root.get("id", base.label)),
        variant=variant,
        scale=scale,
        inputs=inputs,
        info=info,
    )
    with claim(writer) as done:
        if done is not None:
            return done
        writer.fetch_checkpoint()  # a run interrupted on another node resumes where it was
        dev = pick_device(run.device)
        model = load_sentence_model(base.path, dev)
        result = fine_tune_model(
            model,
            rows,
            config,
            seed=seed,
            prefixes=prefixes,
            device=dev,
            checkpoints=Checkpointing(
                writer.checkpoint_dir,
                run.checkpoint_every,
                run.checkpoint_every is not None,
                writer.checkpoint_hook(run.on_checkpoint),
            ),
            label=run_label(variant, base.label, scale, len(rows), "triplets"),
        )
        save_prefixes(model, prefixes)
        model.save(str(writer.model_dir), safe_serialization=True)
        return writer.commit(training=result.summary() | {"device": dev})


def save_prefixes(model: Any, prefixes: tuple[str, str]) -> None:
    """Record the training prefixes as the model's ``prompts["query"]`` / ``["document"]`` (when
    not already set) so that encoding the adapted model later uses the same instructions."""
    for name, text in zip(("query", "document"), prefixes):
        if text and not model.prompts.get(name):
            model.prompts[name] = text


def saved_prompts(path: str | os.PathLike[str]) -> dict[str, str]:
    """The ``prompts`` saved in a sentence-transformers directory (without loading weights)."""
    file = Path(path) / "config_sentence_transformers.json"
    try:
        prompts = json.loads(file.read_text()).get("prompts") or {}
    except (OSError, json.JSONDecodeError, AttributeError):
        prompts = {}
    return {str(k): str(v) for k, v in prompts.items()} if isinstance(prompts, dict) else {}
