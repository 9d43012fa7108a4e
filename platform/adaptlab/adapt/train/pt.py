"""PT: domain pre-training of a sentence encoder's transformer by masked language modelling.

The encoder weights of the sentence-transformers model initialise an ``AutoModelForMaskedLM``
(its MLM head comes from the checkpoint when present, else is freshly initialised from the
seed), which is trained on the domain chunks with the masked-token cross-entropy

    L = -(1/|M|) sum_{t in M} log p(x_t | x with M corrupted)

where each non-special token is selected into M with probability 0.15 and then replaced by
[MASK] (80%), a random token (10%) or left unchanged (10%) -- transformers'
``DataCollatorForLanguageModeling`` (Devlin et al., BERT). The trained encoder weights are then
put back under the model's original pooling and normalisation modules and saved as a sentence
encoder again. This is the PT variant of Roychowdhury et al., "Towards Understanding Domain
Adapted Sentence Embeddings for Document Retrieval" (section 2.4), who report that PT alone
lowers retrieval accuracy and PT followed by FT tightens the confidence intervals.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from adaptlab.adapt.train.addressing import chunks_fingerprint, package_versions
from adaptlab.adapt.train.artifacts import Artifact
from adaptlab.adapt.train.base_model import describe_base
from adaptlab.adapt.train.checks import LoopResult, run_label
from adaptlab.adapt.train.config import LoopConfig, check_at_least_one
from adaptlab.adapt.train.knobs import pick_device
from adaptlab.adapt.train.loop import Checkpointing, Examples, run_loop, seeded
from adaptlab.adapt.train.memory import transformer_dir
from adaptlab.adapt.train.run_options import TrainRun, TrainRunOptions, train_run
from adaptlab.adapt.train.third_party import load_sentence_model, quiet_third_party
from adaptlab.adapt.train.writer import ArtifactWriter, claim
from adaptlab.errors import ConfigError, DataError
from adaptlab.models.variants import PT

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["PTConfig", "build_mlm", "pretrain_model", "train_pt"]


@dataclass(frozen=True, kw_only=True)
class PTConfig(LoopConfig):
    """Masked-language-model pre-training hyperparameters (all enter the artifact key): the
    loop's (:class:`~adaptlab.adapt.train.config.LoopConfig`), ``mlm_probability`` and
    ``max_seq_length``."""

    learning_rate: float = 5e-5
    epochs: int = 1
    batch_size: int = 16
    mlm_probability: float = 0.15
    max_seq_length: int = 256

    def __post_init__(self) -> None:
        super().__post_init__()
        check_at_least_one("PTConfig", "max_seq_length", self.max_seq_length)
        if not 0.0 < self.mlm_probability < 1.0:
            raise ConfigError(
                f"PTConfig.mlm_probability = {self.mlm_probability!r}: expected 0 < value < 1 (BERT: 0.15)"
            )


def build_mlm(st_model: Any, model_path: Path, *, seed: int) -> tuple[Any, str]:
    """A masked-LM model whose encoder equals ``st_model``'s transformer; returns it and where its
    MLM head came from (``"checkpoint"`` or ``"initialised"``, seeded by ``seed``)."""
    import torch
    from transformers import AutoModelForMaskedLM

    encoder = st_model[0].auto_model
    head_seed = int(np.random.SeedSequence([int(seed), 2**31]).generate_state(1)[0])
    # "Some weights of BertForMaskedLM were not initialized" is expected: the head is recorded
    with seeded(head_seed, torch.device("cpu")), quiet_third_party():
        try:
            mlm, info = AutoModelForMaskedLM.from_pretrained(
                str(transformer_dir(model_path)), local_files_only=True, output_loading_info=True
            )
            head = "initialised" if info.get("missing_keys") else "checkpoint"
        except (OSError, ValueError):
            mlm = AutoModelForMaskedLM.from_config(encoder.config)
            head = "initialised"
    missing, _unexpected = mlm.base_model.load_state_dict(encoder.state_dict(), strict=False)
    if missing:
        raise ConfigError(
            f"cannot pre-train {model_path}: its encoder lacks weights {missing[:5]} of the "
            f"masked-LM architecture {type(mlm).__name__}"
        )
    mlm.tie_weights()
    return mlm, head


def pretrain_model(
    st_model: Any,
    model_path: Path,
    chunks: Sequence[str],
    config: PTConfig,
    *,
    seed: int,
    device: Any,
    checkpoints: Checkpointing | None = None,
    label: str = "PT",
) -> tuple[LoopResult, str]:
    """MLM-train the transformer of a loaded ``SentenceTransformer`` in place (the kernel of
    :func:`train_pt`); pooling and normalisation modules are untouched."""
    import torch
    from transformers import DataCollatorForLanguageModeling

    tokenizer = st_model[0].tokenizer
    if tokenizer.mask_token is None:
        raise ConfigError(f"{model_path}: the tokenizer has no mask token; MLM pre-training needs one")
    mlm, head = build_mlm(st_model, model_path, seed=seed)
    max_len = min(int(config.max_seq_length), int(st_model.max_seq_length or config.max_seq_length))
    encoded = tokenizer(list(chunks), truncation=True, max_length=max_len, return_special_tokens_mask=True)
    examples = [{k: encoded[k][i] for k in encoded.keys()} for i in range(len(chunks))]
    collator = DataCollatorForLanguageModeling(
        tokenizer=tokenizer, mlm=True, mlm_probability=float(config.mlm_probability), return_tensors="pt"
    )
    dev = torch.device(device)

    def compute_loss(idx: np.ndarray) -> Any:
        batch = collator([dict(examples[int(i)]) for i in idx])
        batch = {k: v.to(dev) for k, v in batch.items()}
        return mlm(**batch).loss

    lengths = np.array([len(ids) for ids in encoded["input_ids"]]) if config.length_buckets else None
    result = run_loop(
        mlm,
        examples=Examples(len(examples), compute_loss, lengths),
        optim=config.optim(),
        seed=seed,
        device=dev,
        checkpoints=checkpoints,
        label=label,
    )
    encoder = st_model[0].auto_model
    trained = {k: v.to(next(encoder.parameters()).device) for k, v in mlm.base_model.state_dict().items()}
    missing, _ = encoder.load_state_dict(trained, strict=False)
    if any("pooler" not in k for k in missing):
        raise ConfigError(f"PT could not copy encoder weights back: missing {missing[:5]}")
    return result, head


def train_pt(
    base_model: str | os.PathLike[str] | Artifact,
    chunks: Sequence[str],
    *,
    artifact_root: str | os.PathLike[str],
    config: PTConfig | None = None,
    run: TrainRun | None = None,
    **options: Unpack[TrainRunOptions],
) -> Artifact:
    """Pre-train ``base_model`` on the domain ``chunks`` (MLM) and store the sentence encoder as
    a PT artifact; returns at once when one with the same inputs exists, and resumes from the
    last checkpoint after a kill (every ``checkpoint_every`` steps and after every epoch; None:
    none). ``run`` or its fields as keywords (``seed``, ``scale``, ``device``,
    ``checkpoint_every``, ``on_checkpoint``): :class:`~adaptlab.adapt.train.run_options.TrainRun`."""
    config = config or PTConfig()
    run = train_run("train_pt", run, options)
    seed, scale = run.seed, run.scale
    texts = [str(c) for c in chunks if str(c).strip()]
    if not texts:
        raise DataError("PT needs domain chunks; got none (or only empty strings)")
    fingerprint, count = chunks_fingerprint(texts)
    base = describe_base(base_model)
    inputs = {
        "variant": PT,
        "base_model": base.key_inputs(),
        "data": {
            "kind": "chunks",
            "scale": None if scale is None else str(scale),
            "fingerprint": fingerprint,
            "count": count,
        },
        "hyperparameters": config.key_dict(),
        "seed": int(seed),
        "packages": package_versions(),
    }
    writer = ArtifactWriter(
        artifact_root,
        label=str(base.root.get("id", base.label)),
        variant=PT,
        scale=scale,
        inputs=inputs,
        info=base.info(),
    )
    with claim(writer) as done:
        if done is not None:
            return done
        writer.fetch_checkpoint()  # a run interrupted on another node resumes where it was
        dev = pick_device(run.device)
        model = load_sentence_model(base.path, dev)
        result, head = pretrain_model(
            model,
            base.path,
            texts,
            config,
            seed=seed,
            device=dev,
            checkpoints=Checkpointing(
                writer.checkpoint_dir,
                run.checkpoint_every,
                run.checkpoint_every is not None,
                writer.checkpoint_hook(run.on_checkpoint),
            ),
            label=run_label(PT, base.label, scale, len(texts), "chunks"),
        )
        model.save(str(writer.model_dir), safe_serialization=True)
        return writer.commit(training=result.summary() | {"device": dev, "mlm_head": head})
