"""The memory a training stage needs, declared to Ray so that no node runs more stages than fit.

Every training task declares ``memory=`` (bytes) from :func:`estimate_stage_memory`:

    estimate = process + static + safety * activations

- ``process`` = :data:`PROCESS_BYTES` per Python process (Python, torch, transformers and
  sentence-transformers imported, the model loaded; measured 575 MB RSS for all-MiniLM-L6-v2 on
  CPU). ColBERT FT trains in a child process: two of them.
- ``static`` = ``bytes_per_param * P`` for ``P`` parameters (counted from the safetensors
  headers, no weights loaded), fp32: weights 4 + gradients 4 + AdamW moments 8 + the snapshot of
  the weight-change check 4 + a checkpoint being written 4 = 24 bytes. PT holds the sentence
  model and the masked-LM model (+4); merging holds three models and no optimizer (12).
- ``activations``: what the backward pass keeps, per encoder layer and per sequence of ``s``
  tokens in fp32 (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
  Transformer Models", section 4.1, counted at 4 bytes a value and 1 byte a dropout mask):

      per layer = s * (38 h + 8 i) + 13 a s^2   bytes

  for hidden size ``h``, intermediate size ``i`` and ``a`` heads (the ``s^2`` term: attention
  scores, their softmax, its dropout mask and output). A step of FT encodes ``batch`` queries at
  ``min(s, 64)`` tokens (questions are short) and ``batch * (1 + num_negatives)`` passages at
  ``s = max_seq_length`` (texts are padded to the longest of the batch, at most ``s``); PT
  ``batch`` chunks at ``s`` plus the masked-LM head's logits (``12 V`` bytes a token for a
  vocabulary of ``V``); ColBERT FT ``batch`` queries at ``query_maxlen`` and ``2 * batch``
  passages at ``doc_maxlen``.
- ``safety`` = :data:`SAFETY` covers what the count leaves out (allocator slack, tokenizer and
  loss buffers). Measured peak RSS of all-MiniLM-L6-v2 FT on CPU (1 thread, one negative,
  20-token queries, passages filling ``s``; this machine, 2026-11) against the estimate:

  ========  ======  =============  ========  =====
  batch     s       measured peak  estimate  ratio
  ========  ======  =============  ========  =====
  8         256     2.70 GB        3.6 GB    1.33
  16        256     4.56 GB        5.8 GB    1.27
  32        256     9.33 GB        10.4 GB   1.11
  32        128     3.87 GB        4.9 GB    1.27
  PT 16     256     4.39 GB        5.5 GB    1.25
  ========  ======  =============  ========  =====

  (the activations alone were 1.0-1.2x the count). The estimate is meant to lie between 1x and
  2x the peak: above it, so that declared stages fit, and not so far above that it serialises
  stages needlessly.

Gradient checkpointing (``gradient_checkpointing = true``: transformers recomputes each encoder
layer in the backward pass; non-reentrant, the RNG state restored, so the numbers do not change)
keeps only each layer's input, ``4 s h`` bytes a layer and sequence, and at the backward pass's
peak one layer of one forward pass is recomputed (FT encodes queries, positives and each
negative column in separate passes of ``batch`` sequences; PT one pass). That layer costs its
activations and their gradients, 2 x its count, and measured peaks need more (the allocator keeps
the previous layer's freed copy): :data:`RECOMPUTED` = 3 layers. Measured (same setting as above,
20-token queries): MiniLM FT batch 32 at 256 tokens peaked at 3.21 GB (9.33 GB without), estimate
3.6 GB (1.13x); the tiny test model's step (batch 64, 3 negatives, 64 tokens) added 108 MB, its
total estimate is 1.2x its peak. The masked-LM head of PT is not checkpointed.

Why a 22M-parameter model needs 9 GB: the weights and optimizer are 0.5 GB; the rest is the
activations of 64 passages x 256 tokens x 6 layers, about 60% of it the 12 heads' 256 x 256
attention matrices (the default batch of 32 triplets with one negative). Lower ``batch_size``
(linear) or ``max_seq_length`` (quadratic) to shrink it, or turn gradient checkpointing on
(9.33 -> 3.21 GB at batch 32, for one more forward pass a step).

A stage whose estimate exceeds the largest node's ``memory`` resource declares that instead (it
then runs alone on such a node) and a warning says so; :func:`declared_memory`.

``gradient_checkpointing = "auto"`` (opt-in; the default is false) is decided per PT / FT stage by the stage
scheduler, from the study and the largest node's memory ``M`` only (:func:`decide_checkpointing`):

    on  <=>  (2 * E(off) > M  and  2 * E(on) <= M)  or  E(off) > M >= E(on)

for the stage's estimates ``E`` without and with checkpointing: a stage that would leave no room
for a second one of its size (and so run alone) trains with checkpointing when that lets two run
side by side (measured: FT at batch 32 x 256 tokens, 9.3 -> 3.2 GB peak on a 15.6 GB node, for
one more forward pass a step), and a stage too large for the node trains with it when that makes
it fit. Otherwise, on GPU stages (their training memory is the GPU's, not the node's ``M``), and
wherever no scheduler decides (training in process, sweep trials, an explicit
``memory_per_job``), "auto" trains without it.
"""

from __future__ import annotations

import json
import logging
import os
import struct
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from adaptlab.adapt.train.config import AUTO
from adaptlab.errors import AdaptlabError
from adaptlab.models.variants import COLBERT_FT, FT, PT

__all__ = [
    "PROCESS_BYTES",
    "RECOMPUTED",
    "SAFETY",
    "EncoderShape",
    "MemoryEstimate",
    "TrainingResourceError",
    "activation_bytes",
    "checkpointed_bytes",
    "decide_checkpointing",
    "declared_memory",
    "estimate_stage_memory",
    "largest_node_memory",
    "recomputed_bytes",
    "transformer_dir",
    "without_auto",
]

log = logging.getLogger(__name__)

PROCESS_BYTES = 700 * 2**20
"""One training process before its first step (measured 575 MB RSS with all-MiniLM-L6-v2)."""

SAFETY = 1.3
"""Factor on the counted activations (measured activations were 1.0-1.2x the count)."""

RECOMPUTED = 3.0
"""With gradient checkpointing: the backward pass's peak over the kept layer inputs, in layers of
one forward pass (counted: the recomputed layer and its gradients, 2; fitted to measured peaks: 3,
module docstring)."""

QUERY_TOKENS = 64
"""Tokens counted for an FT query (questions are short; capped at the passages' length)."""

_STATIC_BYTES = {FT: 24, PT: 28, "merge": 12, COLBERT_FT: 24}
_GB = 1e9


class TrainingResourceError(AdaptlabError):
    """A training stage that could not run: killed for memory or lost with its node more often
    than allowed. The message names the variant, the scale and the setting to lower."""


def transformer_dir(model_path: Path) -> Path:
    """The folder of a sentence-transformers model's first (transformer) module."""
    try:
        modules = json.loads((model_path / "modules.json").read_text())
        first = min(modules, key=lambda m: int(m.get("idx", 0)))
        return model_path / str(first.get("path", ""))
    except (OSError, json.JSONDecodeError, ValueError):
        return model_path


def _safetensors_parameters(path: Path) -> int:
    """Floating-point values in one ``.safetensors`` file, from its JSON header only."""
    with open(path, "rb") as handle:
        (size,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(size))
    count = 0
    for name, entry in header.items():
        if name == "__metadata__" or not str(entry.get("dtype", "")).startswith(("F", "BF")):
            continue
        n = 1
        for dim in entry.get("shape", ()):
            n *= int(dim)
        count += n
    return count


@dataclass(frozen=True)
class EncoderShape:
    """What the estimate needs of a transformer encoder (from its files, no weights loaded)."""

    parameters: int
    layers: int
    hidden: int
    heads: int
    intermediate: int
    vocab: int
    max_seq_length: int

    @classmethod
    def read(cls, model_path: str | os.PathLike[str]) -> EncoderShape:
        """The shape of the sentence-transformers (or plain transformers) model at ``model_path``;
        raises ``OSError`` / ``ValueError`` when its files do not say."""
        root = Path(model_path)
        files = [p for p in root.rglob("*.safetensors") if "checkpoint" not in str(p.relative_to(root))]
        if not files:
            raise OSError(f"{root}: no .safetensors weights to count")
        config = json.loads((transformer_dir(root) / "config.json").read_text())
        hidden = int(config["hidden_size"])
        return cls(
            parameters=sum(_safetensors_parameters(p) for p in files),
            layers=int(config["num_hidden_layers"]),
            hidden=hidden,
            heads=int(config["num_attention_heads"]),
            intermediate=int(config.get("intermediate_size", 4 * hidden)),
            vocab=int(config.get("vocab_size", 30522)),
            max_seq_length=_sentence_max_length(root, config),
        )


def _json_value(file: Path, key: str) -> int | None:
    try:
        value = json.loads(file.read_text()).get(key)
    except (OSError, json.JSONDecodeError, AttributeError):
        return None
    return int(value) if isinstance(value, (int, float)) and 0 < value < 1e6 else None


def _sentence_max_length(root: Path, config: dict[str, Any]) -> int:
    """The sentence model's ``max_seq_length`` (``sentence_bert_config.json``; sentence-transformers
    5.7 keeps it as the tokenizer's ``model_max_length``), at most the position embeddings'."""
    positions = int(config.get("max_position_embeddings", 512))
    for folder in (root, transformer_dir(root)):
        for file, key in (
            ("sentence_bert_config.json", "max_seq_length"),
            ("tokenizer_config.json", "model_max_length"),
        ):
            value = _json_value(folder / file, key)
            if value is not None:
                return min(value, positions)
    return positions


def _per_layer(shape: EncoderShape, tokens: int) -> int:
    """``s * (38 h + 8 i) + 13 a s^2``: one layer's activations for one sequence of ``s`` tokens."""
    s = int(tokens)
    return s * (38 * shape.hidden + 8 * shape.intermediate) + 13 * shape.heads * s * s


def activation_bytes(shape: EncoderShape, sequences: int, tokens: int) -> int:
    """Bytes the backward pass keeps for ``sequences`` sequences of ``tokens`` tokens (module
    docstring: ``layers * (s * (38 h + 8 i) + 13 a s^2)`` a sequence)."""
    return int(sequences) * shape.layers * _per_layer(shape, tokens)


def checkpointed_bytes(shape: EncoderShape, sequences: int, tokens: int) -> int:
    """With gradient checkpointing, what the forward pass keeps for ``sequences`` sequences of
    ``tokens`` tokens: each layer's input only, ``layers * 4 s h`` bytes a sequence."""
    return int(sequences) * shape.layers * 4 * int(tokens) * shape.hidden


def recomputed_bytes(shape: EncoderShape, sequences: int, tokens: int) -> int:
    """With gradient checkpointing, the peak of the backward pass on top of the kept inputs: one
    layer of one forward pass (``sequences`` of ``tokens`` tokens) recomputed, with its gradients:
    ``RECOMPUTED * (s * (38 h + 8 i) + 13 a s^2)`` a sequence."""
    return int(RECOMPUTED * int(sequences) * _per_layer(shape, tokens))


@dataclass(frozen=True)
class MemoryEstimate:
    """An estimate in bytes and its parts (module docstring)."""

    total: int
    process: int
    static: int
    activations: int
    what: str

    def describe(self) -> str:
        """``"10.6 GB (process 0.7, weights and optimizer 0.5, activations 9.4 GB for ...)"``."""
        return (
            f"{self.total / _GB:.1f} GB (process {self.process / _GB:.1f}, weights and optimizer "
            f"{self.static / _GB:.1f}, activations {self.activations / _GB:.1f} GB for {self.what})"
        )


def _estimate(stage: str, shape: EncoderShape, activations: int, what: str, processes: int = 1) -> MemoryEstimate:
    process = processes * PROCESS_BYTES
    static = _STATIC_BYTES[stage] * shape.parameters
    scaled = int(SAFETY * activations)
    return MemoryEstimate(process + static + scaled, process, static, scaled, what)


def _checkpointing(config: Any) -> bool:
    """Whether ``config`` trains with checkpointing: only ``True`` does ("auto" undecided does not)."""
    return getattr(config, "gradient_checkpointing", False) is True


def _kept(shape: EncoderShape, sequences: int, tokens: int, checkpointing: bool) -> int:
    """What a forward pass keeps for the backward pass: every activation, or each layer's input."""
    return (checkpointed_bytes if checkpointing else activation_bytes)(shape, sequences, tokens)


def _ft_activations(shape: EncoderShape, config: Any) -> tuple[int, str]:
    s = min(int(config.max_seq_length or shape.max_seq_length), shape.max_seq_length)
    q = min(s, QUERY_TOKENS)
    b = int(config.batch_size)
    passages = b * (1 + int(config.num_negatives))
    ckpt = _checkpointing(config)
    total = _kept(shape, b, q, ckpt) + _kept(shape, passages, s, ckpt)
    if ckpt:  # queries, positives and each negative column are forward passes of b sequences
        total += recomputed_bytes(shape, b, s)
    what = f"{b} queries x {q} + {passages} passages x {s} tokens"
    return total, what + (", gradient checkpointing" if ckpt else "")


def _pt_activations(shape: EncoderShape, config: Any) -> tuple[int, str]:
    s = min(int(config.max_seq_length), shape.max_seq_length)
    b = int(config.batch_size)
    ckpt = _checkpointing(config)
    head = b * s * (12 * shape.vocab + 12 * shape.hidden)  # the masked-LM head is not checkpointed
    total = _kept(shape, b, s, ckpt) + head + (recomputed_bytes(shape, b, s) if ckpt else 0)
    return total, f"{b} chunks x {s} tokens" + (", gradient checkpointing" if ckpt else "")


def _colbert_activations(shape: EncoderShape, config: Any) -> tuple[int, str]:
    b = int(config.batch_size)
    q, d = int(config.query_maxlen), int(config.doc_maxlen)
    total = activation_bytes(shape, b, q) + activation_bytes(shape, 2 * b, d)
    return total, f"{b} queries x {q} + {2 * b} passages x {d} tokens"


def estimate_stage_memory(stage: str, shape: EncoderShape, config: Any = None) -> MemoryEstimate:
    """The memory of one stage (``"pt"``, ``"ft"``, ``"colbert-ft"`` or ``"merge"``) of a model of
    ``shape`` with its ``config`` (:class:`PTConfig`, :class:`FTConfig`, :class:`ColBERTFTConfig`;
    unused for ``merge``)."""
    if stage == "merge":
        return _estimate(stage, shape, 0, "no training")
    if stage == FT:
        return _estimate(stage, shape, *_ft_activations(shape, config))
    if stage == PT:
        return _estimate(stage, shape, *_pt_activations(shape, config))
    if stage == COLBERT_FT:
        return _estimate(stage, shape, *_colbert_activations(shape, config), processes=2)
    raise ValueError(f"stage {stage!r}: expected one of ft, pt, colbert-ft, merge")


def declared_memory(estimate: MemoryEstimate, node_memory: float | None, label: str) -> int:
    """The bytes to declare: the estimate, capped at the largest node's ``memory`` resource
    (``node_memory``; None: unknown) with a warning (the stage then runs alone on that node)."""
    if node_memory is None or node_memory <= 0 or estimate.total <= node_memory:
        return int(estimate.total)
    log.warning(
        "%s needs about %s, more than the largest node's memory resource (%.1f GB): it runs alone on "
        "a node and may be killed for memory; lower its batch_size or max_seq_length, or set [adapt]."
        "gradient_checkpointing = true, if it is",
        label,
        estimate.describe(),
        node_memory / _GB,
    )
    return int(node_memory)


def without_auto(config: Any) -> Any:
    """``config`` with ``gradient_checkpointing = "auto"`` replaced by ``False`` (where no scheduler
    decides); any other config, or None, unchanged."""
    if getattr(config, "gradient_checkpointing", None) != AUTO:
        return config
    return replace(config, gradient_checkpointing=False)


def decide_checkpointing(stage: str, shape: EncoderShape, config: Any, node_memory: float | None, label: str) -> Any:
    """``config`` of a ``stage`` of a model of ``shape`` with ``gradient_checkpointing`` decided:
    ``"auto"`` becomes ``True`` when ``2 * E(off) > M`` and ``2 * E(on) <= M`` (two stages fit
    side by side only with it), or when ``E(off) > M >= E(on)`` (the stage fits the node only with
    it), for the estimates ``E`` (:func:`estimate_stage_memory`) and the largest node's memory
    ``M`` (``node_memory``; None: unknown or a GPU stage, off), else ``False`` (module docstring);
    ``True`` / ``False`` are kept. Logs one INFO line, under ``label``, when it turns it on."""
    if getattr(config, "gradient_checkpointing", None) != AUTO:
        return config
    off = without_auto(config)
    plain = estimate_stage_memory(stage, shape, off).total
    if node_memory is None or node_memory <= 0 or 2 * plain <= node_memory:
        return off
    on = replace(config, gradient_checkpointing=True)
    saved = estimate_stage_memory(stage, shape, on).total
    if 2 * saved <= node_memory:
        why = "two stages fit"
    elif plain > node_memory >= saved:
        why = "the stage fits"  # without it, it would not fit the node even alone
    else:
        return off
    log.info(
        "%s: gradient checkpointing on: %.1f GB -> %.1f GB, so %s a %.1f GB node",
        label,
        plain / _GB,
        saved / _GB,
        why,
        node_memory / _GB,
    )
    return on


def largest_node_memory(ray: Any) -> float | None:
    """The largest ``memory`` resource of the live Ray nodes (None when Ray does not say)."""
    try:
        sizes = [float(n.get("Resources", {}).get("memory", 0)) for n in ray.nodes() if n.get("Alive")]
    except Exception:  # noqa: BLE001 - an estimate must never stop training
        return None
    return max(sizes) if sizes else None
