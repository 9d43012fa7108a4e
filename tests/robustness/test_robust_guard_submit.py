"""``adaptlab submit`` decides by content as well as by name (issue 28): a symlink is judged by
its target, and a credential under an ordinary name is left out with one line naming the file
and the flag that uploads it anyway. Every case runs ``--dry-run`` in-process (nothing is sent)."""

from __future__ import annotations

from pathlib import Path

import pytest

from adaptlab.study import submit as submit_mod
from adaptlab.study.sensitive import find_credentials
from adaptlab.study.submit import submit_study
from robustness.hostile import SUBMIT_STUDY as STUDY
from robustness.hostile import write_file as _write
from robustness.hostile import assert_one_line_error, cli

MARK = "Zq7-canary"
"""Planted in every secret so a test can tell whether its content reached the output."""
KEY_HEADER = "-----BEGIN " + "OPENSSH PRIVATE KEY-----"
SECRETS = {  # path in the project -> content (AWS's documented example keys; invented tokens)
    "jobs/aws_credentials.txt": "[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\n"
                                "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n# " + MARK + "\n",
    "jobs/gcp-service-account.json": '{\n  "type": "service_account",\n  "project_id": "p",\n  "private_key_id": "'
                                     + MARK + '"\n}\n',
    "jobs/kubeconfig.yaml": "apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user:\n"
                            "    token: eyJhbGciOiJSUzI1NiIsImtpZCI6" + MARK + "\n",
    "data/corpus/my_ssh_key": KEY_HEADER + "\nb3BlbnNzaC1rZXktdjEAAAAA" + MARK
                              + "\n-----END OPENSSH PRIVATE KEY-----\n",
    "data/corpus/hosts.txt": "machine example.org\n  login me\n  password " + MARK + "\n",
}
INNOCENT = {  # words that look alike but are not credentials
    "jobs/notes.md": "Set the token in RAY_AUTH_TOKEN; the password: see the wiki. type = service account.\n",
    "data/corpus/a.txt": "The private key of a lock is its shape; machine learning models need no password.\n",
}



@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    _write(root, "pyproject.toml", '[project]\nname = "x"\nversion = "1"\n')
    _write(root, "platform/adaptlab/__init__.py", "")
    _write(root, "jobs/s.toml", STUDY)
    for rel, text in {**SECRETS, **INNOCENT}.items():
        _write(root, rel, text)
    return root


def _listed(out: str) -> set[str]:
    return {line.strip().split("  ", 1)[1] for line in out.splitlines() if line.startswith(" ") and "  " in line}


def _dry_run(project: Path, *extra: str) -> tuple[int, str, str]:
    return cli(["submit", str(project / "jobs/s.toml"), "--dry-run", *extra])


def test_symlink_with_an_innocent_name_is_judged_by_its_target(project):
    _write(project, "jobs/.env", f"API_KEY={MARK}\n")
    _write(project, "data/corpus/.env", f"API_KEY={MARK}\n")
    (project / "jobs/notes.txt").symlink_to(".env")
    (project / "data/corpus/readme.md").symlink_to(project / "data/corpus/.env")
    _write(project, "data/corpus/.hidden/doc.txt", f"hidden {MARK}\n")
    (project / "data/corpus/doc.txt").symlink_to(".hidden/doc.txt")
    rc, out, err = _dry_run(project)
    assert rc == 0, err
    assert not {"jobs/notes.txt", "data/corpus/readme.md", "data/corpus/doc.txt"} & _listed(out), out
    assert "not uploaded: jobs/notes.txt (symlink to .env, a dotfile)" in out
    assert "not uploaded: data/corpus/readme.md (symlink to .env, a dotfile)" in out
    assert "not uploaded: data/corpus/doc.txt (symlink to .hidden/doc.txt, inside a dot-folder)" in out
    assert MARK not in out + err


def test_credentials_under_ordinary_names_are_refused_one_line_each_with_the_flag(project):
    rc, out, err = _dry_run(project)
    assert rc == 0, err
    listed = _listed(out)
    assert not set(SECRETS) & listed, out
    assert set(INNOCENT) <= listed, out
    refused = [ln for ln in out.splitlines() if "credential content" in ln]
    assert len(refused) == len(SECRETS), out
    for rel in SECRETS:
        line = next(ln for ln in refused if ln.startswith(f"not uploaded: {rel} ("))
        assert line.endswith(f"to upload it anyway: --allow-credential-file {rel})"), line
    assert "AWS access key id on line 2, AWS secret access key on line 3" in out
    assert "private key on line 1" in out and ".netrc password on line 1" in out
    assert "GCP service-account key on line 2" in out and "kubeconfig token on line 6" in out
    assert MARK not in out + err


def test_the_flag_uploads_exactly_the_files_it_names(project):
    rc, out, err = _dry_run(project, "--allow-credential-file", "data/corpus/my_ssh_key",
                            "--allow-credential-file", "./jobs/kubeconfig.yaml")
    assert rc == 0, err
    listed = _listed(out)
    assert {"data/corpus/my_ssh_key", "jobs/kubeconfig.yaml"} <= listed
    assert not (set(SECRETS) - {"data/corpus/my_ssh_key", "jobs/kubeconfig.yaml"}) & listed


def test_a_real_submit_warns_one_line_per_refused_file_and_never_stages_it(project, monkeypatch):
    staged: set[str] = set()

    class Client:
        def list_jobs(self):
            return []

        def submit_job(self, **kw):
            wd = Path(kw["runtime_env"]["working_dir"])
            staged.update(p.relative_to(wd).as_posix() for p in wd.rglob("*") if p.is_file())

        def get_job_status(self, sid):
            return "PENDING"

    monkeypatch.setattr(submit_mod, "_client", lambda address: Client())
    rc, out, err = cli(["submit", str(project / "jobs/s.toml"), "--address", "http://127.0.0.1:1",
                        "--store", str(project / "out")])
    assert rc == 0, err
    assert staged and not set(SECRETS) & staged
    warned = [ln for ln in err.splitlines() if "credential content" in ln]
    assert len(warned) == len(SECRETS) and all("--allow-credential-file" in ln for ln in warned), err
    submit_study(project / "jobs/s.toml", "http://127.0.0.1:1", store=str(project / "out"),
                 allow_credentials=["jobs/aws_credentials.txt"])
    assert "jobs/aws_credentials.txt" in staged


def test_a_study_file_with_credential_content_is_one_error_line(project):
    (project / "jobs/s.toml").write_text(STUDY + "# aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n")
    rc, out, err = _dry_run(project)
    assert_one_line_error(rc, err, ("s.toml", "AWS secret access key on line 9", "--allow-credential-file jobs/s.toml"))
    assert "bPxRfiCYEXAMPLEKEY" not in out + err


def test_a_credential_across_a_block_boundary_and_far_down_a_file_is_found(tmp_path, monkeypatch):
    from adaptlab.study import sensitive

    monkeypatch.setattr(sensitive, "BLOCK", 64)
    monkeypatch.setattr(sensitive, "_OVERLAP", 32)
    p = tmp_path / "big.txt"
    p.write_text("filler line\n" * 30 + "xx AKIAIOSFODNN7EXAMPLE yy\n" + "more\n" * 10)
    assert [(f.kind, f.line) for f in find_credentials(p)] == [("AWS access key id", 31)]
    p.write_text("AKIAIOSFODNN7EXAMPLEX is too long; akiaiosfodnn7example is lower case\n")
    assert find_credentials(p) == []
