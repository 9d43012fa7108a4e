"""What ``adaptlab submit`` uploads: an allow-list of the project, staged in a folder of its own.

A Ray job's ``working_dir`` is packed whole, so instead of handing Ray the project folder and a
list of exclusions (which missed ``.env`` and ``.aws/credentials``), :func:`plan_upload` names
every file that may leave this machine and :meth:`UploadPlan.stage` links or copies exactly those
into a fresh folder, which becomes the job's ``working_dir``. Allowed:

- the package source ``platform/adaptlab`` (code and package data: :data:`CODE_SUFFIXES`),
- ``jobs/`` (study files and entrypoints: :data:`JOB_SUFFIXES`), ``pyproject.toml`` and the
  README,
- the study file itself and its declared inputs: the local paths of ``[[datasets]]`` specs,
  ``[[models]]`` directories, ``[adapt].corpus`` and ``base_model`` (``[adapt.colbert]``'s too)
  that lie inside the project (paths outside it are refused by the submit step).

Never uploaded, wherever they sit: dotfiles and dot-folders (``.env``, ``.aws``, ``.git``,
``.venv``), credential-like names (:data:`CREDENTIAL_PATTERNS`), virtualenvs (a folder holding
``pyvenv.cfg``), caches (``__pycache__``, ``*.pyc``, ``*.egg-info``, ``node_modules``), results
stores (a folder holding ``_delta_log``), and symlinks whose target lies outside the folder
being uploaded (symlinked folders are never followed). A symlink is judged by its target: one
named ``notes.txt`` that points at ``.env`` is left out as a dotfile. Each skipped entry is
listed with its reason (``adaptlab submit --dry-run``).

Content decides too: every file is read for credentials by detect-secrets' detectors and
adaptlab's additions (private keys, cloud keys, tokens of many issuers, passwords in URLs and
config files, high-entropy strings), looking inside archives, UTF-16 text and base64
(:mod:`adaptlab.study.sensitive`), and one that holds any (or an archive too large to check) is
left out with one line naming the file, what was found and where, and the flag that uploads it
anyway (:data:`ALLOW_CREDENTIAL_FLAG` ``PATH``). A study file with credential content is refused
outright.

A study outside any project (no ``pyproject.toml`` above it) uploads only its own file and its
declared inputs, and the job runs the cluster's installed adaptlab. The code fingerprint
(:func:`package_sha256`) is a SHA-256 over the uploaded package files (path and bytes): what
runs, not what lies around it.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import shutil
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adaptlab.errors import ConfigError
from adaptlab.study.sensitive import find_credentials

__all__ = [
    "ALLOW_CREDENTIAL_FLAG",
    "CODE_SUFFIXES",
    "CREDENTIAL_PATTERNS",
    "JOB_SUFFIXES",
    "RAY_UPLOAD_LIMIT",
    "UploadFile",
    "UploadPlan",
    "declared_inputs",
    "package_files",
    "package_sha256",
    "plan_upload",
]

PACKAGE = "platform/adaptlab"
CODE_SUFFIXES = frozenset(
    {
        ".py",
        ".pyi",
        ".typed",
        ".toml",
        ".json",
        ".yaml",
        ".yml",
        ".md",
        ".txt",
        ".cfg",
        ".ini",
        ".csv",
        ".tex",
        ".sty",
        ".html",
        ".css",
        ".js",
        ".jinja",
    }
)
"""Files of the package source that are uploaded (anything else under platform/adaptlab is not)."""
JOB_SUFFIXES = frozenset({".toml", ".py", ".md", ".txt", ".yaml", ".yml", ".json", ".sh"})
"""Files of ``jobs/`` that are uploaded."""
ROOT_FILES = ("pyproject.toml", "README.md", "README.rst", "README.txt", "README")
CREDENTIAL_PATTERNS = (
    "credentials",
    "credentials.*",
    "auth_token",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.jks",
    "*.keystore",
    "*.kdbx",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    "*secret*",
    "*.netrc",
    "*.pgpass",
    "*.env",
)
"""File names never uploaded (case-insensitive globs), on top of every dotfile."""
CACHE_DIRS = ("__pycache__", "node_modules", "*.egg-info", "site-packages")
ALLOW_CREDENTIAL_FLAG = "--allow-credential-file"
"""The ``adaptlab submit`` option that uploads a file although its content looks like a credential."""
RAY_UPLOAD_LIMIT = 500 * 2**20
"""About the largest working_dir Ray accepts (its object store for packages caps at 512 MiB)."""


@dataclass(frozen=True)
class UploadFile:
    """One uploaded file: its path inside the upload, where it is read from, its size."""

    rel: str
    source: Path
    size: int


@dataclass
class UploadPlan:
    """The files of one upload (sorted by path) and what was left out with the reason."""

    root: Path
    study_rel: str
    package: bool
    files: dict[str, UploadFile] = field(default_factory=dict)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)
    """Files left out for their credential content: ``(path in the upload, reason)``."""
    allow_credentials: frozenset[str] = frozenset()
    """Paths in the upload that are uploaded whatever their content (:data:`ALLOW_CREDENTIAL_FLAG`)."""

    @property
    def total_bytes(self) -> int:
        """The size of the upload before compression."""
        return sum(f.size for f in self.files.values())

    def sorted_files(self) -> list[UploadFile]:
        """The files, sorted by their path in the upload."""
        return [self.files[k] for k in sorted(self.files)]

    def package_sha256(self) -> str:
        """SHA-256 over the uploaded package files (see :func:`package_sha256`); "" without one."""
        pkg = [f for f in self.sorted_files() if f.rel.startswith(PACKAGE + "/")]
        return package_sha256((f.rel[len(PACKAGE) + 1 :], f.source) for f in pkg) if pkg else ""

    def stage(self, dest: Path) -> Path:
        """Hard-link (or copy, across file systems) every file into ``dest``; returns ``dest``."""
        for f in self.sorted_files():
            target = dest / f.rel
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(f.source, target)
            except OSError:
                shutil.copyfile(f.source, target)
        return dest

    def listing(self) -> list[str]:
        """Lines for ``--dry-run``: every file with its size, the total, then what was skipped."""
        lines = [f"{_size(f.size):>10}  {f.rel}" for f in self.sorted_files()]
        lines.append(f"{len(self.files)} file(s), {_size(self.total_bytes)} in total, from {self.root}")
        if self.total_bytes > RAY_UPLOAD_LIMIT:
            lines.append(
                f"warning: over Ray's upload limit of about {_size(RAY_UPLOAD_LIMIT)}; put large data on "
                "storage every node reads and give its absolute path"
            )
        if not self.package:
            lines.append("no package source (platform/adaptlab) is uploaded: the job runs the cluster's adaptlab")
        lines += [f"not uploaded: {rel} ({why})" for rel, why in self.skipped]
        return lines + self.refused_lines()

    def refused_lines(self) -> list[str]:
        """One line per file left out for its credential content, with the flag that overrides it."""
        return [f"not uploaded: {rel} ({why})" for rel, why in self.refused]


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)  # pragma: no cover


def package_sha256(files: Iterable[tuple[str, Path]]) -> str:
    """SHA-256 over ``(path inside the package, file)`` pairs in path order: path, NUL, bytes, NUL."""
    h = hashlib.sha256()
    for rel, source in sorted(files):
        h.update(rel.encode() + b"\x00" + source.read_bytes() + b"\x00")
    return h.hexdigest()


def _hidden_or_secret(name: str) -> str:
    """Why a file of this name is never uploaded ("" when it may be)."""
    if name.startswith("."):
        return "dotfile"
    low = name.lower()
    if any(fnmatch.fnmatchcase(low, p) for p in CREDENTIAL_PATTERNS):
        return "credential-like name"
    if low.endswith((".pyc", ".pyo")):
        return "cache"
    return ""


def _skip_dir(path: Path) -> str:
    """Why a folder is not descended into ("" when it is)."""
    name = path.name
    if name.startswith("."):
        return "dot-folder"
    if any(fnmatch.fnmatchcase(name.lower(), p) for p in CACHE_DIRS):
        return "cache"
    if path.is_symlink():
        return "symlinked folder (not followed)"
    if (path / "pyvenv.cfg").exists():
        return "virtualenv"
    if (path / "_delta_log").is_dir():
        return "results store"
    return ""


def _walk(top: Path) -> Iterator[tuple[Path, str]]:
    """``(path, reason)`` for every entry under the folder ``top``: reason "" for a file that may
    be uploaded, else why it (or a whole folder) is left out. Symlinked folders are not followed,
    so loops are safe."""
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        here = Path(dirpath)
        keep = []
        for d in sorted(dirnames):
            why = _skip_dir(here / d)
            if why:
                yield here / d, why
            else:
                keep.append(d)
        dirnames[:] = keep
        for name in sorted(filenames):
            yield here / name, _hidden_or_secret(name)


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _source(path: Path, folder: Path, suffixes: frozenset[str] | None = None) -> tuple[Path | None, str]:
    """The file to read for ``path`` and "" ; or None and why. A symlink is judged by its target:
    read only when the target is a file inside ``folder`` (the folder being uploaded) that would
    be uploaded under its own name and path (no dotfile, credential-like name, dot-folder, cache,
    virtualenv or results store on the way, and a suffix in ``suffixes`` when given)."""
    if not path.is_symlink():
        return (path, "") if path.is_file() else (None, "not a regular file")
    target, top = path.resolve(), folder.resolve()
    if not _inside(target, top):
        return None, f"symlink to {target}, outside {folder}"
    if not target.is_file():
        return None, "symlink to something that is not a file"
    rel = target.relative_to(top)
    for depth in range(1, len(rel.parts)):
        why = _skip_dir(top.joinpath(*rel.parts[:depth]))
        if why:
            return None, f"symlink to {rel.as_posix()}, inside a {why}"
    why = _hidden_or_secret(target.name)
    if why:
        return None, f"symlink to {rel.as_posix()}, a {why}"
    if suffixes is not None and target.suffix.lower() not in suffixes:
        return None, f"symlink to {rel.as_posix()}, not a file of this folder's kinds"
    return target, ""


def _credential_reason(source: Path, rel: str) -> str:
    """Why the file ``source`` (uploaded as ``rel``) is refused for its content ("" when it is not)."""
    try:
        found = find_credentials(source)
    except OSError as e:
        return f"cannot be read to check it for credentials ({e.strerror or e})"
    if not found:
        return ""
    what = ", ".join(str(f) for f in found)
    return f"credential content: {what}; to upload it anyway: {ALLOW_CREDENTIAL_FLAG} {rel}"


def _add_tree(plan: UploadPlan, top: Path, suffixes: frozenset[str] | None = None) -> None:
    """Add the allowed files under ``top`` (a folder, or one file) to ``plan``; ``suffixes``
    limits which files count (the package and jobs/), declared inputs take any file. Every file
    is read for credential content (:func:`adaptlab.study.sensitive.find_credentials`) unless
    its path is in ``plan.allow_credentials``."""
    if top.is_dir() and not top.is_symlink():
        entries, folder = _walk(top), top
    else:
        entries, folder = iter([(top, _hidden_or_secret(top.name))]), top.parent
    for path, why in entries:
        if not _inside(path, plan.root):
            continue  # never staged outside the upload (inputs outside the project are refused earlier)
        rel = path.relative_to(plan.root).as_posix()
        if why:
            if why != "cache":  # caches are noise in the listing; everything else is reported
                plan.skipped.append((rel, why))
            continue
        if suffixes is not None and path.suffix.lower() not in suffixes:
            continue  # not code or a job file: outside the allow-list
        if rel in plan.files:
            continue
        source, reason = _source(path, folder, suffixes)
        if source is not None and rel not in plan.allow_credentials:
            reason = _credential_reason(source, rel)
            if reason:
                plan.refused.append((rel, reason))
                continue
        if source is None:
            plan.skipped.append((rel, reason))
        else:
            plan.files[rel] = UploadFile(rel, source, source.stat().st_size)


def package_files(root: Path) -> list[tuple[str, Path]]:
    """``(path inside the package, file)`` of every package file that is uploaded."""
    plan = UploadPlan(root, "", True)
    if (root / PACKAGE).is_dir():
        _add_tree(plan, root / PACKAGE, CODE_SUFFIXES)
    return [(f.rel[len(PACKAGE) + 1 :], f.source) for f in plan.sorted_files()]


def _spec_path(value: str) -> str:
    """The path part of a dataset spec or corpus reference (``beir:data/x`` -> ``data/x``;
    ``synthetic:...`` -> "")."""
    head, sep, rest = value.partition(":")
    if sep and len(head) > 1 and head.replace("-", "").replace("_", "").isalnum():
        return "" if head.strip().lower() == "synthetic" else rest.strip()
    return value.strip()


def _input_refs(study: Any) -> list[tuple[str, str]]:
    """``(key, reference)`` of every entry of ``study`` that may name a local path."""
    refs = [(f"[[datasets]] {d.name!r} spec", _spec_path(d.spec)) for d in study.datasets]
    refs += [
        (f"[[models]] {m.name!r} ref", m.ref) for m in study.models if study.resolve_model_ref(m.ref) != m.ref
    ]  # a local model directory
    adapt = study.adapt_table or {}  # [adapt] as written: its relative paths
    if isinstance(adapt.get("corpus"), str):
        refs.append(("[adapt].corpus", _spec_path(adapt["corpus"])))
    for key, table in (("[adapt].base_model", adapt), ("[adapt.colbert].base_model", adapt.get("colbert"))):
        if isinstance(table, dict) and isinstance(table.get("base_model"), str):
            refs.append((key, table["base_model"]))
    return refs


def declared_inputs(study: Any) -> list[tuple[str, Path]]:
    """``(key, absolute path)`` of the study's local inputs given as relative paths that exist:
    dataset specs, model directories, ``[adapt]`` corpus and base models. Absolute paths (which
    must exist on every node), aliases and hub ids are not inputs to upload."""
    out = []
    for key, ref in _input_refs(study):
        if ref and not Path(ref).expanduser().is_absolute():
            full = Path(os.path.abspath(study.resolve_path(ref)))
            if full.exists():
                out.append((key, full))
    return out


def plan_upload(
    study: Any, study_path: Path, root: Path, *, in_project: bool, allow_credentials: Iterable[str] = ()
) -> UploadPlan:
    """The allow-list upload of ``study`` (loaded from ``study_path``) with project root ``root``;
    ``in_project`` False: only the study file and its declared inputs (root is the study's folder).
    Files with credential content are left out (:attr:`UploadPlan.refused`) unless their path in
    the upload is in ``allow_credentials``. An input outside ``root`` is a :class:`ConfigError`
    naming its key, and so is a study file with credential content."""
    package = in_project and (root / PACKAGE / "__init__.py").is_file()
    allowed = frozenset(Path(a).as_posix().removeprefix("./") for a in allow_credentials)
    plan = UploadPlan(root, study_path.relative_to(root).as_posix(), package, allow_credentials=allowed)
    reason = "" if plan.study_rel in allowed else _credential_reason(study_path, plan.study_rel)
    if reason:
        raise ConfigError(f"{study_path}: the study file is not uploaded: {reason}")
    if package:
        _add_tree(plan, root / PACKAGE, CODE_SUFFIXES)
    if in_project:
        if (root / "jobs").is_dir():
            _add_tree(plan, root / "jobs", JOB_SUFFIXES)
        for name in ROOT_FILES:
            if (root / name).is_file():
                _add_tree(plan, root / name)
    plan.files[plan.study_rel] = UploadFile(plan.study_rel, study_path, study_path.stat().st_size)
    for key, full in declared_inputs(study):
        if full == root or not _inside(full, root):
            where = "the project folder" if in_project else "the study's folder (the study is in no project)"
            what = f"names the whole of {where}" if full == root else f"{full} is outside {where}"
            raise ConfigError(
                f"{study.source}: {key}: {what} {root}; only the study's declared inputs inside that "
                "folder are uploaded with the job: name the data folder itself, move the data under "
                "it, or give an absolute path that exists on every node"
            )
        _add_tree(plan, full)
    return plan
