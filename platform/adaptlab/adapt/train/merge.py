"""Merged variant: a weighted average of an adapted model's weights and its base model's.

For every floating-point tensor of the model (LM-Cocktail, Xiao et al. 2023, with two models;
recommended after fine-tuning by the FlagEmbedding fine-tuning guide that Roychowdhury et al.
follow):

    theta_merged = w * theta_adapted + (1 - w) * theta_base,    0 <= w <= 1

computed in each tensor's own dtype, element by element exactly as written (w = 1 gives the
adapted model, w = 0 the base). Integer buffers (token-type ids and the like) must agree and are
taken from the adapted model. The tokenizer, pooling and normalisation are the adapted model's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from adaptlab.adapt.train.addressing import package_versions
from adaptlab.adapt.train.artifacts import Artifact
from adaptlab.adapt.train.base_model import describe_base
from adaptlab.adapt.train.third_party import load_sentence_model
from adaptlab.adapt.train.writer import ArtifactWriter, claim
from adaptlab.errors import ConfigError
from adaptlab.models.variants import MERGED

__all__ = ["merge_models", "merge_state_dicts"]


def _check_weight(weight: float) -> float:
    try:
        w = float(weight)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"merge weight {weight!r}: expected a number in [0, 1]") from e
    if not 0.0 <= w <= 1.0:
        raise ConfigError(f"merge weight {weight!r}: expected a number in [0, 1] (weight of the adapted model)")
    return w


def _merge_kernel(adapted: Mapping[str, Any], base: Mapping[str, Any], w: float) -> dict[str, Any]:
    import torch

    out = {}
    for name, a in adapted.items():
        b = base[name]
        if torch.is_floating_point(a):
            out[name] = w * a + (1.0 - w) * b.to(device=a.device, dtype=a.dtype)
        else:
            out[name] = a.clone()
    return out


def merge_state_dicts(adapted: Mapping[str, Any], base: Mapping[str, Any], weight: float) -> dict[str, Any]:
    """``{name: weight * adapted[name] + (1 - weight) * base[name]}`` over all floating tensors.

    Raises :class:`ConfigError` when the two state dicts differ in names or shapes (different
    architectures cannot be averaged) or an integer buffer differs.
    """
    import torch

    w = _check_weight(weight)
    if set(adapted) != set(base):
        only_a = sorted(set(adapted) - set(base))[:5]
        only_b = sorted(set(base) - set(adapted))[:5]
        raise ConfigError(
            f"cannot merge models of different architectures: tensors only in the adapted model "
            f"{only_a}, only in the base {only_b}"
        )
    for name, a in adapted.items():
        b = base[name]
        if tuple(a.shape) != tuple(b.shape):
            raise ConfigError(f"cannot merge: tensor {name!r} has shape {tuple(a.shape)} vs {tuple(b.shape)}")
        if not torch.is_floating_point(a) and not torch.equal(a, b.to(a.device)):
            raise ConfigError(f"cannot merge: non-float tensor {name!r} differs between the models")
    return _merge_kernel(adapted, base, w)


def merge_models(
    adapted: str | os.PathLike[str] | Artifact,
    base_model: str | os.PathLike[str] | Artifact,
    weight: float,
    *,
    artifact_root: str | os.PathLike[str],
    scale: str | int | None = None,
) -> Artifact:
    """Merge ``adapted`` (an FT or PT-FT artifact or model directory) with ``base_model``
    (usually the original model) and store the result as a ``merged`` artifact; reused when it
    exists. The artifact key covers both models' hashes and the weight."""
    w = _check_weight(weight)
    src = describe_base(adapted)
    base = describe_base(base_model)
    source_variant = src.parent.get("variant") if src.parent else None
    inputs = {
        "variant": MERGED,
        "base_model": base.key_inputs(),
        "adapted_model": src.key_inputs(),
        "data": {"kind": "none", "scale": None if scale is None else str(scale)},
        "hyperparameters": {"merge_weight": w, "source_variant": source_variant},
        "seed": None,
        "packages": package_versions(),
    }
    info = base.info() | {"adapted_model_path": str(src.path), "parent": dict(src.parent) if src.parent else None}
    writer = ArtifactWriter(
        artifact_root,
        label=str(base.root.get("id", base.label)),
        variant=MERGED,
        scale=scale,
        inputs=inputs,
        info=info,
    )
    with claim(writer) as done:
        if done is not None:
            return done
        model = load_sentence_model(src.path, "cpu")
        reference = load_sentence_model(base.path, "cpu")
        merged = merge_state_dicts(model.state_dict(), reference.state_dict(), w)
        model.load_state_dict(merged, strict=True)
        model.save(str(writer.model_dir), safe_serialization=True)
        return writer.commit(training={"device": "cpu", "merge_weight": w})
