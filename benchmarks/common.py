"""What several benchmarks share: seeded synthetic texts, the per-round ratios of two timed
systems, and the JSON result line (``--json`` prints it, ``--json-out`` writes it)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

__all__ = ["emit_json", "make_passages", "make_texts", "round_ratios"]

_WORDS = (
    "the of and to in a is that for was with as on by be are this from at or an were which it has "
    "have not but their its been also more than other these they all can between one two after "
    "cell cells protein proteins gene genes expression patients study studies results model "
    "method methods analysis data effect effects treatment response increased decreased levels "
    "significant activity function role human mouse mice tumor cancer disease clinical risk "
    "associated observed compared reduced induced mechanism pathway signaling receptor binding "
    "structure membrane tissue blood brain liver immune infection virus bacterial drug dose "
    "trial outcome cohort survival mortality therapy inhibitor mutation variant sequence genome "
    "transcription regulation network system network performance training learning retrieval "
    "domain adaptation embedding document query corpus evaluation benchmark accuracy baseline"
).split()


def make_passages(n: int, *, seed: int = 0, min_words: int = 30, max_words: int = 60) -> list[str]:
    """``n`` synthetic passages of ``min_words``..``max_words`` words, sentences of 6-14 words."""
    rng = np.random.default_rng(seed)
    vocab = np.array(_WORDS)
    out = []
    for _ in range(n):
        k = int(rng.integers(min_words, max_words + 1))
        words = vocab[rng.integers(0, len(vocab), size=k)].tolist()
        parts, i = [], 0
        while i < k:
            j = min(k, i + int(rng.integers(6, 15)))
            sentence = " ".join(words[i:j])
            parts.append(sentence[0].upper() + sentence[1:] + ".")
            i = j
        out.append(" ".join(parts))
    return out


def make_texts(kind: str, n: int, *, seed: int = 0) -> list[str]:
    """``passages``: 190-230 words (~256 word pieces with the sentence full stops, the model's
    max_seq_length); ``sentences``: 8-20 words; ``short-passages``: the former 30-60 words."""
    if kind == "passages":
        return make_passages(n, seed=seed, min_words=190, max_words=230)
    if kind == "sentences":
        return make_passages(n, seed=seed, min_words=8, max_words=20)
    if kind == "short-passages":
        return make_passages(n, seed=seed)
    raise SystemExit(f"--texts {kind!r}: expected passages, sentences or short-passages")


def round_ratios(rates: dict[str, list[float]], name: str, base: str) -> list[float]:
    """Speed of ``name`` over ``base`` in each round (the two were timed back to back in it):
    their spread shows how much of a median ratio is the machine's noise.

    >>> round_ratios({"a": [10.0, 12.0], "b": [13.0, 15.0]}, "b", "a")
    [1.3, 1.25]
    """
    return [round(r / b, 6) for r, b in zip(rates[name], rates[base])]


def emit_json(result: dict[str, object], args: argparse.Namespace) -> None:
    """Print ``result`` as one JSON line with ``--json``; write it to ``--json-out`` when given."""
    line = json.dumps(result, default=str)
    if args.json:
        print(line)
    if args.json_out:
        Path(args.json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_out).write_text(line + "\n", encoding="utf-8")
