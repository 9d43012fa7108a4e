"""Submit a study to a Ray cluster as a Ray job (Jobs API), idempotently.

What is uploaded. An allow-list (:mod:`adaptlab.study.upload`): the package source
``platform/adaptlab``, ``jobs/``, ``pyproject.toml``, the README, the study file and its declared
inputs (dataset paths, model directories, the ``[adapt]`` corpus), staged into a folder of their
own that becomes the job's ``working_dir``; dotfiles, credential files, virtualenvs, caches and
results stores never leave this machine. ``adaptlab submit STUDY --dry-run`` lists every file
and the total size, and sends nothing. A study in no project (no ``pyproject.toml`` above it)
uploads only its own file and its declared inputs, and runs the cluster's installed adaptlab.

What runs. ``PYTHONPATH=platform`` in its environment puts the uploaded ``platform/adaptlab``
before the installed package on the import path of the job's driver and of every worker (both
start in the unpacked working directory; Python makes the entry absolute at start). So the job runs the
code that was submitted, not whatever ``adaptlab`` is installed on the cluster (the cluster
still provides the dependencies: torch, Ray, ...). The submitted code is identified by
:func:`source_info` (the working copy's version, its git commit and a hash of the uploaded
package files that were uploaded); the job receives it in ``ADAPTLAB_SUBMITTED_CODE`` and records it with every run.

The entrypoint. Ray runs a job's entrypoint through a shell, so it is built from an argument
list with :func:`shlex.join`: a store or study path is always one argument, never shell syntax.

The store. A relative store path is resolved here, on the submitting side: against the current
directory for ``--store``, against the project root for the study's ``store`` key. A local
path is accepted only when the head runs on this machine (a loopback address); a remote cluster
needs an object-storage URI (``s3://``, ``gs://``, ``az://``) or an explicit
``file:///ABSOLUTE/PATH`` on a file system mounted at that path on every node. Nothing lands in
a job's temporary folder.

Idempotence. The submission id is derived from the study's content and the store, so submitting
the same study again attaches to the job of the same id. When that job ended ``FAILED`` or
``STOPPED``, a new attempt starts under ``<id>-a2``, ``<id>-a3``, ... .

Token authentication. The token comes from ``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH`` or
``~/.ray/auth_token`` as for Ray's own clients; with one available and ``RAY_AUTH_MODE`` unset,
the mode is set to ``token`` for this process (Ray's client ignores the token otherwise). The
token is never printed: Jobs API failures are one line with any token value masked, and every
address is echoed through :func:`adaptlab.errors.mask_url` (``http://admin:***@host:8265``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from adaptlab.errors import AdaptlabError, ConfigError, mask_url
from adaptlab.study.load import load_study
from adaptlab.study.schema import Study, is_store_uri, project_root
from adaptlab.study.upload import UploadPlan, package_files, package_sha256, plan_upload

__all__ = [
    "CODE_ENV",
    "JobsApiError",
    "SubmitResult",
    "build_entrypoint",
    "check_data_reaches_job",
    "describe_code",
    "project_root",
    "resolve_store",
    "source_info",
    "submission_id",
    "submit_study",
    "upload_plan",
]

CODE_ENV = "ADAPTLAB_SUBMITTED_CODE"
"""Environment variable carrying :func:`source_info` (JSON) into the job."""

_log = logging.getLogger(__name__)
_TERMINAL = {"SUCCEEDED", "FAILED", "STOPPED"}
_RETRYABLE = {"FAILED", "STOPPED"}
_LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


class JobsApiError(AdaptlabError):
    """The Ray Jobs API refused or failed a request (one line, no credentials)."""


@dataclass
class SubmitResult:
    submission_id: str
    status: str
    resubmitted: bool
    """True when an existing job of the same id was attached to (nothing new was started)."""
    store: str = ""
    attempt: int = 1
    previous_status: str | None = None
    code: dict[str, Any] = field(default_factory=dict)


def submission_id(study_path: Path, store: str) -> str:
    """``adaptlab-<study name>-<12 hex of sha256(study bytes + store)>`` (the first attempt's id)."""
    data = study_path.read_bytes()
    name = re.sub(r"[^a-zA-Z0-9_-]+", "-", study_path.stem).strip("-")[:40] or "study"
    digest = hashlib.sha256(data + b"\x00" + store.encode()).hexdigest()[:12]
    return f"adaptlab-{name}-{digest}"


def build_entrypoint(study_rel: str, store: str) -> str:
    """The job's shell command, quoted argument by argument (never string formatting)."""
    return shlex.join(["python", "-m", "adaptlab", "run", study_rel, "--store", store])


def _is_local_head(address: str) -> bool:
    host = urlsplit(address if "://" in address else f"http://{address}").hostname or ""
    return host.lower() in _LOOPBACK or host.startswith("127.")


def resolve_store(store: str, *, base: Path, address: str) -> str:
    """The store as the job must see it: a URI as given, an absolute local path for a head on
    this machine; a local path for a remote head is refused. ``base`` anchors relative paths."""
    text = str(store).strip()
    if not text:
        raise ConfigError("--store: empty; give a path (local head) or s3://bucket/prefix")
    if is_store_uri(text):
        from adaptlab.results.store import normalize_uri  # validates the scheme, refuses user:pw@

        try:
            uri, local = normalize_uri(text)
        except AdaptlabError as e:
            raise ConfigError(mask_url(f"--store: {e}")) from e
        # file:///ABS is an explicit promise that every node mounts that path
        return f"file://{local}" if local is not None else uri
    path = Path(text).expanduser()
    path = Path(os.path.abspath(path if path.is_absolute() else base / path))
    if not _is_local_head(address):
        raise ConfigError(
            f"--store {text}: the cluster at {mask_url(address)} is not on this machine, so a local path would land on "
            "its nodes' disks (or a job's temporary folder) and be lost with them; give an object-storage URI "
            "(--store s3://BUCKET/PREFIX, gs://, az://) or file:///ABSOLUTE/PATH on a file system mounted at "
            "that path on every node"
        )
    return str(path)


def check_data_reaches_job(study: Any, root: Path) -> None:
    """Refuse a dataset whose relative path leaves the project folder: only declared inputs
    inside it are uploaded, so inside the job the path would point next to its temporary copy."""
    for ds in study.datasets:
        fmt, sep, path = ds.spec.partition(":")
        if not sep or fmt.lower() == "synthetic" or not path or Path(path).expanduser().is_absolute():
            continue
        full = Path(os.path.abspath(root / path))
        if full != root and root not in full.parents:
            raise ConfigError(
                f"{study.source}: dataset {ds.name!r}: {path} resolves to {full}, outside the project folder "
                f"{root}, and only the study's declared inputs inside that folder are uploaded with the job; "
                "copy the data under the project "
                "(for example data/...; Ray uploads up to about 500 MiB) and point the spec there, or use an "
                "absolute path that exists on every node (baked into the image or copied to the VMs)"
            )


def _git(root: Path, *args: str) -> str:
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}  # read-only: never refresh the index
    try:
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=15, env=env)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def _working_copy_version(root: Path) -> str:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        return str(tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"])
    except (OSError, KeyError, ValueError):
        return ""


def source_info(root: Path, plan: UploadPlan | None = None) -> dict[str, Any]:
    """What ``submit`` uploads: the working copy's ``pyproject`` version, its git commit (and
    whether files differ from it), and a SHA-256 over the uploaded package files (path + bytes;
    :meth:`UploadPlan.package_sha256`). Without a package in the upload every field is empty:
    the job runs the cluster's installed adaptlab."""
    tree = plan.package_sha256() if plan is not None else package_sha256(package_files(root))
    if not tree:
        return {"version": "", "commit": "", "dirty": None, "tree_sha256": ""}
    commit = _git(root, "rev-parse", "HEAD")
    dirty = bool(_git(root, "status", "--porcelain", "--", "platform", "jobs", "pyproject.toml")) if commit else None
    return {"version": _working_copy_version(root), "commit": commit, "dirty": dirty, "tree_sha256": tree}


def describe_code(code: dict[str, Any]) -> str:
    """``adaptlab 0.1.0 (commit 1a2b3c4d5e6f + local changes, files 9f8e7d6c5b4a)``."""
    if not code.get("tree_sha256"):
        return "no package uploaded: the job runs the cluster's installed adaptlab"
    commit = code.get("commit") or ""
    where = f"commit {commit[:12]}" + (" + local changes" if code.get("dirty") else "") if commit else "no git commit"
    return f"adaptlab {code.get('version') or '?'} ({where}, files {str(code.get('tree_sha256', ''))[:12]})"


def _ensure_token_mode() -> bool:
    """Ray's client sends the token only in token mode, and reads the mode once into its config:
    with a token available and ``RAY_AUTH_MODE`` unset, set the mode (before Ray is imported, or
    refreshing Ray's config when it already is). Returns whether the mode was set here."""
    if os.environ.get("RAY_AUTH_MODE"):
        return False
    path = os.environ.get("RAY_AUTH_TOKEN_PATH")
    if not (
        os.environ.get("RAY_AUTH_TOKEN")
        or (path and Path(path).expanduser().is_file())
        or (Path.home() / ".ray" / "auth_token").is_file()
    ):
        return False
    os.environ["RAY_AUTH_MODE"] = "token"
    if "ray._raylet" in sys.modules:  # Ray already read the mode: refresh its cached config
        try:
            from ray._raylet import Config  # type: ignore[attr-defined]  # private, not in Ray's stub

            Config.initialize("")
        except Exception:  # noqa: BLE001 - an older/newer Ray: the env var is all we can do
            pass
    return True


def _one_line(e: BaseException, limit: int = 300) -> str:
    """One line for the user: an HTTP failure as ``HTTP 500: <text of the reply>`` (markup and
    any server-side traceback dropped), credentials masked, at most ``limit`` characters."""
    text = str(e)
    m = re.search(r"status code (\d{3}):?(.*)", text, re.S)
    if m:
        body = re.sub(r"<[^>]*>", " ", m.group(2)).split("Traceback")[0]
        body = " ".join(body.split()).strip(" .")
        text = f"HTTP {m.group(1)}" + (f": {body}" if body else "")
    text = " ".join(text.split()) or type(e).__name__
    for var in ("RAY_AUTH_TOKEN", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        secret = os.environ.get(var)
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    text = re.sub(r"(?i)(bearer|token[=:])\s*[A-Za-z0-9._~+/-]{8,}", r"\1 ***", mask_url(text))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def jobs_address(address: str) -> str:
    """The Jobs API URL of ``address``: ``HOST:PORT`` without a scheme gets ``http://`` (Ray
    would otherwise read it as a GCS address and wait ~35 s before failing)."""
    text = address.strip()
    return text if "://" in text else f"http://{text}"


def _client(address: str) -> Any:
    _ensure_token_mode()  # before importing Ray, which caches the mode
    address = jobs_address(address)
    try:
        from ray.job_submission import JobSubmissionClient
    except ImportError as e:  # pragma: no cover
        raise ConfigError("adaptlab submit needs Ray: pip install 'ray[default]'") from e
    try:
        return JobSubmissionClient(address)
    except Exception as e:  # noqa: BLE001 - connection refused, bad token, bad address, HTTP errors
        hint = ""
        if re.search(r"(?i)token|auth|401|403", str(e)):
            hint = " (make the cluster's token available: RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token)"
        raise JobsApiError(f"--address {mask_url(address)}: cannot reach the Ray Jobs API: {_one_line(e)}{hint}") from e


_TRANSIENT = re.compile(r"(?i)no available agent|try again later")
TRANSIENT_WAIT_S = 60.0
"""How long a request answered "no available agent ... try again later" (a head whose job
agent is still starting) is retried, every 2 s, before the failure is reported."""


def _call(address: str, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    deadline = time.monotonic() + TRANSIENT_WAIT_S
    while True:
        try:
            return fn(*args, **kwargs)
        except AdaptlabError:
            raise
        except Exception as e:  # noqa: BLE001 - HTTP 5xx, timeouts, malformed replies: one line for the user
            if _TRANSIENT.search(str(e)) and time.monotonic() < deadline:
                time.sleep(2.0)
                continue
            raise JobsApiError(f"Ray Jobs API at {mask_url(address)}: {what} failed: {_one_line(e)}") from e


def _status(client: Any, address: str, sid: str) -> str:
    return str(_call(address, f"status of job {sid}", client.get_job_status, sid)).split(".")[-1]


def _attempts(jobs: Any, base: str) -> dict[int, Any]:
    """Existing attempts of ``base``: ``{attempt number: job}`` (``base`` is attempt 1)."""
    out = {}
    for job in jobs:
        sid = getattr(job, "submission_id", None) or ""
        if sid == base:
            out[1] = job
        elif sid.startswith(base + "-a") and sid[len(base) + 2 :].isdigit():
            out[int(sid[len(base) + 2 :])] = job
    return out


def upload_plan(study_path: str | Path, *, allow_credentials: Iterable[str] = ()) -> tuple[Any, UploadPlan]:
    """The validated study and exactly what submitting it would upload (nothing is sent):
    the allow-list of :mod:`adaptlab.study.upload` rooted at the study's project (or, for a study
    in no project, its own folder), less the files with credential content that
    ``allow_credentials`` (paths in the upload) does not name. A declared input outside that
    folder is a ConfigError."""
    path = Path(study_path).resolve()
    study = load_study(path)  # validate before anything leaves this machine
    root = project_root(path.parent)
    check_data_reaches_job(study, root)
    return study, plan_upload(
        study, path, root, in_project=(root / "pyproject.toml").is_file(), allow_credentials=allow_credentials
    )


def submit_study(
    study_path: str | Path,
    address: str,
    *,
    store: str | None = None,
    wait: bool = False,
    timeout_s: float | None = None,
    log=None,
    allow_credentials: Iterable[str] = (),
) -> SubmitResult:
    """Submit ``study_path`` to the Ray cluster at ``address`` as a Ray job, idempotently.

    The module docstring says what a remote cluster accepts and what is uploaded
    (:func:`upload_plan` lists it and sends nothing).

    Parameters
    ----------
    study_path : str or path
        The study file, validated here before anything is sent.
    address : str
        The cluster's dashboard, ``http://HOST:8265``.
    store : str, optional
        Like ``--store``, relative to the current directory (the study's ``store`` key is
        relative to the project root).
    wait : bool
        Follow the job until it ends (or ``timeout_s`` passes).
    timeout_s : float, optional
        How long ``wait`` follows the job.
    log : callable, optional
        Receives the job's log lines while it is followed.
    allow_credentials : iterable of str
        Files to upload although they hold credentials (as in :func:`upload_plan`). Each file
        left out for its credential content is a warning line naming it and this option.

    Returns
    -------
    SubmitResult
        ``submission_id`` (derived from the study's content and the store), ``status``,
        ``resubmitted`` (an existing job of the same id was attached to), ``attempt``.

    Examples
    --------
    >>> from pathlib import Path
    >>> _ = Path("demo.toml").write_text(
    ...     '[study]\\nname = "demo"\\n[[datasets]]\\nname = "s"\\n'
    ...     'spec = "synthetic:n_documents=3"\\n[[models]]\\nname = "hash"\\nref = "hash"\\n'
    ... )
    >>> study, plan = upload_plan("demo.toml")  # what would be sent; nothing is
    >>> sorted(plan.files)
    ['demo.toml']
    >>> submit_study("demo.toml", "http://127.0.0.1:8265")  # needs a Ray cluster  # doctest: +SKIP
    SubmitResult(submission_id='adaptlab-demo-...', status='PENDING', resubmitted=False, ...)
    """
    study, plan = upload_plan(study_path, allow_credentials=allow_credentials)
    for line in plan.refused_lines():
        _log.warning("%s", line)
    resolved = _store_of(study, plan, store, address)
    code = source_info(plan.root, plan)
    base = submission_id(plan.root / plan.study_rel, resolved)
    client = _client(address)
    n, previous = _latest_attempt(client, address, base)
    if previous is not None and previous not in _RETRYABLE:  # running or done: attached to, not resubmitted
        sid = _attempt_id(base, n)
        status = _follow(client, address, sid, timeout_s, log) if wait else previous
        return SubmitResult(sid, status, True, resolved, n, None, code)
    n += 1
    sid = _attempt_id(base, n)
    _submit(
        client, address, sid, plan, resolved, code, {"adaptlab.study": study.study.name, "adaptlab.attempt": str(n)}
    )
    status = _follow(client, address, sid, timeout_s, log) if wait else _status(client, address, sid)
    return SubmitResult(sid, status, False, resolved, n, previous, code)


def _store_of(study: Study, plan: UploadPlan, store: str | None, address: str) -> str:
    """The job's results store: ``store`` relative to the current directory (``--store``), else
    the study's ``store`` key (default ``results/<name>``) relative to the project root."""
    if store is not None:
        return resolve_store(store, base=Path.cwd(), address=address)
    return resolve_store(study.study.store or f"results/{study.study.name}", base=plan.root, address=address)


def _attempt_id(base: str, n: int) -> str:
    """The submission id of attempt ``n`` of ``base`` (``base`` itself is attempt 1)."""
    return base if n == 1 else f"{base}-a{n}"


def _latest_attempt(client: Any, address: str, base: str) -> tuple[int, str | None]:
    """The number of the latest attempt of ``base`` on the cluster (0: none) and its status (None:
    none)."""
    attempts = _attempts(_call(address, "listing jobs", client.list_jobs), base)
    if not attempts:
        return 0, None
    n = max(attempts)
    return n, _status(client, address, _attempt_id(base, n))


def _submit(
    client: Any, address: str, sid: str, plan: UploadPlan, store: str, code: dict[str, Any], metadata: dict[str, str]
) -> None:
    """Stage the upload in a temporary folder and submit the job with it as ``working_dir``
    (Ray packs and uploads it inside ``submit_job``; the folder is removed afterwards)."""
    with tempfile.TemporaryDirectory(prefix="adaptlab-upload-") as tmp:
        staged = plan.stage(Path(tmp))
        _call(
            address,
            "submitting the job",
            client.submit_job,
            entrypoint=build_entrypoint(plan.study_rel, store),
            submission_id=sid,
            runtime_env={
                "working_dir": str(staged),
                # relative: the job's driver and every worker start in the unpacked working_dir
                "env_vars": {
                    "PYTHONPATH": "platform",
                    "HF_HUB_OFFLINE": "1",
                    "TOKENIZERS_PARALLELISM": "false",
                    CODE_ENV: json.dumps(code, sort_keys=True),
                },
            },
            metadata={
                **metadata,
                "adaptlab.version": str(code["version"]),
                "adaptlab.commit": str(code["commit"]),
                "adaptlab.tree_sha256": str(code["tree_sha256"]),
            },
        )


def _follow(client: Any, address: str, sid: str, timeout_s: float | None, log=None) -> str:
    """Print the job's logs as they grow until it ends; returns the final status."""
    log = log or (lambda s: print(s, end="", flush=True))
    start, shown = time.monotonic(), 0
    while True:
        status = _status(client, address, sid)
        logs = _call(address, f"logs of job {sid}", client.get_job_logs, sid) or ""
        if len(logs) > shown:
            log(logs[shown:])
            shown = len(logs)
        if status in _TERMINAL:
            return status
        if timeout_s is not None and time.monotonic() - start > timeout_s:
            print(f"\n[adaptlab] still {status} after {timeout_s:.0f} s; stopped following", file=sys.stderr)
            return status
        time.sleep(1.0)
