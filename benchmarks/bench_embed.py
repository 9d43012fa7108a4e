"""Ray Data embedding pipeline vs plain ``SentenceTransformer.encode``, in one run.

    python benchmarks/bench_embed.py                 # 20,000 passages, all-MiniLM-L6-v2
    python benchmarks/bench_embed.py --n 500         # smoke run

Both sides embed the same synthetic passages (30-60 words each, seeded) with the same
model and batch size. The plain side is ``SentenceTransformer.encode`` in this process with
torch's default threads (the model is loaded before the clock starts). The Ray side is one
``adaptlab.embedding.embed_texts`` call on an already started local Ray: it includes the
actors' start-up and model load, the transfer of texts and embeddings through the object
store and the reassembly by row id. Ray's own start-up is reported separately.

Prints the wall times, the ratio ray / plain (goal: <= 1.15) and the largest absolute
difference between the two sets of embeddings. ``--repeat R`` measures R pairs (plain first
in odd, Ray first in even pairs) and reports the median ratio (the machine may be shared).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=20_000, help="number of passages (default 20000)")
    ap.add_argument("--model", default="minilm", help="model reference (default: minilm)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--num-actors", type=int, default=None, help="default: cores // torch threads")
    ap.add_argument("--torch-threads", type=int, default=None, help="per actor (default 1)")
    ap.add_argument("--block-size", type=int, default=None, help="rows per actor call (default: planned)")
    ap.add_argument("--no-sort", action="store_true", help="do not order texts by length")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    import torch
    from sentence_transformers import SentenceTransformer

    from adaptlab.embedding import embed_texts_detailed
    from adaptlab.models import resolve_model
    from adaptlab.runtime import available_cores, init_ray

    texts = make_passages(args.n, seed=args.seed)
    ref = resolve_model(args.model)
    source = str(ref.path) if ref.path is not None else ref.model_id
    print(f"# {args.n} passages, {np.mean([len(t.split()) for t in texts]):.1f} words on average; "
          f"model {ref.model_id} ({source}); batch size {args.batch_size}; "
          f"{available_cores()} cores, torch {torch.__version__} with {torch.get_num_threads()} threads")

    t0 = time.perf_counter()
    info = init_ray()
    print(f"# ray start-up {time.perf_counter() - t0:.1f} s ({info.num_cpus:g} logical CPUs, "
          f"{info.num_gpus:g} GPUs, auth {info.auth_mode})")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = SentenceTransformer(source, device=device)

    def plain() -> tuple[float, np.ndarray]:
        t = time.perf_counter()
        e = model.encode(texts, batch_size=args.batch_size, normalize_embeddings=True, convert_to_numpy=True)
        return time.perf_counter() - t, e

    def on_ray() -> tuple[float, np.ndarray, object]:
        t = time.perf_counter()
        run = embed_texts_detailed(
            texts, args.model, kind="document", batch_size=args.batch_size, num_actors=args.num_actors,
            torch_threads=args.torch_threads, block_size=args.block_size, sort_by_length=not args.no_sort,
            progress=False,
        )
        return time.perf_counter() - t, run.embeddings, run

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"# load average before: {load:.1f}")
    ratios = []
    for r in range(args.repeat):
        if r % 2 == 1:  # alternate the order: drift in machine load hits both sides
            t_ray, e_ray, run = on_ray()
            t_plain, e_plain = plain()
        else:
            t_plain, e_plain = plain()
            t_ray, e_ray, run = on_ray()
        diff = float(np.abs(e_plain - e_ray).max())
        ratio = t_ray / t_plain
        ratios.append(ratio)
        print(f"run {r + 1}: plain encode {t_plain:7.1f} s ({args.n / t_plain:6.1f} texts/s) | ray pipeline "
              f"{t_ray:7.1f} s ({args.n / t_ray:6.1f} texts/s; {run.num_actors} actors x "
              f"{args.torch_threads or 'auto'} threads, blocks of {run.block_size}) | ratio {ratio:.3f} | "
              f"max |diff| {diff:.2e}")
        sys.stdout.flush()
    med = statistics.median(ratios)
    verdict = "met" if med <= 1.15 else "NOT met"
    print(f"ratio ray / plain: {med:.3f} (median of {len(ratios)}; goal <= 1.15: {verdict})")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    raise SystemExit(main())
