"""Submit a study to a Ray cluster as a Ray job (Jobs API), idempotently.

The submission id is derived from the study's content (and the store path), so submitting the
same study twice attaches to the existing job instead of starting a second one. The job runs
``python -m adaptlab run STUDY --store STORE`` in a ``working_dir`` runtime environment that
carries the project folder (without results, caches and VCS data). Token authentication: Ray's
client reads the token from ``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH`` or ``~/.ray/auth_token``.
"""

from __future__ import annotations

import hashlib
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from adaptlab.errors import ConfigError
from adaptlab.study.load import load_study
from adaptlab.study.schema import project_root

__all__ = ["SubmitResult", "project_root", "submission_id", "submit_study"]

_EXCLUDES = [".git", "results", ".adaptlab", "**/__pycache__", ".venv", "*.egg-info", ".pytest_cache", "build", "dist"]
_TERMINAL = {"SUCCEEDED", "FAILED", "STOPPED"}


@dataclass
class SubmitResult:
    submission_id: str
    status: str
    resubmitted: bool


def submission_id(study_path: Path, store: str) -> str:
    """``adaptlab-<study name>-<12 hex of sha256(study bytes + store)>``."""
    data = study_path.read_bytes()
    name = re.sub(r"[^a-zA-Z0-9_-]+", "-", study_path.stem).strip("-")[:40] or "study"
    digest = hashlib.sha256(data + b"\x00" + store.encode()).hexdigest()[:12]
    return f"adaptlab-{name}-{digest}"


def submit_study(
    study_path: str | Path,
    address: str,
    *,
    store: str | None = None,
    wait: bool = False,
    timeout_s: float | None = None,
    log=None,
) -> SubmitResult:
    """Submit ``study_path`` to the Ray cluster at ``address`` (``http://HOST:8265``)."""
    path = Path(study_path).resolve()
    study = load_study(path)  # validate before anything leaves this machine
    root = project_root(path.parent)
    rel = path.relative_to(root).as_posix()
    store = store or study.study.store or f"results/{study.study.name}"
    sid = submission_id(path, store)
    try:
        from ray.job_submission import JobSubmissionClient
    except ImportError as e:  # pragma: no cover
        raise ConfigError("adaptlab submit needs Ray: pip install 'ray[default]'") from e
    try:
        client = JobSubmissionClient(address)
    except Exception as e:  # connection refused, bad token, bad address
        raise ConfigError(f"--address {address}: cannot reach the Ray Jobs API ({type(e).__name__}: {e})") from e
    existing = {j.submission_id: j for j in client.list_jobs() if j.submission_id}
    resubmitted = sid in existing
    if not resubmitted:
        client.submit_job(
            entrypoint=f"python -m adaptlab run {rel} --store {store}",
            submission_id=sid,
            runtime_env={"working_dir": str(root), "excludes": _EXCLUDES,
                         "env_vars": {"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}},
            metadata={"adaptlab.study": study.study.name},
        )
    status = str(client.get_job_status(sid)).split(".")[-1]
    if wait:
        status = _follow(client, sid, timeout_s, log or (lambda s: print(s, end="", flush=True)))
    return SubmitResult(sid, status, resubmitted)


def _follow(client, sid: str, timeout_s: float | None, log) -> str:
    """Print the job's logs as they grow until it ends; returns the final status."""
    start, shown = time.monotonic(), 0
    while True:
        status = str(client.get_job_status(sid)).split(".")[-1]
        logs = client.get_job_logs(sid)
        if len(logs) > shown:
            log(logs[shown:])
            shown = len(logs)
        if status in _TERMINAL:
            return status
        if timeout_s is not None and time.monotonic() - start > timeout_s:
            print(f"\n[adaptlab] still {status} after {timeout_s:.0f} s; stopped following", file=sys.stderr)
            return status
        time.sleep(1.0)
