"""Benchmark: a PDF scale study like issue 22's, run with ``adaptlab run`` on the embedded Ray,
watching memory.

The issue's study (two public EIS PDFs, 160 pages, ``unit = "pages"``, scales 20/60/120,
variants base/ft/pt-ft, ``max_tokens = 256``, every other key at its default) had Ray kill
training workers for memory again and again on a 24 GB, 2-core machine. This script builds a
corpus like it at run time: two PDFs of ``--pages / 2`` pages each (written with fpdf2, read back
by the platform with pypdf), every page ~``--words`` words of PubMedQA abstracts
(``../shared/data/pubmedqa``, MIT; nothing of that text is kept in the repository) under a
running header and a page number, as an EIS volume has. It writes the study file, runs

    adaptlab run STUDY --store STORE

and every ``--interval`` seconds sums the RSS of the driver and all its descendants (the
embedded Ray: GCS, raylet, workers, agents). At the end it prints (and ``--json`` writes):
wall time, peak total RSS, the number of workers Ray killed for memory (the driver's "N Workers
... killed due to memory pressure" lines, adaptlab's "OutOfMemoryError ... retrying" lines and
the raylet's "memory pressure" kills in the session logs: must be 0), the data-scaling fits of
nDCG@10 the study stored at its end, the number of training
progress lines (``[adaptlab] ...: step i/n, loss ...``) in the log, the exit code and the load
average before and after (the machine may be shared); the study's ``[adapt]`` options as written;
per training stage its seconds, steps and torch threads (its manifest) and the peak RSS of the Ray
worker that ran it; and with ``--against DIR`` (another run's work folder) how many metric rows
differ from that run's, by how much at most, and which ``[adapt]`` options, which stages' torch
threads and which stages' optimizer differ (what explains it: ``lone_stage_all_cpus`` gives a
stage alone on its node all the node's cores, and a matrix product on another thread count rounds
differently; the fused AdamW kernel rounds differently from the per-tensor loop used before).

    python -m benchmarks.pdf_scale_study --work /tmp/pdfstudy              # the issue's study
    python -m benchmarks.pdf_scale_study --work /tmp/pdfstudy --gradient-checkpointing
    python -m benchmarks.pdf_scale_study --work /tmp/pdfstudy --cpus-per-job 4 --precision bf16
    python -m benchmarks.pdf_scale_study --work /tmp/bf16 --precision bf16 --against /tmp/pdfstudy
    python -m benchmarks.pdf_scale_study --work /tmp/pdfstudy --pages 40 --scales 10,20  # smaller
    python -m benchmarks.pdf_scale_study --work /tmp/pdfstudy --pages 48 --scales 10,20,40 --variants base,ft --min-steps 3
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
PROGRESS_LINE = re.compile(r"\[adaptlab\] .*: step \d+/\d+, loss ")
DRIVER_OOM = re.compile(r"(\d+) Workers? \(tasks / actors\) killed due to memory pressure")
ADAPTLAB_OOM = re.compile(r"OutOfMemoryError \(attempt \d+")
RAYLET_OOM = re.compile(r"memory pressure", re.IGNORECASE)
RAY_START_FAILED = "The current node timed out during startup"
STAGE_TITLE = re.compile(r"ray::(adapt:[^\x00 ]+)")


def source_paragraphs(data: Path = DATA) -> list[str]:
    """PubMedQA's abstract sections and long answers, in file order (``pubmedqa/ori_pqal.json``)."""
    file = data / "pubmedqa" / "ori_pqal.json"
    try:
        items = json.loads(file.read_text())
    except OSError as e:
        raise SystemExit(f"{file}: {e.strerror}; expected PubMedQA's ori_pqal.json (see its SOURCE.md)") from e
    out: list[str] = []
    for item in items.values():
        out.extend(str(c) for c in item.get("CONTEXTS", ()))
        if item.get("LONG_ANSWER"):
            out.append(str(item["LONG_ANSWER"]))
    return out


def _latin1(text: str) -> str:
    """fpdf2's core fonts encode Latin-1 only: other characters become '?'."""
    return text.encode("latin-1", "replace").decode("latin-1")


def write_volume(path: Path, title: str, paragraphs: list[str], pages: int, words: int) -> int:
    """One PDF of ``pages`` pages, each ~``words`` words of ``paragraphs`` (consumed from the
    front) under ``title`` as a running header and ``Page N`` as a footer; paragraphs used."""
    from fpdf import FPDF

    pdf = FPDF(format="letter")
    pdf.set_auto_page_break(False)
    pdf.set_margins(18, 14, 18)
    used = 0
    for number in range(1, pages + 1):
        pdf.add_page()
        pdf.set_font("Helvetica", size=8)
        pdf.cell(0, 5, _latin1(title), new_x="LMARGIN", new_y="NEXT", align="C")
        pdf.set_font("Helvetica", size=7)
        count = 0
        while count < words and used < len(paragraphs):
            text = paragraphs[used]
            pdf.multi_cell(0, 3.1, _latin1(text), new_x="LMARGIN", new_y="NEXT")
            pdf.ln(1)
            count, used = count + len(text.split()), used + 1
        pdf.set_y(-12)
        pdf.cell(0, 5, f"Page {number}", align="C")
    pdf.output(str(path))
    return used


def build_corpus(folder: Path, pages: int, words: int) -> dict[str, int]:
    """Two PDF volumes of ``pages // 2`` and ``pages - pages // 2`` pages in ``folder`` (kept
    when a previous run wrote them: a re-run reuses the study's prepared data and embeddings)."""
    folder.mkdir(parents=True, exist_ok=True)
    sizes = {"Final_EIS_Vol_1.pdf": pages // 2, "Final_EIS_Vol_2.pdf": pages - pages // 2}
    done = folder / f".built-{pages}-{words}"
    if done.is_file() and all((folder / name).is_file() for name in sizes):
        return sizes
    paragraphs = source_paragraphs()
    start = 0
    for volume, (name, n) in enumerate(sizes.items(), 1):
        title = f"Riverside Water Project - Final Environmental Impact Statement - Volume {volume}"
        start += write_volume(folder / name, title, paragraphs[start:], n, words)
    if start >= len(paragraphs):
        raise SystemExit(f"{pages} pages of {words} words need more text than PubMedQA has; lower --words")
    done.write_text("")
    return sizes


def study_text(
    corpus: Path,
    store: Path,
    scales: list[int],
    checkpointing: bool,
    speed: str = "",
    variants: tuple[str, ...] = ("base", "ft", "pt-ft"),
) -> str:
    """The issue's study: unit pages, the given scales, ``variants`` (base/ft/pt-ft), max_tokens 256, the rest
    at its defaults (``gradient_checkpointing = true`` when asked, and the ``[adapt]`` lines of
    ``speed``: see :func:`speed_lines`); a small synthetic dataset as the one ``[[datasets]]``
    entry a study needs (evaluation is not what is measured)."""
    extra = ("gradient_checkpointing = true\n" if checkpointing else "") + speed
    return (
        '[study]\nname = "pdf-scale-study"\nseed = 0\n'
        f"store = {json.dumps(str(store))}\n\n"
        '[[datasets]]\nname = "synthetic"\nspec = "synthetic:n_documents=40,seed=1"\n\n'
        '[[models]]\nname = "minilm"\nref = "minilm"\n\n'
        f"[adapt]\ncorpus = {json.dumps(str(corpus))}\n"
        'unit = "pages"\n'
        f"scales = {json.dumps(scales)}\n"
        f"variants = {json.dumps(list(variants))}\n"
        "max_tokens = 256\n" + extra
    )


def speed_lines(a: argparse.Namespace) -> str:
    """The ``[adapt]`` training-speed keys asked on the command line (issue 32): ``cpus_per_job``
    (a stage's torch threads follow it), ``precision`` and ``fused_attention``, and the stages'
    ``min_steps``; none by default."""
    out = f"cpus_per_job = {a.cpus_per_job:g}\n" if a.cpus_per_job else ""
    out += f"precision = {json.dumps(a.precision)}\n" if a.precision else ""
    out += "fused_attention = true\n" if a.fused_attention else ""
    if a.min_steps is not None:  # sub-tables last: every [adapt] key above is written before them
        out += "".join(f"\n[adapt.{stage}]\nmin_steps = {a.min_steps}\n" for stage in ("pt", "ft"))
    return out


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


def _children() -> dict[int, list[int]]:
    """Parent pid -> child pids, from /proc."""
    tree: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def tree_pids(root: int) -> list[int]:
    """``root`` and all its descendants."""
    tree, out, todo = _children(), [], [root]
    while todo and len(out) < 10_000:
        pid = todo.pop()
        out.append(pid)
        todo.extend(tree.get(pid, ()))
    return out


@dataclass
class Sampler:
    """Samples the process tree of ``pid`` every ``interval`` seconds in a thread."""

    pid: int
    interval: float
    peak: int = 0
    peak_processes: int = 0
    samples: int = 0
    session_dirs: set[str] = field(default_factory=set)
    stage_peaks: dict[str, int] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)

    def _look(self) -> None:
        pids = tree_pids(self.pid)
        sizes = {p: _rss(p) for p in pids}
        self.samples += 1
        if sum(sizes.values()) > self.peak:
            self.peak, self.peak_processes = sum(sizes.values()), len(pids)
        for p in pids:
            try:
                args = open(f"/proc/{p}/cmdline", "rb").read().decode(errors="replace")
            except OSError:
                continue
            found = re.search(r"session[_-]dir=([^\x00]+)", args)
            if found:
                self.session_dirs.add(found.group(1))
            stage = STAGE_TITLE.match(args)  # Ray titles a worker by the task it runs
            if stage:
                name = stage.group(1)
                self.stage_peaks[name] = max(self.stage_peaks.get(name, 0), sizes[p])

    def run(self) -> None:
        while not self._stop.wait(self.interval):
            self._look()

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.run, daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        self._stop.set()


def memory_kills(log_text: str, session_dirs: set[str]) -> dict[str, int]:
    """Workers killed for memory, as the driver's log, adaptlab's retries and the raylets say."""
    raylet = 0
    for session in session_dirs:
        for file in Path(session, "logs").glob("raylet*.out"):
            try:
                raylet += sum(
                    1
                    for line in file.read_text(errors="replace").splitlines()
                    if RAYLET_OOM.search(line) and "kill" in line.lower()
                )
            except OSError:
                continue
    return {
        "driver": sum(int(n) for n in DRIVER_OOM.findall(log_text)),
        "adaptlab_retries": len(ADAPTLAB_OOM.findall(log_text)),
        "raylet": raylet,
    }


@dataclass
class Outcome:
    """What one run measured (printed as JSON)."""

    exit_code: int
    wall_s: float
    peak_rss_gb: float
    peak_processes: int
    samples: int
    memory_kills: dict[str, int]
    progress_lines: int
    load_before: tuple[float, ...]
    load_after: tuple[float, ...]
    log: str
    corpus_pages: dict[str, int]
    attempts: int
    options: dict[str, str] = field(default_factory=dict)
    stages: dict[str, dict[str, float]] = field(default_factory=dict)
    against: dict[str, object] = field(default_factory=dict)
    scaling: list[dict[str, object]] = field(default_factory=list)


def adapt_options(study: Path) -> dict[str, str]:
    """The study's ``[adapt]`` keys as written (``key = value`` lines), so two runs' named options
    can be told apart."""
    try:
        text = study.read_text()
    except OSError:
        return {}
    section = text.split("[adapt]", 1)[-1] if "[adapt]" in text else ""
    pairs = (line.split("=", 1) for line in section.splitlines() if "=" in line and not line.startswith("["))
    return {k.strip(): v.strip() for k, v in pairs if k.strip() not in ("corpus",)}


def stage_figures(store: Path, peaks: dict[str, int]) -> dict[str, dict[str, float]]:
    """Per trained artifact (``<variant>-<scale>``): its training seconds, steps, torch threads and
    optimizer (from its manifest; an artifact from before the optimizer was recorded says
    ``"adamw-loop"``, the per-tensor AdamW of that time) and the peak RSS in GB of the Ray worker
    that ran it, where sampled."""
    out: dict[str, dict[str, float]] = {}
    for manifest in sorted(store.glob("artifacts/*/*/manifest.json")):
        training = json.loads(manifest.read_text()).get("training", {})
        label = manifest.parent.name.rsplit("-", 1)[0]
        out[label] = {
            "seconds": training.get("seconds"),
            "steps": training.get("steps"),
            "torch_threads": training.get("torch_threads"),
            "optimizer": training.get("optimizer", "adamw-loop"),
        }
    for title, rss in peaks.items():  # adapt:<stage>:<variant>/<model>/scale=<n>
        found = re.match(r"adapt:(\w+(?:-\w+)*):([\w-]+)/[^/]+/scale=(\d+)", title)
        if found:
            stage, variant, scale = found.groups()
            label = f"{'pt' if stage == 'pt' else variant}-{scale}"
            out.setdefault(label, {})["peak_rss_gb"] = round(rss / 1e9, 2)
    return out


def metric_rows(store: Path) -> dict[tuple[str, str, str], float]:
    """(dataset, system, measure) -> value of the store's metric rows (the latest run of each)."""
    from adaptlab import results

    rows = results.open(str(store)).metrics().to_pylist()
    return {
        (str(r["dataset"]), str(r["system"]), str(r["measure"])): float(r["value"])
        for r in rows
        if r.get("value") is not None
    }


def scaling_fits(store: Path, measure: str = "ndcg@10") -> list[dict[str, object]]:
    """The data-scaling fits of ``measure`` the study stored at its end (slope per 10x with its
    CI, trend, predicted gain at 2x the largest scale: an extrapolation), one dict per curve."""
    from adaptlab import results
    from adaptlab.analysis import scaling_summary_rows, stored_scaling

    store_ = results.open(str(store))
    try:
        return scaling_summary_rows(stored_scaling(store_, measure))
    finally:
        store_.close()


def compare_runs(work: Path, other: Path) -> dict[str, object]:
    """This run's metric rows against those of the run in ``other`` (another work folder): how many
    differ, the largest difference, and the ``[adapt]`` options that differ between the two studies,
    which explain it."""
    mine, theirs = metric_rows(work / "store"), metric_rows(other / "store")
    common = sorted(set(mine) & set(theirs))
    diffs = {k: abs(mine[k] - theirs[k]) for k in common}
    a, b = adapt_options(work / "study.toml"), adapt_options(other / "study.toml")
    fa, fb = (stage_figures(w / "store", {}) for w in (work, other))

    def stages_differing(field: str) -> dict[str, list[object]]:
        return {
            k: [fa[k].get(field), fb[k].get(field)]
            for k in sorted(set(fa) & set(fb))
            if fa[k].get(field) != fb[k].get(field)
        }

    return {
        "other": str(other),
        "rows": len(common),
        "rows_differing": sum(d > 0 for d in diffs.values()),
        "max_abs_diff": max(diffs.values(), default=0.0),
        "options_differing": {k: [a.get(k), b.get(k)] for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)},
        # lone_stage_all_cpus: a stage on another thread count sums its matrix products in another order
        "threads_differing": stages_differing("torch_threads"),
        # the fused AdamW kernel rounds differently from the per-tensor loop (adapt/train/loop.py)
        "optimizer_differing": stages_differing("optimizer"),
    }


def run_study(study: Path, store: Path, log: Path, timeout_s: float, interval: float) -> tuple[int, float, Sampler]:
    """``adaptlab run study --store store`` with stdout and stderr in ``log``, sampled."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    t0 = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "adaptlab", "run", str(study), "--store", str(store)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=ROOT,
        )
        sampler = Sampler(proc.pid, interval)
        sampler.start()
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.terminate()
            try:
                code = proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait(timeout=60)
            out.write(f"\n[pdf_scale_study] timed out after {timeout_s:.0f} s\n")
        finally:
            sampler.stop()
    return code, time.perf_counter() - t0, sampler


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", default=None, help="work folder (corpus, study, store, log); default a temp dir")
    ap.add_argument("--pages", type=int, default=160, help="pages in all (two volumes)")
    ap.add_argument("--words", type=int, default=450, help="words per page (about)")
    ap.add_argument("--scales", default="20,60,120", help="comma-separated page scales")
    ap.add_argument(
        "--variants",
        default="base,ft,pt-ft",
        help="comma-separated [adapt] variants (default base,ft,pt-ft; base,ft trains a third as much)",
    )
    ap.add_argument(
        "--min-steps",
        type=int,
        default=None,
        help="[adapt.pt] and [adapt.ft] min_steps (default theirs, 10): fewer steps on a loaded machine",
    )
    ap.add_argument("--gradient-checkpointing", action="store_true", help="[adapt] gradient_checkpointing = true")
    ap.add_argument("--cpus-per-job", type=float, default=None, help="[adapt] cpus_per_job (threads follow it)")
    ap.add_argument("--precision", default=None, choices=["fp32", "bf16"], help="[adapt] precision")
    ap.add_argument("--fused-attention", action="store_true", help="[adapt] fused_attention = true")
    ap.add_argument("--interval", type=float, default=3.0, help="seconds between RSS samples")
    ap.add_argument("--timeout", type=float, default=3 * 3600.0, help="seconds before the run is stopped")
    ap.add_argument(
        "--ray-start-attempts",
        type=int,
        default=3,
        help="runs when Ray's node times out starting (its fixed 30 s; a loaded machine)",
    )
    ap.add_argument("--json", default=None, help="also write the result to this file")
    ap.add_argument(
        "--against",
        default=None,
        help="another run's work folder: compare metric rows and name the [adapt] options that differ",
    )
    return ap.parse_args(argv)


def check_against(other: str | None) -> None:
    """Refuse an ``--against`` folder with no study and store in one line, before the run (a
    finished run's figures must not be lost to a mistyped path at the end)."""
    if other is None:
        return
    missing = [name for name in ("study.toml", "store") if not (Path(other) / name).exists()]
    if missing:
        sys.exit(
            f"pdf_scale_study: --against {other}: expected another run's work folder with {' and '.join(missing)} in it"
        )


def main(argv: list[str] | None = None) -> Outcome:
    a = parse_args(argv)
    check_against(a.against)
    work = Path(a.work or tempfile.mkdtemp(prefix="pdfstudy-"))
    work.mkdir(parents=True, exist_ok=True)
    pages = build_corpus(work / "corpus", a.pages, a.words)
    study = work / "study.toml"
    scales = [int(s) for s in a.scales.split(",") if s.strip()]
    variants = tuple(v.strip() for v in a.variants.split(",") if v.strip())
    study.write_text(
        study_text(work / "corpus", work / "store", scales, a.gradient_checkpointing, speed_lines(a), variants)
    )
    load_before = os.getloadavg()
    for attempt in range(1, a.ray_start_attempts + 1):
        code, wall, sampler = run_study(study, work / "store", work / "run.log", a.timeout, a.interval)
        text = (work / "run.log").read_text(errors="replace")
        if code == 0 or RAY_START_FAILED not in text:
            break
        print(
            f"[pdf_scale_study] attempt {attempt}: Ray's node did not start in its 30 s (machine load "
            f"{os.getloadavg()[0]:.1f}); the prepared data and embeddings are reused",
            file=sys.stderr,
        )
    outcome = Outcome(
        exit_code=code,
        wall_s=round(wall, 1),
        peak_rss_gb=round(sampler.peak / 1e9, 2),
        peak_processes=sampler.peak_processes,
        samples=sampler.samples,
        memory_kills=memory_kills(text, sampler.session_dirs),
        progress_lines=len(PROGRESS_LINE.findall(text)),
        load_before=tuple(round(x, 1) for x in load_before),
        load_after=tuple(round(x, 1) for x in os.getloadavg()),
        log=str(work / "run.log"),
        corpus_pages=pages,
        attempts=attempt,
        options=adapt_options(study),
        stages=stage_figures(work / "store", sampler.stage_peaks),
        against=compare_runs(work, Path(a.against)) if a.against and code == 0 else {},
        scaling=scaling_fits(work / "store") if code == 0 else [],
    )
    print(json.dumps(asdict(outcome), indent=1))
    if a.json:
        Path(a.json).write_text(json.dumps(asdict(outcome)))
    return outcome


if __name__ == "__main__":
    result = main()
    sys.exit(0 if result.exit_code == 0 and not any(result.memory_kills.values()) and result.progress_lines else 1)
