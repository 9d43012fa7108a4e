"""The model knobs of a training run: the device, the precision of the forward pass, gradient
checkpointing and fused attention.

Speed options that change the numbers (off by default; measured in benchmarks/bench_train.py):
``precision = "bf16"`` runs the forward pass under ``torch.autocast(dtype=torch.bfloat16)``
(matrix products in bfloat16; weights, gradients, AdamW and the loss's backward stay fp32; only
on a device that computes bfloat16 natively: :func:`check_precision`), and ``fused_attention``
trains without attention-probability dropout (:func:`set_attention_dropout`), so PyTorch's fused
scaled-dot-product attention kernel runs, which with dropout falls back to an unfused path that
draws and stores a ``batch x heads x s x s`` dropout mask per layer. ``length_buckets`` (the
loop's :func:`~adaptlab.adapt.train.loop.epoch_order`) batches examples of similar token length
together, so a batch pads to less; it changes which examples share a batch (for FT: the
in-batch negatives). All three enter artifact keys when set. Gradient checkpointing
(:func:`set_gradient_checkpointing`) changes memory and time only.
"""

from __future__ import annotations

import contextlib
from typing import Any

from adaptlab.adapt.train.checks import TrainingCheckError
from adaptlab.runtime.hardware import bf16_support

__all__ = [
    "TRAINING_PRECISIONS",
    "autocast",
    "check_precision",
    "pick_device",
    "set_attention_dropout",
    "set_gradient_checkpointing",
]


TRAINING_PRECISIONS = ("fp32", "bf16")
"""Training precisions: fp32, or the forward pass under bfloat16 autocast (module docstring). Not
:data:`adaptlab.models.inference.PRECISIONS`, the precisions an encoder embeds in (int8 too)."""


def set_gradient_checkpointing(model: Any, on: bool, label: str = "training") -> int:
    """Turn transformers' gradient checkpointing on (or off) in every Hugging Face model inside
    ``model`` (a SentenceTransformer's transformer, PT's masked-LM model); how many were switched.

    Non-reentrant checkpoints, which restore the RNG state before recomputing a layer: dropout
    draws the same masks, so the loss and the weights are those of a run without it (to float
    rounding); only memory and time change. A model with nothing to switch on is an error."""
    switched = 0
    for module in model.modules():
        if not getattr(module, "supports_gradient_checkpointing", False):
            continue
        if on:
            module.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        else:
            module.gradient_checkpointing_disable()
        switched += 1
    if on and not switched:
        raise TrainingCheckError(
            f"{label}: gradient_checkpointing = true, but the model has no transformers "
            "module that supports it; set gradient_checkpointing = false"
        )
    return switched


def set_attention_dropout(model: Any, p: float, label: str = "training") -> float:
    """Set the attention-probability dropout of every transformers self-attention module inside
    ``model`` to ``p``; the value it had (the first module's).

    With ``p = 0`` the SDPA attention of BERT-like models calls PyTorch's fused
    scaled-dot-product kernel in training too (with dropout it takes the unfused path, which
    draws and stores a ``batch x heads x s x s`` mask a layer): option ``fused_attention``. The
    model's saved config is untouched. A model with no such module is an error."""
    before = None
    for module in model.modules():
        if not isinstance(getattr(module, "dropout_prob", None), float) or not hasattr(module, "dropout"):
            continue
        before = module.dropout_prob if before is None else before
        module.dropout_prob = float(p)  # the SDPA path's dropout_p
        module.dropout.p = float(p)  # the eager path's nn.Dropout
    if before is None:
        raise TrainingCheckError(
            f"{label}: fused_attention = true, but the model has no transformers "
            "self-attention module with attention dropout; set fused_attention = false"
        )
    return before


def check_precision(precision: str, device: Any, label: str = "training") -> None:
    """Raise :class:`TrainingCheckError` unless ``precision`` is fp32 or the device computes bf16
    natively (a CUDA GPU that supports it; a CPU with AVX512-BF16 or AMX)."""
    if precision not in TRAINING_PRECISIONS:
        raise TrainingCheckError(
            f"{label}: precision = {precision!r}: expected one of {', '.join(TRAINING_PRECISIONS)}"
        )
    if precision == "fp32":
        return
    support = bf16_support(device)
    if not support.native:
        raise TrainingCheckError(
            f"{label}: precision = 'bf16' needs a device that computes bfloat16 natively "
            f"(a CPU with AVX512-BF16 or AMX, or a recent GPU): {support.reason}; set "
            "precision = 'fp32'"
        )


def autocast(precision: str, device: Any) -> Any:
    """The forward pass's autocast context: bfloat16 for ``"bf16"``, none for ``"fp32"``."""
    if precision == "fp32":
        return contextlib.nullcontext()
    import torch

    kind = getattr(device, "type", str(device)).split(":")[0]
    return torch.autocast(device_type=kind, dtype=torch.bfloat16)


def pick_device(device: str | None) -> str:
    """``device`` or, when ``None``, ``"cuda"`` if a GPU is visible else ``"cpu"``."""
    if device is not None:
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"
