"""ColBERT fine-tuning (variant ``colbert-ft``) through RAGatouille's trainer, on the platform's
own triplets, into a content-addressed, relocatable artifact.

::

    base (ColBERT checkpoint, or a plain BERT -> untrained ColBERT) + triplets (ours: hard
    negatives from adapt/prep, not RAGatouille's hub-model miner)
      --child process, own working directory and run name, bounded time-out-->
        RAGTrainer.prepare_training_data(mine_hard_negatives=False) -> RAGTrainer.train
      --> <root>/<label>/colbert-ft-<scale>-<key>/model   (a ColBERT checkpoint, safetensors)

Training objective (colbert-ai, Khattab & Zaharia 2020, section 3.3; Santhanam et al. 2022): for
a query ``q`` with positive ``d+`` and negative ``d-``, softmax cross-entropy over the MaxSim
scores ``s(q, d) = sum_i max_j <q_i, d_j>`` of ``(d+, d-)``, plus in-batch negatives
(``use_ib_negatives``).

Why a child process. colbert-ai has process-wide side effects (``spawn`` start method,
``TOKENIZERS_PARALLELISM``, ``CUDA_VISIBLE_DEVICES``, a global ``Run()`` context stack) and writes
under ``<cwd>/.ragatouille``; a crashed rank leaves its parent blocked on a queue forever. Each job
therefore runs ``python -m adaptlab.adapt.train.colbert REQUEST.json`` in its own working
directory (inside the artifact's temp directory) with a unique run name, in its own session, and
the parent kills the whole process group after ``timeout_s`` seconds; a failed or timed-out
child is retried ``retries`` times, then a :class:`~adaptlab.errors.ConfigError` quotes its log.

CPU and GPU paths. With CUDA, the child uses colbert-ai's own launcher (one spawned rank per GPU
of ``gpu_ids``, default every visible GPU). colbert-ai writes *logical* ids into each rank's
``CUDA_VISIBLE_DEVICES``, which would put every Ray task of a multi-GPU node on GPU 0; the Ray
path (:mod:`adaptlab.adapt.train.jobs`) therefore runs ColBERT tasks with
``RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES=1`` and passes ``ray.get_gpu_ids()`` as ``gpu_ids``,
so the ids colbert-ai writes are the physical ones Ray assigned. Without CUDA, colbert-ai cannot train as shipped
(its ``training.py`` always wraps the model in ``DistributedDataParallel(device_ids=[rank])`` and
only creates a process group with CUDA); the child then applies a small adapter for the duration
of the call: the launcher runs the rank in-process (``run_process_without_mp``) and
``torch.nn.parallel.DistributedDataParallel`` is replaced by a subclass (accelerate checks
``isinstance`` when saving) that starts a 1-rank gloo group and drops ``device_ids``.

Offline and relocatable. ``model_name`` is always the absolute local checkpoint directory (a bare
name falls back to ``bert-base-uncased`` and fails offline inside the spawned rank); the saved
checkpoint's ``artifact.metadata`` has its ``model_name`` / ``checkpoint`` entries removed
(:func:`adaptlab.models.colbert.relocate_checkpoint`), so the artifact loads from any working
directory or machine. Resume: a finished artifact is found by its key and not retrained; an
interrupted run starts again from the base (colbert-ai has no mid-run resume).

Epochs: colbert-ai makes one pass over ``triples.train.colbert.jsonl``; for ``epochs > 1`` the
triples file is repeated, each pass shuffled with ``seed``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adaptlab.adapt.train.addressing import package_versions
from adaptlab.adapt.train.artifacts import Artifact
from adaptlab.adapt.train.base_model import describe_base
from adaptlab.adapt.train.config import TrainConfig
from adaptlab.adapt.train.ft import coerce_triplets, training_rows_fingerprint
from adaptlab.adapt.train.run_options import ColBERTRunOptions, TrainRun, train_run
from adaptlab.adapt.train.writer import ArtifactWriter, claim
from adaptlab.errors import ConfigError, require_extra
from adaptlab.models.variants import COLBERT_FT

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["COLBERT_VARIANT", "ColBERTFTConfig", "train_colbert"]

COLBERT_VARIANT = COLBERT_FT
"""The artifact variant and the ``[adapt].variants`` name of ColBERT fine-tuning
(:data:`adaptlab.models.variants.COLBERT_FT`)."""

_PACKAGES = ("ragatouille", "colbert-ai")


@dataclass(frozen=True, kw_only=True)
class ColBERTFTConfig(TrainConfig):
    """Hyperparameters of ColBERT fine-tuning (all enter the artifact key but ``timeout_s``/``retries``):
    ``learning_rate``, ``epochs`` and ``batch_size`` as every trainer's
    (:class:`~adaptlab.adapt.train.config.TrainConfig`), and colbert-ai's own below.

    ``negatives_per_query``: hard negatives used per training question (each makes one
    ``(q, d+, d-)`` triple); ``random_negatives``: negatives RAGatouille samples from the training
    passages for a question without one. ``dim`` / ``seed`` of the fresh projection only matter
    when the base is a plain BERT. ``doc_maxlen`` / ``query_maxlen`` are saved with the checkpoint
    and used when it is evaluated.
    """

    learning_rate: float = 2e-5
    epochs: int = 1
    batch_size: int = 8
    max_steps: int = 0  # 0: one pass per epoch over the triples
    negatives_per_query: int = 2
    random_negatives: int = 1
    use_ib_negatives: bool = True
    warmup_steps: int = 0
    doc_maxlen: int = 128
    query_maxlen: int = 32
    dim: int = 128
    timeout_s: float = 1800.0
    retries: int = 1

    def __post_init__(self) -> None:
        # its own (stricter: integers only) checks first, so their messages stay as they were;
        # then the shared ones (a learning rate that is also finite)
        for name in ("batch_size", "epochs", "doc_maxlen", "query_maxlen", "dim"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"ColBERT FT: {name} = {value!r}; expected a positive integer")
        if self.learning_rate <= 0 or self.timeout_s <= 0:
            raise ConfigError("ColBERT FT: learning_rate and timeout_s must be > 0")
        if self.negatives_per_query < 0 or self.random_negatives < 0 or self.max_steps < 0 or self.retries < 0:
            raise ConfigError("ColBERT FT: negatives_per_query, random_negatives, max_steps and retries must be >= 0")
        super().__post_init__()

    def key_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k not in ("timeout_s", "retries")}


def train_colbert(
    base_model: str | os.PathLike[str] | Artifact,
    triplets: Any,
    *,
    artifact_root: str | os.PathLike[str],
    config: ColBERTFTConfig | None = None,
    run: TrainRun | None = None,
    log_path: str | os.PathLike[str] | None = None,
    gpu_ids: list[int] | None = None,
    **options: Unpack[ColBERTRunOptions],
) -> Artifact:
    """Fine-tune a ColBERT on ``triplets`` and store it as a ``colbert-ft`` artifact.

    ``base_model``: a ColBERT checkpoint directory, a ColBERT artifact, or a plain BERT directory /
    alias with local weights (``minilm``: the BERT of the packaged all-MiniLM-L6-v2), which becomes
    an untrained ColBERT first (said loudly in the log). ``triplets``: anything
    :func:`adaptlab.adapt.train.ft.coerce_triplets` accepts. ``device``: ``"cpu"`` forces the CPU
    adapter even where CUDA is visible; ``gpu_ids``: physical GPU ids for colbert-ai's ranks (module
    docstring; default every visible GPU). Returns at once when an artifact with the same inputs exists.
    ``run`` or its ``seed``, ``scale`` and ``device`` as keywords
    (:class:`~adaptlab.adapt.train.run_options.TrainRun`; colbert-ai keeps its own checkpoints, so
    the step-checkpoint fields are not used).
    """
    config = config or ColBERTFTConfig()
    run = train_run("train_colbert", run, options, ("seed", "scale", "device"))
    seed, scale = run.seed, run.scale
    rows = coerce_triplets(triplets)
    if not rows:
        raise ConfigError("ColBERT FT: no training triplets")
    base = describe_base(base_model)
    inputs = {
        "variant": COLBERT_VARIANT,
        "base_model": base.key_inputs(),
        "data": {
            "kind": "triplets",
            "scale": None if scale is None else str(scale),
            "fingerprint": training_rows_fingerprint(rows),
            "count": len(rows),
        },
        "hyperparameters": config.key_dict(),
        "seed": int(seed),
        "packages": package_versions(*_PACKAGES),
    }
    writer = ArtifactWriter(
        artifact_root,
        label=str(base.root.get("id", base.label)),
        variant=COLBERT_VARIANT,
        scale=scale,
        inputs=inputs,
        info={**base.info(), "interaction": "late"},
    )
    with claim(writer) as done:
        if done is not None:
            return done
        work = writer.partial_dir / "work"
        record = _run_child(
            _ChildJob(
                base.path,
                rows,
                config,
                int(seed),
                work,
                run.device,
                writer.key[:16],
                Path(log_path) if log_path else None,
                gpu_ids,
            )
        )
        shutil.copytree(record.pop("checkpoint"), writer.model_dir)
        from adaptlab.models.colbert import relocate_checkpoint  # no colbert import: JSON edit only

        relocate_checkpoint(writer.model_dir)
        shutil.rmtree(work, ignore_errors=True)
        return writer.commit(training=record)


# =========================================================================== parent side


_COLBERT_LOSS_MU = 0.999  # colbert-ai's running-mean factor of the printed training loss
_LOSS_LINE = re.compile(r"^\[[A-Z][a-z]{2} \d{2}, \d{2}:\d{2}:\d{2}\] (\d+) (\S+)\s*$")


def batch_losses(log_text: str) -> list[float]:
    """The loss of every optimizer step, recovered from colbert-ai's training log.

    After step ``t`` colbert-ai (``colbert/training/training.py``, rank 0) prints
    ``[date] t L_t`` with the running mean ``L_0 = l_0``, ``L_t = mu L_{t-1} + (1 - mu) l_t``,
    ``mu = 0.999``; so the step's own loss is ``l_t = (L_t - mu L_{t-1}) / (1 - mu)`` (printed with
    full float precision, the division loses about 3 of its 16 digits). Lines that are not such
    progress lines, and steps that are not consecutive from 0, end the trace.
    """
    running: list[float] = []
    for line in log_text.splitlines():
        m = _LOSS_LINE.match(line.strip())
        if m is None or int(m.group(1)) != len(running):
            continue
        try:
            running.append(float(m.group(2)))
        except ValueError:
            continue
    mu = _COLBERT_LOSS_MU
    return [running[0]] + [(b - mu * a) / (1 - mu) for a, b in zip(running, running[1:])] if running else []


def loss_summary(log_text: str) -> dict[str, Any]:
    """``first_loss``, ``last_loss`` and ``final_loss_mean10`` (the last 10 steps) of a training
    log, the keys the bi-encoder trainers record; empty when the log has no loss lines."""
    losses = batch_losses(log_text)
    if not losses:
        return {}
    tail = losses[-10:]
    return {
        "first_loss": losses[0],
        "last_loss": losses[-1],
        "final_loss_mean10": sum(tail) / len(tail),
        "loss_steps": len(losses),
    }


def child_env() -> dict[str, str]:
    """The training child's environment: offline, unbuffered, and ``PYTHONHASHSEED=0`` so that
    string-set order, and with it RAGatouille's sampled training triples, is the same in every
    run (:func:`prepare_triples`); without it two runs of the same inputs trained on different
    triples."""
    return {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "PYTHONUNBUFFERED": "1",
        "PYTHONHASHSEED": "0",
    }


@dataclass(frozen=True)
class _ChildJob:
    """One ColBERT training child's inputs: the base checkpoint directory, the triplet ``rows``,
    the config, the seed, its ``work`` folder, ``device`` (``"cpu"`` forces the CPU adapter), the
    run's name, where its log is appended (None: nowhere) and the physical GPU ids of its ranks."""

    base_dir: Path
    rows: list[Any]
    config: ColBERTFTConfig
    seed: int
    work: Path
    device: str | None
    run_name: str
    log_path: Path | None = None
    gpu_ids: list[int] | None = None

    def request(self) -> dict[str, Any]:
        """The JSON request the child reads (:func:`_child_main`)."""
        return {
            "base": str(Path(self.base_dir).resolve()),
            "rows": [[q, p, list(n)] for q, p, n in self.rows],
            "config": asdict(self.config),
            "seed": self.seed,
            "work": str(self.work.resolve()),
            "run_name": f"adaptlab-{self.run_name}",
            "force_cpu": self.device == "cpu",
            "gpu_ids": None if self.gpu_ids is None else [int(g) for g in self.gpu_ids],
        }


def _run_child(job: _ChildJob) -> dict[str, Any]:
    """Train in a child process, retried ``config.retries`` times after a failure or time-out; the
    child's record with wall time, attempts and the loss summary of its log."""
    attempts = job.config.retries + 1
    last = ""
    for attempt in range(1, attempts + 1):
        t0 = time.perf_counter()
        rc, text = _attempt(job)
        result_file = job.work / "result.json"
        if rc == 0 and result_file.is_file():
            record = json.loads(result_file.read_text())
            record.update(wall_s=round(time.perf_counter() - t0, 2), attempts=attempt, **loss_summary(text))
            return record
        why = f"timed out after {job.config.timeout_s:.0f} s" if rc is None else f"exited with status {rc}"
        last = f"attempt {attempt}/{attempts} {why}; last log lines:\n" + "\n".join(text.splitlines()[-25:])
    raise ConfigError(f"ColBERT fine-tuning failed: {last}")


def _attempt(job: _ChildJob) -> tuple[int | None, str]:
    """One run of the child in a fresh ``work`` folder: its exit status (None: timed out and
    killed) and its log, also appended to ``log_path``."""
    work = job.work
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    req_file = work / "request.json"
    req_file.write_text(json.dumps(job.request()))
    log_file = work / "train.log"
    rc: int | None
    with open(log_file, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "adaptlab.adapt.train.colbert", str(req_file)],
            cwd=work,
            env=child_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            rc = proc.wait(timeout=job.config.timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            rc = None
    text = log_file.read_text(errors="replace")
    if job.log_path is not None:
        job.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(job.log_path, "a") as f:
            f.write(text)
    return rc, text


def _kill_group(proc: subprocess.Popen[Any]) -> None:
    """Terminate the child's whole session (its spawned ranks included), then kill it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


# =========================================================================== child side


@contextlib.contextmanager
def _cpu_adapter() -> Iterator[None]:
    """colbert-ai training on CPU in this process (module docstring): in-process launcher and a
    1-rank gloo ``DistributedDataParallel`` subclass without ``device_ids``."""
    import torch
    import torch.distributed as dist
    from colbert.infra import launcher
    from colbert.infra.config import RunConfig

    ddp = torch.nn.parallel.DistributedDataParallel

    class OneRankDDP(ddp):  # type: ignore[misc, valid-type]
        def __init__(self, module: Any, device_ids: Any = None, output_device: Any = None, **kwargs: Any) -> None:
            if not dist.is_initialized():
                dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
            super().__init__(module, **kwargs)

    def launch(self: Any, custom_config: Any, *args: Any) -> Any:
        config = type(custom_config).from_existing(custom_config, self.run_config, RunConfig(rank=0))
        return launcher.run_process_without_mp(self.callee, config, *args)

    saved_launch = launcher.Launcher.launch
    launcher.Launcher.launch = launch
    torch.nn.parallel.DistributedDataParallel = OneRankDDP  # type: ignore[misc,assignment]  # patched for one run
    try:
        yield
    finally:
        launcher.Launcher.launch = saved_launch
        torch.nn.parallel.DistributedDataParallel = ddp  # type: ignore[misc]


def prepare_triples(
    trainer: Any, rows: list[Any], cfg: ColBERTFTConfig, data_dir: Path, seed: int
) -> tuple[list[Any], list[Any]]:
    """RAGatouille's training files from our ``(q, d+, [d-...])`` rows (``negatives_per_query``
    of our hard negatives each, ``random_negatives`` sampled by RAGatouille where a row has none),
    then ``epochs`` shuffled passes (``random.Random(seed)``) written back and set on the trainer.
    Returns ``(one pass, all passes)``. Deterministic only under a fixed ``PYTHONHASHSEED``
    (RAGatouille deduplicates passages through ``set``s before its seeded sampling), which the
    parent sets for the child (:func:`child_env`)."""
    raw = []
    for q, p, negs in rows:
        chosen = list(negs)[: cfg.negatives_per_query]
        raw.append((q, p, chosen if chosen else []))
    trainer.prepare_training_data(
        raw_data=raw, data_out_path=str(data_dir), mine_hard_negatives=False, num_new_negatives=cfg.random_negatives
    )
    triples_file = data_dir / "triples.train.colbert.jsonl"
    base_triples = [json.loads(line) for line in triples_file.read_text().splitlines() if line.strip()]
    triples: list[Any] = []
    rng = random.Random(seed)
    for _ in range(cfg.epochs):
        epoch = list(base_triples)
        rng.shuffle(epoch)
        triples += epoch
    triples_file.write_text("".join(json.dumps(t) + "\n" for t in triples))
    trainer.training_triplets = triples
    return base_triples, triples


def _child_main(request_file: str) -> None:
    """Entry point of the training child (``python -m adaptlab.adapt.train.colbert REQUEST``)."""
    req = json.loads(Path(request_file).read_text())
    cfg = ColBERTFTConfig(**req["config"])
    work = Path(req["work"])
    seed = int(req["seed"])
    random.seed(seed)
    import torch

    from adaptlab.models.colbert import colbert_from_bert, import_colbert, is_colbert_checkpoint

    torch.manual_seed(seed)
    base = Path(req["base"])
    if is_colbert_checkpoint(base):
        init = base
    else:
        print(
            f"[adaptlab] WARNING: {base} is a plain BERT: starting from an UNTRAINED ColBERT "
            f"(fresh {cfg.dim}-d projection, seed {seed})",
            flush=True,
        )
        init = colbert_from_bert(
            base, work / "init", dim=cfg.dim, seed=seed, doc_maxlen=cfg.doc_maxlen, query_maxlen=cfg.query_maxlen
        )
    import_colbert()
    require_extra("ragatouille", "colbert", "ColBERT fine-tuning runs")
    from colbert.infra.config import RunConfig
    from ragatouille import RAGTrainer

    use_gpu = torch.cuda.is_available() and not req["force_cpu"]
    gpu_ids = (req.get("gpu_ids") or list(range(torch.cuda.device_count()))) if use_gpu else []
    trainer = RAGTrainer(
        model_name=str(init), pretrained_model_name=str(init), n_usable_gpus=len(gpu_ids) if use_gpu else -1
    )
    base_triples, triples = prepare_triples(trainer, req["rows"], cfg, work / "data", seed)
    steps = len(triples) // cfg.batch_size
    if cfg.max_steps:
        steps = min(steps, cfg.max_steps)
    if steps < 1:
        raise SystemExit(f"ColBERT FT: {len(triples)} triples make no batch of {cfg.batch_size}")
    run = {"nranks": len(gpu_ids), "gpus": gpu_ids} if use_gpu else {"nranks": 1}
    trainer.model.run_config = RunConfig(
        **run, experiment="colbert", root=str(work / ".ragatouille"), name=req["run_name"]
    )
    print(
        f"[adaptlab] ColBERT FT: {len(base_triples)} triples x {cfg.epochs} epoch(s), {steps} steps of "
        f"{cfg.batch_size} on {'GPU' if use_gpu else 'CPU (in-process adapter)'}",
        flush=True,
    )
    t0 = time.perf_counter()
    train_kwargs = {
        "batch_size": cfg.batch_size,
        "maxsteps": steps,
        "use_ib_negatives": cfg.use_ib_negatives,
        "learning_rate": cfg.learning_rate,
        "dim": cfg.dim,
        "doc_maxlen": cfg.doc_maxlen,
        "warmup_steps": cfg.warmup_steps,
    }
    with contextlib.nullcontext() if use_gpu else _cpu_adapter():
        checkpoint = trainer.train(**train_kwargs)
    if not checkpoint or not Path(checkpoint).is_dir():
        raise SystemExit(f"ColBERT FT: training returned no checkpoint ({checkpoint!r})")
    record = {
        "checkpoint": str(Path(checkpoint).resolve()),
        "steps": steps,
        "triples": len(triples),
        "triples_sha256": hashlib.sha256(json.dumps(triples).encode()).hexdigest(),
        "train_s": round(time.perf_counter() - t0, 2),
        "device": "cuda" if use_gpu else "cpu",
        "path": "colbert launcher" if use_gpu else "in-process CPU adapter",
        "gpu_ids": gpu_ids,
        "untrained_start": not is_colbert_checkpoint(base),
        **_schedule_record(cfg, steps, len(base_triples)),
        "relative_weight_change": relative_weight_change(init, Path(checkpoint)),
    }
    (work / "result.json").write_text(json.dumps(record))


def _schedule_record(cfg: ColBERTFTConfig, steps: int, n_triples: int) -> dict[str, Any]:
    """Epochs asked and run, and colbert-ai's schedule: ``warmup_steps`` of linear warm-up, then
    linear decay to 0 at ``steps`` (``get_linear_schedule_with_warmup``); the first step runs at
    lr 0 when there is a warm-up."""
    return {
        "epochs_requested": cfg.epochs,
        "epochs_completed": round(steps * cfg.batch_size / n_triples, 3),
        "schedule": {
            "kind": "linear-warmup-linear-decay",
            "learning_rate": cfg.learning_rate,
            "warmup_steps": cfg.warmup_steps,
            "total_steps": steps,
            "batch_size": cfg.batch_size,
            "max_steps": cfg.max_steps or None,
            "capped": bool(cfg.max_steps) and steps == cfg.max_steps,
            "nonzero_lr_steps": steps - (1 if cfg.warmup_steps > 0 else 0),
        },
    }


def relative_weight_change(before: Path, after: Path) -> float | None:
    """``||w - w0|| / ||w0||`` over the floating-point tensors both checkpoints'
    ``model.safetensors`` share (the BERT and the projection); None when either has none."""
    from safetensors.numpy import load_file

    files = [Path(d) / "model.safetensors" for d in (before, after)]
    if not all(f.is_file() for f in files):
        return None
    w0, w1 = (load_file(str(f)) for f in files)
    num = den = 0.0
    for name, a in w0.items():
        b = w1.get(name)
        if b is None or b.shape != a.shape or a.dtype.kind != "f":
            continue
        a64, b64 = a.astype("float64"), b.astype("float64")
        num += float(((b64 - a64) ** 2).sum())
        den += float((a64**2).sum())
    return (num**0.5) / (den**0.5) if den > 0 else None


if __name__ == "__main__":  # the training child; the guard also keeps colbert's spawned ranks from re-running it
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m adaptlab.adapt.train.colbert REQUEST.json")
    _child_main(sys.argv[1])
