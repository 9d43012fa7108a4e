"""Turn the GPU kit's raw outputs into one Markdown report, and record single steps.

python3 benchmarks/gpu/summarize.py [RAW_DIR] [--out FILE]
    RAW_DIR (default benchmarks/results/raw) holds partN.jsonl / partN.txt / part5_gpu.csv as
    written by run_all.sh (copy each remote command's files there). Writes
    benchmarks/results/gpu-<device>.md (or --out): every figure, the command that made it,
    the device, and the goals met or not.

summarize.py --record --part N --step NAME --rc RC --t0 T --t1 T --limit S [--json F] -- CMD...
    (used by run_all.sh) prints one JSON record line for a step.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
V100_SENTENCES_PER_S = 14_200  # sbert.net's published speed of all-MiniLM-L6-v2 on a V100


def record(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--record", action="store_true")
    for k in ("--part", "--step", "--rc", "--t0", "--t1", "--limit", "--json", "--skipped"):
        ap.add_argument(k, default=None)
    ap.add_argument("cmd", nargs="*")
    a = ap.parse_args(argv)
    result = None
    if a.json and Path(a.json).is_file():
        text = Path(a.json).read_text(encoding="utf-8").strip()
        try:
            result = json.loads(text.splitlines()[-1]) if text else None
        except json.JSONDecodeError:
            result = {"unparsed": text[:2000]}
    rc = int(a.rc)
    rec = {
        "part": int(a.part),
        "step": a.step,
        "rc": rc,
        "seconds": round(float(a.t1) - float(a.t0), 3),
        "limit_s": int(float(a.limit)),
        "timed_out": rc in (124, 137),
        "skipped": a.skipped,
        "cmd": shlex.join(_clean_cmd(a.cmd)),
        "result": result,
        "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    print(json.dumps(rec, default=str))
    return 0


def _clean_cmd(cmd: list[str]) -> list[str]:
    """The command as a user would type it: no temporary --json-out path, repo-relative python."""
    if "study-run" in cmd:  # run_all.sh part 5: bash -c '<timestamp each line>' study-run CMD...
        cmd = cmd[cmd.index("study-run") + 1 :]
    out, skip = [], False
    for i, c in enumerate(cmd):
        if skip:
            skip = False
            continue
        if c == "--json-out":
            skip = True
            continue
        if i == 0 and c.endswith(("python", "python3")):
            c = "python3"
        elif c.startswith(str(ROOT) + "/"):
            c = c[len(str(ROOT)) + 1 :]
        out.append(c)
    return out


# ----------------------------------------------------------------------------- report
def load(raw: Path) -> list[dict[str, Any]]:
    recs = []
    for f in sorted(raw.glob("part*.jsonl")):
        for line in f.read_text(encoding="utf-8").splitlines():
            if line.strip():
                try:
                    recs.append(json.loads(line))
                except json.JSONDecodeError:
                    recs.append({"part": -1, "step": f"unparsed line in {f.name}", "rc": -2, "cmd": line[:200]})
    return recs


def _f(x: Any, nd: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        if x != 0 and abs(x) < 10 ** -min(nd, 3):
            return f"{x:.2e}"
        return f"{x:.{nd}f}" if abs(x) < 1e5 else f"{x:.3g}"
    return str(x)


def _goal(ok: bool | None) -> str:
    return "-" if ok is None else ("**met**" if ok else "**NOT met**")


def _status(r: dict[str, Any]) -> str:
    if r.get("skipped"):
        return f"skipped: {r['skipped']}"
    if r.get("timed_out"):
        return f"TIMED OUT after {r.get('limit_s')} s"
    return "ok" if r.get("rc") == 0 else f"exit status {r.get('rc')}"


def device_of(recs: list[dict[str, Any]]) -> str:
    for r in recs:
        res = r.get("result") or {}
        if r.get("step") == "preflight" and res.get("gpu"):
            return str(res["gpu"])
    for r in recs:
        name = (r.get("result") or {}).get("device_name")
        if name and not str(name).startswith("CPU"):
            return str(name)
    for r in recs:
        name = (r.get("result") or {}).get("device_name")
        if name:
            return str(name)
    return "unknown"


def slug(name: str) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return s or "unknown"


def section_embed(rs: list[dict[str, Any]]) -> list[str]:
    out = [
        "## Embedding throughput: Ray actor pool vs plain `SentenceTransformer.encode`",
        "",
        "Goal (issue 10): Ray >= 0.9x plain texts/s on the same GPU. Reference: sbert.net lists "
        f"all-MiniLM-L6-v2 at ~{V100_SENTENCES_PER_S:,} sentences/s on a V100.",
        "",
        "| texts | dtype | n | mean tokens | plain texts/s | Ray texts/s | Ray / plain | goal >= 0.9 | "
        "plain / V100 14.2k | max abs diff | status |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rs:
        x = r.get("result") or {}
        tput = x.get("throughput_ratio")
        v100 = (
            x["plain_texts_per_s"] / V100_SENTENCES_PER_S
            if x.get("texts") == "sentences" and x.get("plain_texts_per_s")
            else None
        )
        out.append(
            f"| {x.get('texts', r['step'])} | {x.get('dtype', '-')} | {_f(x.get('n'))} | "
            f"{_f(x.get('mean_tokens'), 1)} | {_f(x.get('plain_texts_per_s'), 0)} | "
            f"{_f(x.get('ray_texts_per_s'), 0)} | {_f(tput)} | "
            f"{_goal(None if tput is None else tput >= 0.9)} | {_f(v100, 2)} | "
            f"{_f(x.get('max_abs_diff'), 6)} | {_status(r)} |"
        )
    return out + [""]


def section_search(rs: list[dict[str, Any]]) -> list[str]:
    out = [
        "## Exact top-k search",
        "",
        "Bound: corpus bytes (docs x dim x 4) x query blocks / memory bandwidth.",
        "",
        "| step | corpus | queries | k | ours s | FAISS s (where) | torch matmul+topk s | ours / FAISS | "
        "ours / torch | our blocks | bound ms | ours / bound | torch / bound | bandwidth GB/s (source) | "
        "same top-k (FAISS, torch) | status |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rs:
        x = r.get("result") or {}
        where = "GPU" if x.get("faiss_gpu") else "CPU"
        out.append(
            f"| {r['step']} | {_f(x.get('docs'))} x {_f(x.get('dim'))} | {_f(x.get('queries'))} | {_f(x.get('k'))} | "
            f"{_f(x.get('ours_s'))} | {_f(x.get('faiss_s'))} ({where if 'faiss_s' in x else '-'}) | "
            f"{_f(x.get('torch_s'))} | {_f(x.get('ratio_to_faiss'), 2)} | {_f(x.get('ratio_to_torch'), 2)} | "
            f"{_f(x.get('query_blocks'))} of {_f(x.get('our_block'))} | "
            f"{_f(None if x.get('bound_s') is None else x['bound_s'] * 1e3, 2)} | "
            f"{_f(x.get('ours_over_bound'), 1)} | {_f(x.get('torch_over_bound'), 1)} | "
            f"{_f(x.get('bandwidth_gbs'), 0)} ({x.get('bandwidth_source', '-')}) | "
            f"{_f(x.get('same_topk_set_faiss'), 4)}, {_f(x.get('same_topk_set_torch'), 4)} | {_status(r)} |"
        )
    return out + [""]


def section_bootstrap(rs: list[dict[str, Any]]) -> list[str]:
    out = [
        "## Bootstrap: 16 systems x 100k queries x 10k resamples, CIs + all pairs",
        "",
        "| step | method | path (numpy) | NumPy wall s | CuPy wall s | CuPy / NumPy | speed-up | "
        "max CI endpoint diff | scipy 1 system s | status |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rs:
        x = r.get("result") or {}
        ratio = x.get("cupy_over_numpy_wall")
        cupy = x.get("ours_wall_cupy")
        if cupy is None and (x.get("skipped") or {}).get("cupy"):
            cupy = "skipped: " + x["skipped"]["cupy"][:60]
        out.append(
            f"| {r['step']} | {x.get('method', '-')} | {x.get('path_numpy', '-')} | "
            f"{_f(x.get('ours_wall_numpy'))} | {_f(cupy)} | {_f(ratio)} | "
            f"{_f(None if not ratio else 1 / ratio, 2)} | {_f(x.get('max_ci_endpoint_diff'), 8)} | "
            f"{_f(x.get('scipy_wall'))} | {_status(r)} |"
        )
    return out + [""]


def section_train(rs: list[dict[str, Any]]) -> list[str]:
    out = [
        "## FT training steps/s (platform loop, MNRL, same config)",
        "",
        "| device | name | steps | steps/s | triplets/s | first -> last loss | status |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rs:
        x = r.get("result") or {}
        for dev, d in (x.get("devices") or {}).items():
            if "skipped" in d:
                out.append(f"| {dev} | - | - | - | - | - | skipped: {d['skipped']} |")
                continue
            out.append(
                f"| {dev} | {d.get('device_name')} | {d.get('steps')} | {_f(d.get('steps_per_s'))} | "
                f"{_f(d.get('examples_per_s'), 1)} | {_f(d.get('first_loss'))} -> {_f(d.get('last_loss'))} | "
                f"{_status(r)} |"
            )
        if x:
            out.append("")
            out.append(
                f"Config: batch {x.get('batch_size')}, {x.get('negatives')} negatives, max_seq_length "
                f"{x.get('max_seq_length')}; ratio cuda / cpu steps/s: {_f(x.get('ratio_gpu_over_cpu'), 1)}"
            )
        elif not x:
            out.append(f"| - | - | - | - | - | - | {_status(r)} |")
    return out + [""]


def section_study(rs: list[dict[str, Any]], raw: Path) -> list[str]:
    out = ["## Scale study end to end", ""]
    for r in rs:
        out.append(f"- `{r.get('cmd') or 'run_all.sh --part 5'}`: {_status(r)}, wall {_f(r.get('seconds'), 1)} s")
    csv = raw / "part5_gpu.csv"
    if csv.is_file():
        util, mem = [], []
        for line in csv.read_text(encoding="utf-8").splitlines():
            parts = [p.strip() for p in line.split(",")]
            if len(parts) >= 4:
                try:
                    util.append(float(parts[1]))
                    mem.append(float(parts[3]))
                except ValueError:
                    pass
        if util:
            busy = sum(u > 0 for u in util) / len(util)
            out.append(
                f"- GPU utilisation (nvidia-smi, 1 s samples, {len(util)} samples): mean {sum(util) / len(util):.1f}%, "
                f"max {max(util):.0f}%, samples > 0%: {busy:.0%}; memory used max {max(mem):.0f} MiB"
            )
    log = raw / "part5.txt"
    if log.is_file():
        # each timestamped log line's time runs until the next line; summed by the stage it names
        keys = (
            ("colbert", "colbert"),
            ("pt-ft", "pt-ft"),
            ("merg", "merge"),
            ("train", "training"),
            ("fine-tun", "training"),
            ("embedding", "embedding"),
            ("search", "search"),
            ("evaluat", "evaluation"),
            ("bootstrap", "bootstrap"),
            ("loading dataset", "data"),
            ("stored", "store"),
            ("store", "store"),
        )
        stamped = []
        for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
            m = re.match(r"^(\d{9,})\s?(.*)$", line)
            if m:
                text = m.group(2).lower().replace("[adaptlab]", "")
                stage = next((name for key, name in keys if key in text), "other")
                stamped.append((int(m.group(1)), stage))
        spans: dict[str, list[int]] = {}
        for (t, stage), (t_next, _) in zip(stamped, stamped[1:]):
            d = spans.setdefault(stage, [0, t])
            d[0] += t_next - t
        if spans:
            out += [
                "",
                "Per stage (the time from each log line to the next, summed by the stage the line "
                "names; 1 s resolution):",
                "",
                "| stage | first seen (UTC) | seconds |",
                "|---|---|---|",
            ]
            for k, (sec, first) in sorted(spans.items(), key=lambda kv: kv[1][1]):
                out.append(f"| {k} | {datetime.fromtimestamp(first, timezone.utc):%H:%M:%S} | {sec} |")
    return out + [""]


def report(raw: Path, out_path: Path | None) -> Path:
    recs = load(raw)
    dev = device_of(recs)
    by = lambda prefix: [r for r in recs if str(r.get("step", "")).startswith(prefix)]  # noqa: E731
    pre = next((r.get("result") or {} for r in recs if r.get("step") == "preflight"), {})
    lines = [
        f"# GPU measurements: {dev}",
        "",
        f"Made by `python3 benchmarks/gpu/summarize.py {raw}` from the outputs of "
        "`bash benchmarks/gpu/run_all.sh --part N` (benchmarks/gpu/).",
        "",
    ]
    if not any(
        str(r.get("result", {}) and (r.get("result") or {}).get("device", "")).startswith("cuda") for r in recs
    ) and not pre.get("gpu"):
        lines += ["**No GPU in these outputs: these are CPU (smoke) figures, not GPU measurements.**", ""]
    if pre:
        env = pre.get("env", {})
        lines += [
            "## Device and versions",
            "",
            f"- device: {dev}; GPU memory {_f(pre.get('gpu_memory_gb'), 1)} GB; SMs {pre.get('sms', '-')}; "
            f"bandwidth: table {_f(pre.get('bandwidth_table_gbs'), 0)} GB/s, measured copy "
            f"{_f(pre.get('bandwidth_measured_copy_gbs'), 0)} GB/s (read + write)",
            f"- CPU: {env.get('cpu')}; python {env.get('python')}; torch {env.get('torch')} "
            f"(CUDA {env.get('torch_cuda')}); cupy {env.get('cupy')}; faiss {env.get('faiss')}; "
            f"ray {env.get('ray')}; sentence-transformers {env.get('sentence_transformers')}; "
            f"transformers {env.get('transformers')}",
        ]
        for m in pre.get("missing", []):
            lines.append(f"- missing: {m}")
        for m in pre.get("study_problems", []):
            lines.append(f"- missing for the study: {m}")
        lines.append("")
    tests = by("pytest")
    if tests:
        lines += ["## GPU tests (`pytest -m gpu`)", ""]
        for r in tests:
            log = raw / f"part{r['part']}.txt"
            summary = "-"
            if log.is_file():
                hits = re.findall(
                    r"^=*\s*(\d+ (?:passed|failed|skipped|deselected|error).*?)\s*=*\s*$",
                    log.read_text(encoding="utf-8", errors="replace"),
                    flags=re.M,
                )
                summary = hits[-1] if hits else "-"
            skipped = re.search(r"(\d+) skipped", summary)
            ok = r.get("rc") == 0 and not skipped
            lines.append(f"- `{r['cmd']}`: {summary} ({_status(r)}); no GPU test skipped: {_goal(ok)}")
        lines.append("")
    for prefix, fn in (
        ("bootstrap", section_bootstrap),
        ("search", section_search),
        ("embed", section_embed),
        ("train", section_train),
    ):
        rs = by(prefix)
        if rs:
            lines += fn(rs)
    if by("study"):
        lines += section_study(by("study"), raw)
    lines += ["## Commands", "", "Each figure above comes from the command of its step:", ""]
    for r in recs:
        lines.append(
            f"- part {r.get('part')}, {r.get('step')} ({_status(r)}, {_f(r.get('seconds'), 1)} s, "
            f"{r.get('at', '')}): " + (f"`{r['cmd']}`" if r.get("cmd") else "no command (skipped)")
        )
    lines.append("")
    path = out_path or (ROOT / "benchmarks" / "results" / f"gpu-{slug(dev)}.md")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--record" in argv:
        return record(argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("raw", nargs="?", default=str(ROOT / "benchmarks" / "results" / "raw"))
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    raw = Path(a.raw)
    if not any(raw.glob("part*.jsonl")):
        print(f"no part*.jsonl under {raw}: run benchmarks/gpu/run_all.sh --part N first", file=sys.stderr)
        return 1
    print(report(raw, Path(a.out) if a.out else None))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
