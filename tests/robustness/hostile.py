"""Shared pieces of the hostile-input corpus (imported as robustness.hostile): a small results store, hostile file contents,
an in-process CLI runner, and the assertions every case makes (exit status 2, one error line
naming what was wrong, no traceback, the store byte-for-byte unchanged)."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
from pathlib import Path

import numpy as np

from adaptlab import results
from adaptlab.cli import main
from adaptlab.retrieval.records import PerQueryRecords

QRELS = "q1 0 d1 1\nq2 0 d2 1\nq3 0 d3 2\nq3 0 d1 1\n"
RUN = "".join(f"q{q} Q0 d{d} {r} {1.0 - r / 10:.2f} sys\n" for q in (1, 2, 3) for r, d in enumerate((1, 2, 3), start=1))
STUDY = """[study]
name = "robust"
seed = 0

[[datasets]]
name = "syn"
spec = "synthetic:n_documents=6,seed=0"

[[models]]
name = "h"
ref = "hash:16"

[evaluation]
metrics = ["ndcg@10", "acc@1"]
k = 10

[embedding]
use_ray = false
"""

SUBMIT_STUDY = """[study]
name = "s"
[[datasets]]
name = "corpus"
spec = "beir:data/corpus"
[[models]]
name = "hash"
ref = "hash:8"
"""
"""A study of a project whose declared input is data/corpus (the submit cases)."""

HOSTILE_BYTES: dict[str, bytes] = {
    "empty": b"",
    "binary": bytes(range(256)) * 8,
    "nul": b"q1\x000 d1 1\n",
    "utf16": "q1 0 d1 1\nq2 0 d2 1\n".encode("utf-16"),
    "latin1": "q\xe91 0 d1 1\n".encode("latin-1"),
    "truncated": b"q1 0 d",
    "one_column": b"q1\n",
    "long_line": b"q1 0 " + b"d" * 2_000_000 + b" x\n",
    "comments_only": b"# nothing here\n# at all\n",
    "html": b"<html><body>404 Not Found</body></html>\n",
    "json": b'{"q1": {"d1": 1}}\n',
}


def write_file(root: Path, rel: str, text: str = "x") -> Path:
    """Write ``text`` to ``root/rel`` (folders made as needed); returns the path."""
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def digest(root: Path) -> str:
    """Hash of every file under ``root`` (names and bytes): the store before and after a case."""
    h = hashlib.sha256()
    if not root.exists():
        return "absent"
    for dirpath, dirnames, filenames in sorted(os.walk(root)):
        dirnames.sort()
        for name in sorted(filenames):
            p = Path(dirpath) / name
            h.update(str(p.relative_to(root)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def cli(argv: list[str]) -> tuple[int, str, str]:
    """``adaptlab ARGV`` in-process: (status, stdout, stderr). argparse's own exits count too."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else 2
    return rc, out.getvalue(), err.getvalue()


def assert_one_line_error(rc: int, err: str, needles: tuple[str, ...] = ()) -> str:
    """Status 2, exactly one error line on stderr (warnings aside), no traceback; the line
    contains every needle (case-insensitive). Returns the line."""
    assert "Traceback" not in err, err
    lines = [
        ln for ln in err.splitlines() if ln.strip() and ": WARNING: " not in ln and not ln.startswith("[adaptlab]")
    ]
    assert rc == 2, (rc, err)
    assert len(lines) == 1, err
    line = lines[0]
    assert "error" in line.lower(), line
    for n in needles:
        assert n.lower() in line.lower(), (n, line)
    return line


def _records(system: str) -> PerQueryRecords:
    return PerQueryRecords(
        system=system,
        dataset="toy",
        query_ids=["q1", "q2", "q3"],
        topk_ids=[["d1", "d2"], ["d3", "d1"], ["d2", "d3"]],
        topk_scores=np.array([[0.9, 0.5], [0.7, 0.2], [0.4, 0.3]]),
        gold_ids=[["d1"], ["d1", "d2"], ["d9"]],
        gold_rank=[1, 2, 0],
        sim_gold=[0.9, 0.2, np.nan],
        sim_random=[0.1, 0.05, -0.2],
        random_ids=["d7", "d8", "d2"],
    )


def build_store(root: Path) -> results.ResultsStore:
    store = results.open(root, create=True)
    runs = [
        results.run_record(
            s, "toy", model_id=f"m/{s}", model_revision="r", dataset_fingerprint="fp", seed=0, config={"k": 2}
        )
        for s in ("minilm", "bge")
    ]
    metrics = [
        {"system": s, "dataset": "toy", "measure": m, "value": v, "n_queries": 3}
        for s, v in (("minilm", 0.6), ("bge", 0.4))
        for m in ("ndcg@10", "acc@1")
    ]
    metrics.append(
        {"system": "minilm", "dataset": "toy", "measure": "ndcg@10", "value": 0.2, "compared_to": "bge", "p_value": 0.3}
    )
    import pyarrow as pa

    store.commit(runs, metrics, pa.concat_tables([_records("minilm").to_arrow(), _records("bge").to_arrow()]))
    return store
