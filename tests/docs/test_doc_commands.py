"""The docs' commands are claims: each `adaptlab ...` command in a shell block (```bash, ```sh,
```console, or an untagged block) or in an inline code span with an option, in README.md,
clusters/README.md, docs/*.md, docs/tutorials/*.md and docs/how-to/*.md, either runs here (in-process, on a store built once from a small
study, with the TREC files its names ask for) and exits 0 with output, or is in SKIP with the reason
it cannot run in a test. Other shell commands (pip, ray, docker, ...) must be in SKIP too, so a new
docs command must be classified. Where the docs show the output, a stable part of it is checked."""

from __future__ import annotations

import re
import shlex
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [
    ROOT / "README.md",
    ROOT / "clusters" / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "docs" / "tutorials").glob("*.md")),
    *sorted((ROOT / "docs" / "how-to").glob("*.md")),
]
SHELL = {"bash", "sh", "console", "shell", ""}
FENCE = re.compile(r"^[ \t]*```(\w*)[^\n]*\n(.*?)^[ \t]*```", re.S | re.M)
INLINE = re.compile(r"(?<!`)`(adaptlab [^`\n]*--[^`\n]*)`(?!`)")

# Commands that need a cluster, a cloud, a GPU, the network or minutes: not run, with the reason.
_CLUSTER = "needs a running Ray cluster (tests/clusters and tests/runtime start their own)"
_REAL_MODEL = "embeds with the real MiniLM weights (minutes on 2 cores; tests/study runs the quickstart)"
_INSTALL = "installs packages (the CI image is built with it)"
_GPU = "needs a CUDA GPU and the GPU benchmark kit (docs/gpu.md)"
_CLOUD = "needs Kubernetes, Docker, cloud VMs or root (clusters/README.md)"
_SAME = "the same computation as "
_BENCH = (
    "a benchmark of docs/performance.md (minutes to an hour on 2 cores; tests/docs/test_bench_*.py "
    "run reduced versions of the benchmarks)"
)
_REPORT = (
    "the README's report run (--format svg), in another figure format (1-2 min each on 2 loaded cores; "
    "tests/analysis/test_report.py writes each format)"
)
SKIP: dict[str, str] = {
    "adaptlab results --store results/faq --filter group=question_type=factoid": "the docs' store holds no grouped dataset; tests/cli/test_groups_cli.py reads per-group rows this way",
    "adaptlab compare --store results/faq --by question_type": "the docs' store holds no grouped dataset; tests/cli/test_groups_cli.py runs it on a store that has one",
    "pip install torch==2.13.0": _INSTALL,
    "pip install -e .": _INSTALL,
    'pip install -e ".[test]"': _INSTALL,
    'pip install -e ".[gpu]"': _INSTALL,
    "pip install torch --index-url https://download.pytorch.org/whl/cu124": _INSTALL,
    "pip install faiss-gpu-cu12": _INSTALL,
    "python -m pytest -q": "the test suite itself",
    "pip wheel --no-deps -w clusters/dist .": "builds the cluster archive into the project (about a minute; "
    "measured by hand, issue 20)",
    "adaptlab run jobs/quickstart.toml": _REAL_MODEL,
    "adaptlab run jobs/scifact.toml --store /tmp/s --format json": _REAL_MODEL + " on SciFact",
    "adaptlab run jobs/scale_study_small.toml --store DIR": "trains adapted models (tests/study/scale run it smaller)",
    "adaptlab run jobs/scale_study.toml": "the full scale study, for a GPU cluster",
    "adaptlab run --model minilm --dataset beir:PATH --split test --metrics ndcg@10,recall@100": _REAL_MODEL,
    "adaptlab submit jobs/quickstart.toml --address http://HOST:8265 --wait": _CLUSTER,
    "adaptlab submit jobs/quickstart.toml --address http://127.0.0.1:8266 --wait": _CLUSTER,
    "adaptlab submit jobs/scale_study_small.toml --address http://127.0.0.1:8265 "
    "--store s3://BUCKET/scale_small --wait": _CLUSTER + " and a bucket",
    "adaptlab results --store s3://BUCKET/scale_small --latest": "needs the bucket (tests/storage run S3 stores on moto)",
    'adaptlab results --store URI --sql "SELECT ..."': "a placeholder query (the full one in docs/results-store.md runs)",
    "adaptlab import --store URI --system NAME results/*.json": "needs MTEB result files (tests/results/test_mteb_roundtrip.py exports a store and imports it back)",
    "adaptlab results --store URI --has-run RUN_ID": "a placeholder run id (tests/robustness/test_robust_commit_retry.py asks it after a cut commit)",
    "adaptlab results migrate OLD NEW": "needs a store of the previous layout (tests/results test migrate)",
    "adaptlab submit STUDY --dry-run": "a placeholder study (adaptlab submit jobs/scale_study_small.toml --dry-run runs)",
    "adaptlab report --store results/my-domain --out report/": _SAME + _REPORT,
    "adaptlab scaling --store DIR --metric ndcg@10 --target 0.02": "needs a scale study's store (tests/analysis/test_scaling.py runs the command on one)",
    "adaptlab results --store DIR --scaling --latest": "needs a scale study's store (tests/analysis/test_scaling.py runs the command on one)",
    "adaptlab scaling --store /tmp/pdfstudy/store --figure docs/how-to/pdf-scale-study-scaling.svg": "needs the benchmark's store (python -m benchmarks.pdf_scale_study)",
    "adaptlab run my-domain.toml": "trains adapted models on the reader's PDFs (tests/study/scale run studies like it)",
    "adaptlab inspect --store results/my-domain --system minilm-ft-s60 --against minilm-base --dataset heldout": "needs the tutorial's trained study (the same options run in docs/how-to/inspect-disagreements.md)",
    "export RAY_AUTH_MODE=token RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0": _CLUSTER,
    'free_port() { python -c \'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); '
    "print(s.getsockname()[1])'; }": _CLUSTER,
    "DASHBOARD=$(free_port)": _CLUSTER,
    "ray get-auth-token --generate > /dev/null": _CLUSTER,
    "chmod 600 ~/.ray/auth_token": "changes the reader's token file",
    "ray start --head --block --node-ip-address=127.0.0.1 --dashboard-host=127.0.0.1 --port=$(free_port) "
    "--dashboard-port=$DASHBOARD --dashboard-agent-listen-port=$(free_port) --dashboard-agent-grpc-port=$(free_port) "
    "--metrics-export-port=$(free_port) --runtime-env-agent-port=$(free_port) --node-manager-port=$(free_port) "
    "--object-manager-port=$(free_port) --ray-client-server-port=$(free_port) --temp-dir=/tmp/ray-study "
    "--disable-usage-stats --system-config='{\"enable_metrics_collection\":false}' > /tmp/ray-study.log 2>&1 &": _CLUSTER
    + " (run by hand: every listener on 127.0.0.1, and kill $HEAD stopped all 18 of its processes)",
    "HEAD=$!": _CLUSTER,
    "kill $HEAD": _CLUSTER,
    "adaptlab submit jobs/quickstart.toml --address http://127.0.0.1:$DASHBOARD --wait": _CLUSTER,
    **{
        f"python -m benchmarks.{cmd}": _BENCH
        for cmd in (
            "bench_scale --sizes 10,100,700 --nodes 1 --json scale1.json",
            "bench_scale --sizes 10,100,700 --nodes 3 --timeout 6000 --json scale3.json",
            "bench_scale --sizes 10 --backend auto --compare-mining --json scale-mining.json",
            "bench_scale --sizes 100 --backend auto --compare-mining --json scale-mining-100.json",
            "pdf_scale_study",
            "pdf_scale_study --precision bf16 --fused-attention --gradient-checkpointing --cpus-per-job 2",
            "pdf_scale_study --work /tmp/pdfstudy --pages 48 --scales 10,20,40 --variants base,ft --min-steps 3",
            "bench_train --against-st",
            "bench_backends --backends torch:fp32,openvino:fp32,openvino:bf16,openvino:int8 --docs 0 --speed-n 192 --repeat 3",
            "bench_backends --backends torch:fp32,auto:fp32,onnx:fp32,onnx:int8,openvino:int8 --docs 1000 --speed-n 128 "
            "--repeat 3 --threads 2",
            "bench_backends --backends torch:fp32,auto:fp32 --docs 400 --speed-n 16 --repeat 1 --threads 2",
            "bench_gemm --profile 256 --threads 1",
            "bench_gemm --profile 256 --threads 2",
            "bench_embed --n 4000",
            "bench_bootstrap",
            "bench_search",
        )
    },
    "python -m benchmarks.bench_install": _INSTALL + " into new virtual environments (8 to 13 minutes each)",
    "python -m benchmarks.bench_install --target all": _INSTALL
    + " into new virtual environments (8 to 13 minutes each)",
    "export RAY_AUTH_MODE=token": _CLUSTER,
    "ray get-auth-token --generate": _CLUSTER,
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 ray start --head --node-ip-address=127.0.0.1 --dashboard-host=127.0.0.1 "
    "--port=6390 --dashboard-port=8266 --system-config='{\"enable_metrics_collection\":false}'": _CLUSTER,
    "ray stop": "stops every Ray process of the user (other tests' clusters too)",
    'python -c "import torch, cupy; print(torch.cuda.get_device_name(0), cupy.cuda.runtime.getDeviceCount())"': _GPU,
    "python3 benchmarks/gpu/summarize.py benchmarks/results/raw": _GPU,
    "OUT=/tmp/kit bash benchmarks/gpu/run_all.sh --part 0,1,2,3,4,5,6 --smoke": _GPU + " (minutes without one)",
    "python3 benchmarks/gpu/summarize.py /tmp/kit --out /tmp/kit/report.md": _GPU,
    "python -m benchmarks.bench_embed --n 200 --texts sentences --dtype bf16 --warmup --json": _GPU,
    "python -m benchmarks.bench_search --docs 20000 --queries 200 --baseline both --json": _GPU,
    "python -m benchmarks.bench_bootstrap --queries 2000 --resamples 200 --systems 4 --backend both "
    "--method index": _GPU,
    "python -m benchmarks.bench_train --steps 3 --batch-size 8": _GPU,
}
_CLOUD_PREFIXES = ("docker ", "kubectl ", "sudo ", "ray up", "ray down", "ray attach", "ssh ")


@dataclass(frozen=True)
class DocCommand:
    """One command of the docs: where it is and its text (continuations joined, comment cut)."""

    where: str
    text: str


def _logical_lines(body: str) -> list[str]:
    """The block's lines with backslash continuations joined."""
    out: list[str] = []
    for raw in body.replace("\\\n", " ").splitlines():
        out.append(" ".join(raw.split()))
    return out


def _cut_comment(line: str) -> str:
    """``line`` without a trailing ``# comment`` (a ``#`` outside quotes after a space)."""
    quote = None
    for i, ch in enumerate(line):
        if ch in "'\"" and quote in (None, ch):
            quote = None if quote else ch
        elif ch == "#" and quote is None and (i == 0 or line[i - 1] == " "):
            return line[:i].strip()
    return line.strip()


def _block_commands(lang: str, body: str) -> list[str]:
    """The commands of one fenced block: every line of a shell block (``$ `` prompts dropped,
    ``&&`` chains split); of an untagged block only lines that start with ``adaptlab ``."""
    found: list[str] = []
    for line in _logical_lines(body):
        line = _cut_comment(line.removeprefix("$ "))
        if not line or (lang == "" and not line.startswith("adaptlab ")) or line.startswith("adaptlab results: error"):
            continue
        found += [part.strip() for part in line.split(" && ") if part.strip()]
    return found


def extract(path: Path, root: Path = ROOT) -> list[DocCommand]:
    """Every command of one Markdown file: shell blocks, then inline spans ``adaptlab ... --...``."""
    text = path.read_text(encoding="utf-8")
    rel = path.relative_to(root).as_posix()
    found: list[DocCommand] = []
    for m in FENCE.finditer(text):
        if m.group(1) in SHELL:
            line = text[: m.start()].count("\n") + 1
            found += [DocCommand(f"{rel}:{line}", c) for c in _block_commands(m.group(1), m.group(2))]
    prose = FENCE.sub("", text)
    found += [DocCommand(f"{rel} (inline)", " ".join(m.group(1).split())) for m in INLINE.finditer(prose)]
    return found


def all_commands() -> list[DocCommand]:
    """The commands of every docs file, each text once (its first place)."""
    seen: dict[str, DocCommand] = {}
    for path in DOCS:
        for c in extract(path):
            seen.setdefault(c.text, c)
    return list(seen.values())


def skip_reason(text: str) -> str | None:
    """Why ``text`` is not run here (None: it runs)."""
    if text in SKIP:
        return SKIP[text]
    if text.startswith(_CLOUD_PREFIXES):
        return _CLOUD
    return None


# Commands that run but take 15-60 s each on a loaded 2-core machine (power simulations over
# hundreds of queries, full reports with figures): marked slow, so the fast suite stays quick.
SLOW = {
    "adaptlab run faq.toml",
    "adaptlab plan --qrels QRELS --run A.trec --run B.trec --metric ndcg@10 --effect 0.02",
    "adaptlab report --store DIR --out report/ --format svg",
    "adaptlab export --store results/ --to mlflow --out file:./mlruns [--experiment NAME] [--artifact report.html]",
    "adaptlab export --store results/ --to wandb --out wandb-runs/ [--project NAME] [--artifact report.html]",
}

COMMANDS = all_commands()
RUN = [
    pytest.param(c, id=f"{c.where} {c.text[:60]}", marks=[pytest.mark.slow] if c.text in SLOW else [])
    for c in COMMANDS
    if skip_reason(c.text) is None
]

MUTATES = ("results compact", "results repair", "cache clear")  # these run on a copy of the store
_ALTERNATIVES = re.compile(r"^[\w@-]+(\|[\w@-]+)+$")


def argv_variants(text: str, store: Path) -> list[list[str]]:
    """The argument lists of one docs command: optional ``[...]`` groups left out, a ``> file``
    redirect cut, ``a|b|c`` alternatives each run, and ``--store`` pointing at the test's store
    (but for ``run`` and ``submit``, whose stores are written)."""
    words = shlex.split(re.sub(r"\s\[[^\]]*\]", "", text))[1:]
    if ">" in words:
        words = words[: words.index(">")]
    if words[0] not in ("run", "submit"):
        words = [str(store) if i and words[i - 1] == "--store" else w for i, w in enumerate(words)]
    variants: list[list[str]] = [[]]
    for w in words:
        options = w.split("|") if _ALTERNATIVES.match(w) else [w]
        variants = [v + [o] for v in variants for o in options]
    return variants


# Where the docs show a command's output: a stable part of it, checked on the test's output.
EXPECT: dict[str, Callable[[str, Path], None]] = {}


def expects(text: str) -> Callable[[Callable[[str, Path], None]], Callable[[str, Path], None]]:
    """Register the decorated function as the output check of the docs command ``text``."""

    def register(check: Callable[[str, Path], None]) -> Callable[[str, Path], None]:
        EXPECT[text] = check
        return check

    return register


@expects("adaptlab results --store S --wide --filter measure=ndcg@10,mrr")
def _wide(out: str, cwd: Path) -> None:
    lines = out.splitlines()
    assert lines[0].split() == ["dataset", "system", "ndcg@10", "mrr"]  # "columns in this order"
    assert re.search(r"\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\]", lines[2])
    assert "Point estimates with 95% confidence intervals in brackets" in out


@expects("adaptlab results --store S --wide --format csv")
def _wide_csv(out: str, cwd: Path) -> None:
    assert out.splitlines()[0].startswith("dataset,system,")
    assert ",ndcg@10,ndcg@10_ci_low,ndcg@10_ci_high," in out.splitlines()[0] + ","


@expects("adaptlab results --store S --format latex --digits 3 > table.tex")
def _latex(out: str, cwd: Path) -> None:
    assert "\\caption{Point estimates with 95\\% confidence intervals in brackets" in out
    assert "\\toprule" in out and "Dataset & System &" in out


@expects(
    "adaptlab evaluate --qrels qrels.test.trec --run bm25.trec --run minilm.trec "
    "--metrics ndcg@10,acc@5,mrr@10,recall@100 --bootstrap 1000 --seed 0"
)
def _evaluate(out: str, cwd: Path) -> None:
    assert "bm25" in out and "minilm" in out and "recall@100" in out  # system names = the files' stems


@expects("adaptlab submit jobs/scale_study_small.toml --dry-run")
def _dry_run(out: str, cwd: Path) -> None:
    assert "total" in out.lower()  # "every file, its size, the total"


@expects("adaptlab report --store DIR --out report/ --format svg")
def _report_svg(out: str, cwd: Path) -> None:
    assert list((cwd / "report" / "figures").glob("*.svg"))
    assert "data:image/svg+xml;base64," in (cwd / "report" / "report.html").read_text()  # self-contained


@expects("adaptlab export --store results/ --to mteb --out mteb-results/ [--system S] [--dataset D] [--split test]")
def _mteb(out: str, cwd: Path) -> None:
    assert list((cwd / "mteb-results").rglob("*.json"))


@expects("adaptlab inspect --store results/study --system minilm-base --limit 5 --data beir:DATA_DIR/heldout")
def _inspect_texts(out: str, cwd: Path) -> None:
    # five queries, each with its text: heldout's from --data, scifact's from the spec its runs recorded
    assert len(re.findall(r"^- \[(?:heldout|scifact)\] \S+: \S", out, re.M)) == 5


@expects("adaptlab run faq.toml")
def _faq_study(out: str, cwd: Path) -> None:
    # the tutorial's CSV through its study: both systems, the pair it names, the store it names
    assert "== faq ==" in out and "minilm - bm25" in out
    assert (cwd / "results" / "faq" / "_delta_log").is_dir()


@expects("adaptlab run my-domain.toml --dry-run")
def _own_corpus_plan(out: str, cwd: Path) -> None:
    assert "unit='pages'" in out and "scales=[20, 60]" in out and "variants=['base', 'ft']" in out


def _run_one(cli, argv: list[str]) -> str:
    res = cli(*argv)
    assert res.returncode == 0, f"adaptlab {shlex.join(argv)} exited {res.returncode}: {res.stderr.strip()[-800:]}"
    assert res.stdout.strip(), f"adaptlab {shlex.join(argv)} printed nothing"
    return res.stdout


@pytest.mark.parametrize("command", RUN)
def test_docs_command_runs(command: DocCommand, cli, docs_store, docs_workdir):
    store = docs_store
    if any(m in command.text for m in MUTATES):
        store = docs_workdir / "store-copy"
        shutil.copytree(docs_store, store)
    for argv in argv_variants(command.text, store):
        out = _run_one(cli, argv)
        if command.text in EXPECT:
            EXPECT[command.text](out, docs_workdir)


def test_every_docs_command_is_run_or_skipped_with_a_reason():
    unknown = [
        f"{c.where}: {c.text}" for c in COMMANDS if not c.text.startswith("adaptlab ") and skip_reason(c.text) is None
    ]
    assert not unknown, "docs commands neither run by this test nor in its SKIP table:\n" + "\n".join(unknown)


def test_skip_and_expect_tables_name_commands_the_docs_still_have():
    texts = {c.text for c in COMMANDS}
    stale = sorted((set(SKIP) | set(EXPECT) | SLOW) - texts)
    assert not stale, "SKIP/EXPECT entries no docs file has any more (remove them):\n" + "\n".join(stale)


def test_the_extractor_sees_blocks_continuations_chains_and_inline_spans(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text(
        "Run `adaptlab results --store S` or `adaptlab cache`.\n\n"
        "```bash\n$ pip install a && adaptlab evaluate --qrels q \\\n    --run r  # a comment\n```\n\n"
        "```\nadaptlab results --store S   # untagged\ndiagram --> arrows\n```\n\n"
        "```python\nadaptlab = 1\n```\n"
    )
    got = [(c.where, c.text) for c in extract(doc, tmp_path)]
    assert got == [
        ("x.md:3", "pip install a"),
        ("x.md:3", "adaptlab evaluate --qrels q --run r"),
        ("x.md:8", "adaptlab results --store S"),
        ("x.md (inline)", "adaptlab results --store S"),
    ]


def test_argv_variants_substitute_the_store_and_expand_the_docs_notation(tmp_path):
    st = tmp_path / "st"
    assert argv_variants("adaptlab results --store S --table runs|history > t.txt", st) == [
        ["results", "--store", str(st), "--table", "runs"],
        ["results", "--store", str(st), "--table", "history"],
    ]
    assert argv_variants("adaptlab export --store results/ --to ranx --out r/ [--system S]", st) == [
        ["export", "--store", str(st), "--to", "ranx", "--out", "r/"]
    ]
    assert argv_variants('adaptlab results --store S --sql "SELECT a|b"', st)[0][-1] == "SELECT a|b"
    assert argv_variants("adaptlab run x.toml --store DIR", st) == [["run", "x.toml", "--store", "DIR"]]


def _keys(doc: object, real: object, where: str = "") -> list[str]:
    """Keys of the docs' JSON example that the real output lacks (names of systems and measures,
    which differ by data, are matched by position)."""
    if isinstance(doc, dict) and isinstance(real, dict):
        missing = []
        for i, (k, v) in enumerate(doc.items()):
            if k in real:
                missing += _keys(v, real[k], f"{where}.{k}")
            elif where.endswith((".systems", ".systems.*")) and len(real) > i:
                missing += _keys(v, list(real.values())[i], f"{where}.*")
            else:
                missing.append(f"{where}.{k}")
        return missing
    if isinstance(doc, list) and isinstance(real, list) and doc and real:
        return _keys(doc[0], real[0], f"{where}[0]")
    return []


def test_evaluate_json_has_the_fields_the_docs_show(cli, docs_workdir):
    import json

    text = (ROOT / "docs" / "how-to" / "evaluate-trec-runs.md").read_text(encoding="utf-8")
    shown = json.loads(re.search(r"`--format json` prints\s*```json\n(.*?)```", text, re.S).group(1))
    res = cli(
        "evaluate",
        "--qrels",
        "qrels.test.trec",
        "--run",
        "bm25.trec",
        "--run",
        "minilm.trec",
        "--metrics",
        "ndcg@10",
        "--bootstrap",
        "200",
        "--seed",
        "0",
        "--format",
        "json",
    )
    assert res.returncode == 0, res.stderr
    real = json.loads(res.stdout)
    assert not _keys(shown, real), f"fields the docs show but evaluate --format json lacks: {_keys(shown, real)}"
