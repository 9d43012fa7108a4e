"""Hostile probes of ``adaptlab submit`` (issue 19): the upload is an allow-list (no dotfiles,
credentials, virtualenvs, caches or results stores; only declared inputs), a study outside any
project uploads only itself and its inputs, the code fingerprint hashes the uploaded package,
and an address with credentials is never echoed with them."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from adaptlab.errors import ConfigError, mask_url
from adaptlab.study import submit as submit_mod
from adaptlab.study.schema import project_root
from adaptlab.study.submit import CODE_ENV, submit_study, upload_plan
from robustness.hostile import SUBMIT_STUDY as STUDY
from robustness.hostile import cli
from robustness.hostile import write_file as _write

PASSWORD = "Hunter2-pw-9f3"
SECRET_FILES = (
    ".env",
    ".aws/credentials",
    ".venv/lib/site.py",
    "venv2/lib/x.py",
    "results/s/_delta_log/0.json",
    "platform/adaptlab/.env",
    "platform/adaptlab/__pycache__/x.cpython-312.pyc",
    "data/corpus/.hidden.txt",
    "data/corpus/credentials",
    "data/corpus/id_rsa",
    "data/corpus/client_secret.json",
    "data/corpus/server.pem",
    "data/other/not_declared.txt",
    "notes.txt",
    ".git/config",
    "data/corpus/env1/lib/x.txt",
    "data/corpus/store/_delta_log/0.json",
    "jobs/.secrets.toml",
)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project with a package, a job, a declared corpus and every kind of file that must stay."""
    root = tmp_path / "proj"
    _write(root, "pyproject.toml", '[project]\nname = "x"\nversion = "3.2.1"\n')
    _write(root, "README.md", "# x\n")
    _write(root, "platform/adaptlab/__init__.py", "")
    _write(root, "platform/adaptlab/mod.py", "VALUE = 1\n")
    _write(root, "jobs/s.toml", STUDY)
    _write(root, "data/corpus/a.txt", "alpha document\n")
    for rel in SECRET_FILES:
        _write(root, rel, f"SECRET {PASSWORD}\n")
    _write(root, ".venv/pyvenv.cfg", "home = /usr\n")
    _write(root, "venv2/pyvenv.cfg", "home = /usr\n")
    _write(root, "data/corpus/env1/pyvenv.cfg", "home = /usr\n")
    outside = _write(tmp_path, "outside.txt", f"outside {PASSWORD}\n")
    (root / "data/corpus/leak.txt").symlink_to(outside)
    (root / "data/corpus/alias.txt").symlink_to(root / "data/corpus/a.txt")
    (root / "data/corpus/loop").symlink_to(root / "data/corpus")
    return root


def _uploaded(plan) -> set[str]:
    return set(plan.files)


def test_dry_run_lists_exactly_the_allow_list(project):
    rc, out, err = cli(["submit", str(project / "jobs/s.toml"), "--dry-run"])
    assert rc == 0, err
    listed = {line.strip().split("  ", 1)[1] for line in out.splitlines() if line.startswith(" ") and "  " in line}
    assert listed == {
        "pyproject.toml",
        "README.md",
        "platform/adaptlab/__init__.py",
        "platform/adaptlab/mod.py",
        "jobs/s.toml",
        "data/corpus/a.txt",
        "data/corpus/alias.txt",
    }
    assert "7 file(s)" in out and "in total" in out
    assert PASSWORD not in out + err
    assert "not uploaded: data/corpus/leak.txt (symlink to" in out  # named, with its reason
    for rel, why in (
        ("data/corpus/env1", "virtualenv"),
        ("data/corpus/store", "results store"),
        ("data/corpus/credentials", "credential-like name"),
        ("jobs/.secrets.toml", "dotfile"),
    ):
        assert f"not uploaded: {rel} ({why})" in out
    assert ".venv" not in out and "results/" not in out  # outside the allow-list: not even walked


def test_staged_upload_holds_only_the_plan_and_the_fingerprint_is_real(project, monkeypatch):
    seen: dict[str, object] = {}

    class Client:
        def list_jobs(self):
            return []

        def submit_job(self, **kw):
            wd = Path(kw["runtime_env"]["working_dir"])
            seen["files"] = {p.relative_to(wd).as_posix() for p in wd.rglob("*") if p.is_file()}
            seen["pkg"] = {
                p.relative_to(wd / "platform/adaptlab").as_posix(): p.read_bytes()
                for p in (wd / "platform/adaptlab").rglob("*")
                if p.is_file()
            }
            seen["kw"] = kw

        def get_job_status(self, sid):
            return "PENDING"

    monkeypatch.setattr(submit_mod, "_client", lambda address: Client())
    res = submit_study(project / "jobs/s.toml", "http://127.0.0.1:1", store=str(project / "out"))
    _study, plan = upload_plan(project / "jobs/s.toml")
    assert seen["files"] == _uploaded(plan)
    assert not any(PASSWORD in (project / f).read_text() for f in seen["files"] if (project / f).exists())
    h = hashlib.sha256()
    for rel, data in sorted(seen["pkg"].items()):
        h.update(rel.encode() + b"\x00" + data + b"\x00")
    assert res.code["tree_sha256"] == h.hexdigest() != hashlib.sha256().hexdigest()
    assert CODE_ENV in seen["kw"]["runtime_env"]["env_vars"] and res.code["version"] == "3.2.1"


def test_fingerprint_changes_with_the_package_and_not_with_secrets(project):
    before = upload_plan(project / "jobs/s.toml")[1].package_sha256()
    _write(project, "platform/adaptlab/.env", "OTHER SECRET\n")
    _write(project, "platform/adaptlab/__pycache__/y.pyc", "junk")
    assert upload_plan(project / "jobs/s.toml")[1].package_sha256() == before
    _write(project, "platform/adaptlab/mod.py", "VALUE = 2\n")
    assert upload_plan(project / "jobs/s.toml")[1].package_sha256() != before


def test_study_outside_any_project_uploads_only_itself_and_its_inputs(tmp_path):
    folder = tmp_path / "loose"
    if (project_root(folder) / "pyproject.toml").exists():
        pytest.skip("a pyproject.toml above the temporary folder")
    _write(folder, "s.toml", STUDY)
    _write(folder, "data/corpus/a.txt", "alpha\n")
    for rel in (".env", ".aws/credentials", "private/notes.txt"):
        _write(folder, rel, PASSWORD)
    rc, out, err = cli(["submit", str(folder / "s.toml"), "--dry-run"])
    assert rc == 0, err
    assert "2 file(s)" in out and " s.toml" in out and "data/corpus/a.txt" in out
    assert "no package uploaded" in out and PASSWORD not in out
    assert "notes.txt" not in out and ".env" not in out


def test_declared_input_outside_the_project_is_one_line(project):
    _write(project.parent, "elsewhere/b.txt", "beta\n")
    (project / "jobs/s.toml").write_text(STUDY.replace("data/corpus", "../elsewhere"))
    rc, out, err = cli(["submit", str(project / "jobs/s.toml"), "--dry-run"])
    assert rc == 2 and "outside the project folder" in err and len(err.strip().splitlines()) == 1, err
    (project / "jobs/s.toml").write_text(STUDY.replace("data/corpus", "."))
    with pytest.raises(ConfigError, match="names the whole of the project folder"):
        upload_plan(project / "jobs/s.toml")


def test_submit_without_address_or_dry_run_is_one_line(project):
    rc, _out, err = cli(["submit", str(project / "jobs/s.toml")])
    assert rc == 2 and "--address: required" in err and len(err.strip().splitlines()) == 1


# -- masked URLs ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, shown",
    [
        ("http://admin:PW@host:9", "http://admin:***@host:9"),
        (
            "cannot reach http://admin:PW@host:9/api/jobs/ (refused)",
            "cannot reach http://admin:***@host:9/api/jobs/ (refused)",
        ),
        ("https://PW@github.com/x", "https://***@github.com/x"),
        ("https://u:p@w@host/x", "https://u:***@host/x"),
        (
            "s3://b/k?X-Amz-Date=1&X-Amz-Signature=PW&X-Amz-Credential=PW",
            "s3://b/k?X-Amz-Date=1&X-Amz-Signature=***&X-Amz-Credential=***",
        ),
        ("https://acct.blob.core.windows.net/c?sv=2020&sig=PW", "https://acct.blob.core.windows.net/c?sv=2020&sig=***"),
        ("http://h/v1?api_key=PW&model=m&access_token=PW", "http://h/v1?api_key=***&model=m&access_token=***"),
        ("http://127.0.0.1:8265", "http://127.0.0.1:8265"),
        ("mail me: a@b.org", "mail me: a@b.org"),
    ],
)
def test_mask_url(text, shown):
    assert mask_url(text) == shown and "PW" not in mask_url(text)


def test_address_password_not_echoed_when_refused_before_any_request(project):
    rc, out, err = cli(["submit", str(project / "jobs/s.toml"), "--address", f"http://admin:{PASSWORD}@192.0.2.1:8265"])
    assert rc == 2 and PASSWORD not in out + err and "admin:***@192.0.2.1" in err, err


def test_address_password_not_echoed_by_jobs_api_failures(project, monkeypatch):
    def failing(address):
        raise RuntimeError(f"Failed to connect to {address}/api/version: Max retries exceeded url={address}")

    monkeypatch.setattr(
        submit_mod, "_client", lambda address: submit_mod._call(address, "connecting", failing, address)
    )
    rc, out, err = cli(
        [
            "submit",
            str(project / "jobs/s.toml"),
            "--address",
            f"http://admin:{PASSWORD}@127.0.0.1:9",
            "--store",
            str(project / "out"),
        ]
    )
    assert rc == 2 and PASSWORD not in out + err and err.count("admin:***@127.0.0.1:9") >= 2, err


def test_unreachable_address_with_password_never_printed_by_any_layer(project, tmp_path):
    """The real client (Ray's, in a subprocess so its own logging is captured too)."""
    env = {**os.environ, "ADAPTLAB_PROGRESS": "0", "HOME": str(tmp_path)}
    env.pop("RAY_AUTH_TOKEN", None)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "adaptlab",
            "submit",
            str(project / "jobs/s.toml"),
            "--address",
            f"http://admin:{PASSWORD}@127.0.0.1:9",
            "--store",
            str(project / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=90,
        env=env,
    )
    assert done.returncode == 2, done.stderr
    assert PASSWORD not in done.stdout + done.stderr
    assert "admin:***@127.0.0.1:9" in done.stderr


@pytest.mark.parametrize("command", [["results"], ["report", "--out", "rep"]])
def test_every_error_line_is_masked_at_the_cli_boundary(work, command):
    """A store URI with a password in an unsupported scheme: the store's message quotes the URI;
    the CLI's one error line masks it (before: the password was printed)."""
    rc, out, err = cli([*command, "--store", f"ftp://admin:{PASSWORD}@host/x?token={PASSWORD}"])
    assert rc == 2 and PASSWORD not in out + err and "admin:***@host" in err, err
