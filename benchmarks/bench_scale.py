"""Benchmark: cost curves of an adaptation study over corpus size (issue 32, "Cost curves").

The reference study (seed paper 004, Section 3) adapts on 10, 100 and 700 documents. For each
size N in ``--sizes`` this script writes a corpus of generated text (``--pages`` pages of about
``--words`` words per document, built from adaptlab's seeded synthetic maintenance notes, so no
data set is needed), a study with ``scales = [N]``, variants base/pt/ft, training capped at
``--max-steps`` steps per stage, and runs ``adaptlab run STUDY --store STORE`` in a child
process, on the embedded Ray (``--nodes 1``) or on a local Ray cluster of ``--nodes`` nodes on
127.0.0.1 (token auth, started and stopped by pid; see testkit/ray_cluster.py).

Phases come from the run's own log lines, timed as they arrive: every ``[adaptlab]`` line is
classed (prepare: adaptation data, held-out split, mining; train: the training lines; embed:
"embedding N documents ..." and cache lines; bootstrap: the metric/bootstrap lines of each
dataset) and a phase's time is the sum of the intervals from its lines to the next line; its
peak memory is the largest summed RSS of the process tree (driver and embedded Ray, or the
cluster's processes) sampled in those intervals. The study's own ``prepare_s``/``train_s``/
``evaluate_s`` are printed beside them. Growth exponents are least-squares slopes of
log(time) against log(N) across the sizes (1 = linear).

    nice -n 15 python -m benchmarks.bench_scale --sizes 10,100 --nodes 1 --json /tmp/scale1.json
    nice -n 15 python -m benchmarks.bench_scale --sizes 10,100 --nodes 3
    python -m benchmarks.bench_scale --small      # the test's mode: 2 sizes of 1-page documents
    python -m benchmarks.bench_scale --sizes 50 --backend auto --compare-mining   # what int8 mining costs

``--backend`` and ``--mining-precision`` set ``[embedding] backend`` and ``[adapt]
mining_precision``. ``--compare-mining`` runs each size twice on the same corpus, mining at fp32
and at int8, and prints how many mined negatives differ and, per system on the held-out set, the
paired nDCG@10 difference (int8 - fp32) with its 95% bootstrap CI; the base system's rows must be
identical (only the mining changed).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.pdf_scale_study import tree_pids

ROOT = Path(__file__).resolve().parents[1]

PHASES = ("startup", "prepare", "embed", "train", "evaluate", "bootstrap", "other")
ELAPSED = re.compile(r"\((\d+(?:\.\d+)?) s\)")  # a heartbeat's "[adaptlab] WHAT (N s)"
NOTE_WORDS = 110  # a synthetic note (adaptlab.data.synthetic) has ~8-14 sentences, ~110 words
RULES = (
    ("scale study done", "other"),
    ("bootstrapping", "bootstrap"),
    ("texts in ", "resume"),
    ("from the embedding cache", "resume"),
    ("training ", "train"),
    ("token-embedding", "embed"),
    ("embedding ", "embed"),
    ("judged queries", "evaluate"),
    ("loading dataset", "evaluate"),
    ("adaptation data", "prepare"),
    ("held-out", "prepare"),
)


def phase_of(line: str, current: str, outer: str = "evaluate") -> str:
    """The phase a log line opens: ``current`` for lines that open none (a Ray worker's lines,
    warnings, tables), ``outer`` (the phase an embedding ran in: prepare's mining or evaluate)
    for an embedding's closing line."""
    text = line.strip()
    if not text.startswith("[adaptlab]"):
        return current
    for needle, phase in RULES:
        if needle in text:
            return outer if phase == "resume" else phase
    return current


NOTES_PER_SEED = 8_000
"""Synthetic notes drawn per seed: a seed gives at most ~50,000 (distinct component names), and
700 documents of 20 pages need 56,000; sizes up to 100 documents use the first seed only."""


def _notes(n: int, seed: int) -> Iterator[Any]:
    """``n`` synthetic notes: blocks of :data:`NOTES_PER_SEED` from seeds ``seed``, ``seed + 1``, ..."""
    from adaptlab.data.synthetic import synthetic_documents

    for block, start in enumerate(range(0, n, NOTES_PER_SEED)):
        yield from synthetic_documents(min(NOTES_PER_SEED, n - start), seed=seed + block)


def write_corpus(folder: Path, n_docs: int, pages: int, words: int, seed: int) -> int:
    """``n_docs`` text files, each ``pages`` pages of ~``words`` words: consecutive seeded
    synthetic notes under page headers; returns the words written."""
    per_page = max(1, round(words / NOTE_WORDS))
    notes = _notes(n_docs * pages * per_page, seed)
    folder.mkdir(parents=True, exist_ok=True)
    total, it = 0, iter(notes)
    for d in range(n_docs):
        parts = []
        for p in range(1, pages + 1):
            body = " ".join(next(it).text for _ in range(per_page))
            parts.append(f"Maintenance manual {d:04d}, page {p}\n\n{body}\n")
            total += len(body.split())
        (folder / f"manual{d:04d}.txt").write_text("\n".join(parts))
    return total


def study_text(
    corpus: Path,
    store: Path,
    n: int,
    max_steps: int,
    address: str,
    model: str = "minilm",
    negative_rules: bool = True,
    keys: dict[str, dict[str, str]] | None = None,
) -> str:
    """One study of ``model``: scale ``[n]``, variants base/pt/ft, every stage capped at ``max_steps``, an
    embedding cache of its own beside ``store`` (so no size reuses another's vectors; a results
    store must be a new or empty folder). ``keys``: more string keys of ``[embedding]`` and
    ``[adapt]`` (``{"embedding": {"backend": "auto"}, "adapt": {"mining_precision": "int8"}}``)."""
    keys = keys or {}
    addr = f"address = {json.dumps(address)}\n" if address else ""
    more = {
        section: "".join(f"{k} = {json.dumps(v)}\n" for k, v in keys.get(section, {}).items())
        for section in ("embedding", "adapt")
    }
    return (
        f'[study]\nname = "bench-scale-{n}"\nseed = 0\nstore = {json.dumps(str(store))}\n{addr}\n'
        '[[datasets]]\nname = "synthetic"\nspec = "synthetic:n_documents=20,seed=1"\n\n'
        f'[[models]]\nname = "minilm"\nref = {json.dumps(model)}\n\n'
        "[bootstrap]\nn_resamples = 1000\nseed = 0\n\n"
        f"[embedding]\ncache = {json.dumps(str(store.with_name(store.name + '-embedding-cache')))}\n"
        f"{more['embedding']}\n"
        f"[adapt]\ncorpus = {json.dumps(str(corpus))}\nscales = [{n}]\n{more['adapt']}"
        'variants = ["base", "pt", "ft"]\ntest_fraction = 0.1\nvalidation_fraction = 0.1\n'
        "max_tokens = 256\nuse_ray = true\n"
        + ("" if negative_rules else "duplicate_threshold = false\nmargin = false\n")
        + "\n"
        f"[adapt.pt]\nmax_steps = {max_steps}\n\n[adapt.ft]\nmax_steps = {max_steps}\n"
    )


@dataclass
class PhaseClock:
    """Per-phase seconds and peak RSS from timed log lines and the sampler's readings."""

    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))
    peak_gb: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))
    phase: str = "startup"
    outer: str = "startup"  # the last phase that was not embed
    since: float = field(default_factory=time.monotonic)

    def line(self, text: str, now: float) -> None:
        """A log line seen at ``now``: switch to the phase it opens, backdated by a heartbeat's (N s)."""
        phase = phase_of(text, self.phase, self.outer)
        if phase != self.phase:
            ran = ELAPSED.search(text)
            self.switch(phase, float(ran.group(1)) if ran else 0.0, now)

    def switch(self, phase: str, back: float = 0.0, now: float | None = None) -> None:
        """Enter ``phase`` ``back`` seconds before ``now`` (a heartbeat line says how long its
        work has run), never before the current phase began."""
        now = time.monotonic() if now is None else now
        now -= min(back, now - self.since)
        self.seconds[self.phase] += now - self.since
        self.phase, self.since = phase, now
        if phase != "embed":
            self.outer = phase

    def sample(self, rss: int) -> None:
        self.peak_gb[self.phase] = max(self.peak_gb[self.phase], rss / 1e9)


def replay(log: Path, start: float) -> PhaseClock:
    """The phase seconds of a run's timed log (``T line`` per line, as :func:`run_one` writes),
    the run having started at monotonic time ``start`` (peaks are not in the log)."""
    clock, last = PhaseClock(since=start), start
    for row in log.read_text(errors="replace").splitlines():
        stamp, _, text = row.partition(" ")
        last = float(stamp)
        clock.line(text, last)
    clock.switch("other", now=last)
    return clock


def _sample_loop(clock: PhaseClock, roots: list[int], extra: list[int], stop: threading.Event, every: float) -> None:
    from benchmarks.pdf_scale_study import _rss

    while not stop.wait(every):
        pids = {p for r in roots for p in tree_pids(r)} | {p for r in extra for p in tree_pids(r)}
        clock.sample(sum(_rss(p) for p in pids))


def run_one(
    study: Path, log: Path, env: dict, cluster_roots: list[int], timeout_s: float
) -> tuple[int, PhaseClock, dict]:
    """``adaptlab run STUDY`` with its lines timed into phases; (exit code, clock, study timings)."""
    clock, stop, timings = PhaseClock(), threading.Event(), {}
    proc = subprocess.Popen(
        [sys.executable, "-m", "adaptlab", "run", str(study)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    sampler = threading.Thread(target=_sample_loop, args=(clock, [proc.pid], cluster_roots, stop, 0.5), daemon=True)
    sampler.start()
    killer = threading.Timer(timeout_s, proc.kill)
    killer.start()
    with log.open("w", buffering=1) as out:  # line-buffered: the log can be followed
        for line in proc.stdout:  # type: ignore[union-attr]
            out.write(f"{time.monotonic():.2f} {line}")
            clock.line(line, time.monotonic())
            if "scale study done in" in line:
                timings = {k: float(v) for k, v in (p.split() for p in line.split("done in", 1)[1].split(","))}
    code = proc.wait()
    killer.cancel()
    clock.switch("other")
    stop.set()
    sampler.join(5)
    return code, clock, timings


def growth(sizes: list[int], values: list[float]) -> float | None:
    """Least-squares slope of log(value) on log(size); None with fewer than two usable points."""
    pts = [(math.log(s), math.log(v)) for s, v in zip(sizes, values) if v > 0]
    if len(pts) < 2:
        return None
    mx, my = sum(x for x, _ in pts) / len(pts), sum(y for _, y in pts) / len(pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sxx if sxx else None


class LocalCluster:
    """A head and ``nodes - 1`` workers on 127.0.0.1 (``ray start``, token auth, free ports),
    stopped by pid (testkit/ray_cluster.py)."""

    def __init__(self, nodes: int, work: Path, cpus: int) -> None:
        import testkit.ray_cluster as rc

        self.rc, self.temp, self.ports = rc, work / "ray", rc.HeadPorts()
        token = secrets.token_hex(16)
        self.env = rc.loopback_env({**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token})
        res = rc.start_head(self.ports, self.temp, self.env, num_cpus=cpus, dashboard=False, lean=True)
        for i in range(2, nodes + 1):
            if res.returncode == 0:
                res = rc.start_worker(self.ports, self.temp / f"node{i}", self.env, num_cpus=cpus, lean=True)
        if res.returncode != 0:
            self.stop()
            raise SystemExit(f"ray start failed: {res.stderr[-800:]}")

    @property
    def address(self) -> str:
        return self.ports.gcs_address

    def pids(self) -> list[int]:
        return self.rc.cluster_pids(self.temp, self.ports)

    def stop(self) -> list[int]:
        return self.rc.stop_cluster(self.temp, self.ports)


@dataclass
class SizeResult:
    size: int
    nodes: int
    exit_code: int
    words: int
    seconds: dict[str, float]
    peak_gb: dict[str, float]
    study_timings: dict[str, float]
    load: tuple[float, ...]
    options: dict[str, dict[str, str]] = field(default_factory=dict)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10,100,700", help="documents per study, comma-separated")
    ap.add_argument("--nodes", type=int, default=1, help="1: embedded Ray; >1: a local cluster of that many nodes")
    ap.add_argument("--max-steps", type=int, default=4, help="training steps per stage (pt and ft)")
    ap.add_argument("--pages", type=int, default=20, help="pages per generated document")
    ap.add_argument("--words", type=int, default=450, help="words per page")
    ap.add_argument("--cpus-per-node", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per study")
    ap.add_argument("--work", default="", help="folder for corpora, stores and logs (a temp dir if empty)")
    ap.add_argument("--json", default="", help="write the results here")
    ap.add_argument(
        "--model",
        default="minilm",
        help="the model adapted (a path for a local one; the figures of docs/performance.md are minilm's)",
    )
    ap.add_argument(
        "--no-negative-rules",
        action="store_true",
        help="[adapt] duplicate_threshold and margin "
        "off (a random-init test encoder scores every chunk a near-duplicate of the positive)",
    )
    ap.add_argument(
        "--backend",
        default="",
        help='[embedding] backend of the studies ("auto": the fastest exact one installed; empty: the default, torch)',
    )
    ap.add_argument(
        "--mining-precision", default="", help='[adapt] mining_precision ("int8"; empty: the default, fp32)'
    )
    ap.add_argument(
        "--compare-mining",
        action="store_true",
        help="run every size twice, mining at fp32 and at "
        "int8 (the rest as --backend says), and report the negatives that differ and the paired "
        "nDCG@10 difference of the adapted models",
    )
    ap.add_argument("--small", action="store_true", help="sizes 10,20 of 1-page documents, 1 step (the test)")
    a = ap.parse_args(argv)
    if a.small:
        a.sizes, a.pages, a.max_steps = "10,20", 1, 1
    return a


def study_keys(a: argparse.Namespace, mining: str = "") -> dict[str, dict[str, str]]:
    """The ``[embedding]`` / ``[adapt]`` keys the options ask for (``mining`` overrides
    ``--mining-precision``)."""
    mining = mining or a.mining_precision
    return {
        "embedding": {"backend": a.backend} if a.backend else {},
        "adapt": {"mining_precision": mining} if mining else {},
    }


def run_size(a: argparse.Namespace, n: int, work: Path, cluster: LocalCluster | None, mining: str = "") -> SizeResult:
    """One study of ``n`` documents (and the held-out/validation documents beside them); ``mining``:
    its ``mining_precision`` (else ``--mining-precision``), which also names its store."""
    corpus_docs = math.ceil(n / 0.8) + 1
    corpus = work / f"corpus{n}"
    words = write_corpus(corpus, corpus_docs, a.pages, a.words, seed=n)
    tag = f"{n}-{mining}" if mining else f"{n}"
    study = work / f"study{tag}.toml"
    keys = study_keys(a, mining)
    study.write_text(
        study_text(
            corpus,
            work / f"store{tag}",
            n,
            a.max_steps,
            cluster.address if cluster else "",
            a.model,
            not a.no_negative_rules,
            keys,
        )
    )
    env = {**(cluster.env if cluster else os.environ), "ADAPTLAB_PROGRESS_INTERVAL": "1"}  # bootstrap's heartbeat
    code, clock, timings = run_one(study, work / f"run{tag}.log", env, cluster.pids() if cluster else [], a.timeout)
    return SizeResult(
        n,
        a.nodes,
        code,
        words,
        {k: round(v, 1) for k, v in clock.seconds.items()},
        {k: round(v, 2) for k, v in clock.peak_gb.items()},
        timings,
        tuple(round(x, 1) for x in os.getloadavg()),
        keys,
    )


# ---------------------------------------------------------------------------------------
# --compare-mining: what int8 mining changes


def _triplets(store: Path) -> dict[str, set[str]]:
    """``{question id: its negative chunk ids}`` of every training and validation triplet file
    of the study whose results store is ``store``."""
    from adaptlab.adapt.prep.triplets import read_triplets

    out: dict[str, set[str]] = {}
    for path in sorted((store / "adaptation").glob("*/*/*.parquet")):
        if path.stem in ("train", "validation"):
            triplets, _ = read_triplets(path)
            out.update({f"{path.parent.name}/{path.stem}/{t.query_id}": set(t.negative_ids) for t in triplets})
    return out


def negatives_changed(fp32: dict[str, set[str]], other: dict[str, set[str]]) -> dict[str, int]:
    """How many mined negatives differ: of the questions both minings have, the negatives of
    ``other`` that fp32 did not mine for the same question, and the questions with any.

    >>> negatives_changed({"q": {"a", "b"}, "r": {"c"}}, {"q": {"a", "d"}, "r": {"c"}})
    {'questions': 2, 'negatives': 3, 'changed_negatives': 1, 'changed_questions': 1}
    """
    both = sorted(set(fp32) & set(other))
    changed = [len(other[q] - fp32[q]) for q in both]
    return {
        "questions": len(both),
        "negatives": sum(len(other[q]) for q in both),
        "changed_negatives": sum(changed),
        "changed_questions": sum(1 for c in changed if c),
    }


def heldout_ndcg(store: Path, dataset: str = "heldout") -> dict[str, dict[str, float]]:
    """``{system: {query id: nDCG@10}}`` on the held-out set, recomputed from the stored top-k and
    gold ids with adaptlab's trec_eval-exact measures."""
    from adaptlab import results
    from adaptlab.metrics import evaluate

    rows = results.open(store).per_query(latest=True).to_pylist()
    out: dict[str, dict[str, float]] = {}
    for system in sorted({r["system"] for r in rows if r["dataset"] == dataset}):
        mine = [r for r in rows if r["dataset"] == dataset and r["system"] == system]
        qrels = {r["query_id"]: dict.fromkeys(r["gold_ids"] or [], 1) for r in mine}
        run = {r["query_id"]: dict(zip(r["topk_ids"] or [], r["topk_scores"] or [])) for r in mine}
        ids = sorted(qrels)
        values = evaluate(qrels, run, ["ndcg@10"], query_ids=ids).values["ndcg@10"]
        out[system] = dict(zip(ids, (float(v) for v in values)))
    return out


def mining_cost(fp32_store: Path, int8_store: Path, resamples: int = 2000) -> dict[str, Any]:
    """The int8 mining's cost: negatives that differ, and per system on the held-out set the paired
    nDCG@10 difference int8 - fp32 with its 95% bootstrap CI (the same questions on both sides:
    the held-out split does not depend on the mining). The base system must not move at all."""
    import numpy as np

    from adaptlab.stats import paired_bootstrap

    a, b = heldout_ndcg(fp32_store), heldout_ndcg(int8_store)
    systems: dict[str, Any] = {}
    for system in sorted(set(a) & set(b)):
        ids = sorted(set(a[system]) & set(b[system]))
        values = np.array([[a[system][q] for q in ids], [b[system][q] for q in ids]])
        (pair,) = paired_bootstrap(values, names=["fp32", "int8"], baseline="fp32", n_resamples=resamples, seed=0)
        systems[system] = {
            "queries": len(ids),
            "fp32": float(values[0].mean()),
            "int8": float(values[1].mean()),
            "diff": pair.diff,
            "ci": [pair.ci_low, pair.ci_high],
            "p": pair.p_value,
            "identical": bool(np.array_equal(values[0], values[1])),
        }
    return {"negatives": negatives_changed(_triplets(fp32_store), _triplets(int8_store)), "systems": systems}


def print_mining_cost(n: int, cost: dict[str, Any]) -> None:
    neg = cost["negatives"]
    share = neg["changed_negatives"] / neg["negatives"] if neg["negatives"] else 0.0
    print(
        f"{n} documents, int8 mining: {neg['changed_negatives']:,} of {neg['negatives']:,} negatives differ "
        f"from fp32 mining ({share:.1%}; {neg['changed_questions']:,} of {neg['questions']:,} questions)"
    )
    for system, row in cost["systems"].items():
        print(
            f"  {system:<24} nDCG@10 fp32 {row['fp32']:.4f}  int8 {row['int8']:.4f}  int8 - fp32 {row['diff']:+.4f} "
            f"[{row['ci'][0]:+.4f}, {row['ci'][1]:+.4f}], p = {row['p']:.3f}"
            + ("  (identical)" if row["identical"] else "")
            + f"  ({row['queries']} questions)"
        )


def report(results: list[SizeResult]) -> dict[str, float | None]:
    """Print the table and the growth exponents; returns the exponents."""
    print(
        f"{'docs':>5} {'nodes':>5} {'words':>9} "
        + " ".join(f"{p + '_s':>11}" for p in PHASES)
        + "  peak GB (prepare/train/embed/bootstrap)  load"
    )
    for r in results:
        peaks = "/".join(f"{r.peak_gb[p]:.1f}" for p in ("prepare", "train", "embed", "bootstrap"))
        print(
            f"{r.size:>5} {r.nodes:>5} {r.words:>9} "
            + " ".join(f"{r.seconds[p]:>11.1f}" for p in PHASES)
            + f"  {peaks:<39}  {r.load}  exit {r.exit_code}  study {r.study_timings}  {r.options or ''}"
        )
    ok = [r for r in results if r.exit_code == 0]
    exps = {p: growth([r.size for r in ok], [r.seconds[p] for r in ok]) for p in PHASES}
    print(
        "growth exponents (slope of log time vs log documents): "
        + ", ".join(f"{p} {'n/a' if e is None else f'{e:.2f}'}" for p, e in exps.items())
    )
    return exps


def main(argv: list[str] | None = None) -> list[SizeResult]:
    a = parse_args(argv)
    work = Path(a.work or tempfile.mkdtemp(prefix="bench-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    cluster = LocalCluster(a.nodes, work, a.cpus_per_node) if a.nodes > 1 else None
    results: list[SizeResult] = []
    costs: dict[int, dict[str, Any]] = {}
    try:
        for n in (int(s) for s in a.sizes.split(",") if s.strip()):
            for mining in ("fp32", "int8") if a.compare_mining else ("",):
                results.append(run_size(a, n, work, cluster, mining))
                print(json.dumps(asdict(results[-1])), flush=True)
            if a.compare_mining and all(r.exit_code == 0 for r in results[-2:]):
                costs[n] = mining_cost(work / f"store{n}-fp32", work / f"store{n}-int8")
                print_mining_cost(n, costs[n])
    finally:
        left = cluster.stop() if cluster else []
        if left:
            print(f"[bench_scale] Ray processes still running: {left}", file=sys.stderr)
    exps = report(results)
    for n, cost in costs.items():
        print_mining_cost(n, cost)
    if a.json:
        Path(a.json).write_text(
            json.dumps({"results": [asdict(r) for r in results], "growth": exps, "mining_cost": costs})
        )
    return results


if __name__ == "__main__":
    sys.exit(0 if all(r.exit_code == 0 for r in main()) else 1)
