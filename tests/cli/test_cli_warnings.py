"""adaptlab's own Python warnings (a study of fewer than 30 queries, a proportion with few
failures) reach a command's stderr as one ``adaptlab: WARNING: ...`` line each, like its log
lines, not as Python's file:line pair with the source line; ``--quiet`` hides them; the
in-process CLI leaves ``warnings.showwarning`` as it found it."""

from __future__ import annotations

import io
import subprocess
import sys
import warnings
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

from adaptlab.cli import main
from adaptlab.data.trec import write_trec_qrels, write_trec_run


def _files(root: Path) -> tuple[Path, Path, Path]:
    """Two systems on 12 single-gold queries: small enough for both warnings."""
    qrels = {f"Q{q}": {f"D{q}": 1} for q in range(12)}
    good = {f"Q{q}": {f"D{q}": 0.9, f"D{q + 1}": 0.5} for q in range(12)}
    weak = {f"Q{q}": {f"D{q + 1}": 0.9, f"D{q}": 0.5 if q % 3 else 0.95} for q in range(12)}
    write_trec_qrels(qrels, root / "qrels.txt")
    write_trec_run(good, root / "good.trec", tag="good")
    write_trec_run(weak, root / "weak.trec", tag="weak")
    return root / "qrels.txt", root / "good.trec", root / "weak.trec"


def _evaluate(tmp_path: Path, *extra: str) -> tuple[int, str]:
    """``adaptlab [EXTRA] evaluate`` on the two runs, in a subprocess as users run it."""
    qrels, good, weak = _files(tmp_path)
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "adaptlab",
            *extra,
            "evaluate",
            "--qrels",
            str(qrels),
            "--run",
            str(good),
            "--run",
            str(weak),
            "--metrics",
            "acc@1,mrr",
            "--bootstrap",
            "200",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return res.returncode, res.stderr


def test_own_warnings_are_one_line_each(tmp_path):
    code, err = _evaluate(tmp_path)
    assert code == 0, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert any(line.startswith("adaptlab: WARNING: only 12 queries") for line in lines), err
    assert any(line.startswith("adaptlab: WARNING: few successes or failures") for line in lines), err
    assert "SmallSampleWarning" not in err and "FewOutcomesWarning" not in err and ".py:" not in err, err


def test_quiet_hides_them(tmp_path):
    code, err = _evaluate(tmp_path, "--quiet")
    assert code == 0 and "WARNING" not in err and "Warning" not in err, err


def test_in_process_cli_restores_showwarning(tmp_path):
    qrels, good, weak = _files(tmp_path)
    before = warnings.showwarning
    with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        code = main(["evaluate", "--qrels", str(qrels), "--run", str(good), "--metrics", "mrr", "--bootstrap", "50"])
    assert code == 0 and warnings.showwarning is before
