"""The generated calibration prose of static int8 quantization (adaptlab.models.calibration): fixed
by its seed, prose-shaped, and varied enough to fill a model's input length."""

from __future__ import annotations

from adaptlab.models.calibration import calibration_texts


def test_the_same_seed_gives_the_same_texts_and_another_seed_others():
    assert calibration_texts(20) == calibration_texts(20)
    assert calibration_texts(5) == calibration_texts(20)[:5]
    assert calibration_texts(20, seed=1) != calibration_texts(20)


def test_the_texts_are_sentences_of_varied_length_and_vocabulary():
    texts = calibration_texts(256)
    words = [len(t.split()) for t in texts]
    assert min(words) >= 30 and max(words) >= 200  # many reach a 256-token model's limit
    assert all(t[0].isupper() and t.endswith(".") for t in texts)
    vocabulary = {w.strip(".,()").lower() for t in texts for w in t.split()}
    assert len(vocabulary) > 400
    assert any(ch.isdigit() for t in texts for ch in t) and any("(" in t for t in texts)
