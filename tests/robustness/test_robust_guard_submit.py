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
from robustness.hostile import assert_one_line_error, cli
from robustness.hostile import write_file as _write

MARK = "Zq7-canary"
"""Planted in every secret so a test can tell whether its content reached the output."""
KEY_HEADER = "-----BEGIN " + "OPENSSH PRIVATE KEY-----"
SECRETS = {  # path in the project -> content (AWS's documented example keys; invented tokens)
    "jobs/aws_credentials.txt": "[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\n"
    "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n# " + MARK + "\n",
    "jobs/gcp-service-account.json": '{\n  "type": "service_account",\n  "project_id": "p",\n  "private_key_id": "'
    + MARK
    + '"\n}\n',
    "jobs/kubeconfig.yaml": "apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user:\n"
    "    token: eyJhbGciOiJSUzI1NiIsImtpZCI6" + MARK + "\n",
    "data/corpus/my_ssh_key": KEY_HEADER
    + "\nb3BlbnNzaC1rZXktdjEAAAAA"
    + MARK
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
    assert "AWS Access Key on line 2, AWS secret access key on line 3" in out
    assert "Private Key on line 1" in out and ".netrc password on line 3" in out
    assert "GCP service-account key on line 2" in out and "kubeconfig credential on line 6" in out
    assert MARK not in out + err


def test_the_flag_uploads_exactly_the_files_it_names(project):
    rc, out, err = _dry_run(
        project,
        "--allow-credential-file",
        "data/corpus/my_ssh_key",
        "--allow-credential-file",
        "./jobs/kubeconfig.yaml",
    )
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
    rc, out, err = cli(
        ["submit", str(project / "jobs/s.toml"), "--address", "http://127.0.0.1:1", "--store", str(project / "out")]
    )
    assert rc == 0, err
    assert staged and not set(SECRETS) & staged
    warned = [ln for ln in err.splitlines() if "credential content" in ln]
    assert len(warned) == len(SECRETS) and all("--allow-credential-file" in ln for ln in warned), err
    submit_study(
        project / "jobs/s.toml",
        "http://127.0.0.1:1",
        store=str(project / "out"),
        allow_credentials=["jobs/aws_credentials.txt"],
    )
    assert "jobs/aws_credentials.txt" in staged


def test_a_study_file_with_credential_content_is_one_error_line(project):
    (project / "jobs/s.toml").write_text(STUDY + "# aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n")
    rc, out, err = _dry_run(project)
    assert_one_line_error(rc, err, ("s.toml", "AWS secret access key on line 9", "--allow-credential-file jobs/s.toml"))
    assert "bPxRfiCYEXAMPLEKEY" not in out + err


def test_a_credential_across_a_block_boundary_and_far_down_a_file_is_found(tmp_path, monkeypatch):
    from adaptlab.study import sensitive

    monkeypatch.setattr(sensitive, "BLOCK", 64)
    p = tmp_path / "big.txt"
    p.write_text("filler line\n" * 30 + "xx AKIAIOSFODNN7EXAMPLE yy\n" + "more\n" * 10)
    assert [(f.kind, f.line) for f in find_credentials(p)] == [("AWS Access Key", 31)]
    p.write_text("akiaiosfodnn7example is lower case\n")
    assert find_credentials(p) == []


# -- credential formats (detect-secrets and adaptlab's detectors; archives, UTF-16, base64) ----------------
PEM = "-----BEGIN RSA " + "PRIVATE KEY-----\nMIIEowIBAAKCAQEA" + MARK + "\n-----END RSA PRIVATE KEY-----\n"
NPMRC = "//registry.npmjs.org/:_authToken=npm_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8" + "\n# " + MARK + "\n"


def _tar_gz(name: str, data: bytes) -> bytes:
    import io
    import tarfile

    bio = io.BytesIO()
    with tarfile.open(fileobj=bio, mode="w:gz") as t:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return bio.getvalue()


def _zip(members: dict[str, bytes]) -> bytes:
    import io
    import zipfile

    bio = io.BytesIO()
    with zipfile.ZipFile(bio, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return bio.getvalue()


def _formats() -> dict[str, tuple[bytes, str]]:
    """``file name -> (content, what the refusal line names)``: every format of a credential
    that must not leave the machine (invented values, each with the canary)."""
    import base64
    import gzip

    tail = "Zq7canary" + "x9Fq2LmW8rTb4Kc"
    return {
        "netrc.txt": (f"default login me password {MARK}\n".encode(), ".netrc password on line 1"),
        "npm.cfg": (NPMRC.encode(), "NPM tokens on line 1"),
        "pypi.ini": (
            (
                "[pypi]\nusername = __token__\npassword = pypi-AgEIcHlwaS5vcmcCJGE4ZjY5ZjU5LTk0NjItNDU0Ni1iYjE0"
                "LTFjMjZkMjA2ZjdmZgACKlszLCJmNzFmOTVlOC1lNGUxLTQ0YTItOTI1NC1lOTBhNzJhYTc5MjMiXQAABiAa\n# " + MARK + "\n"
            ).encode(),
            "PyPI Token on line 3",
        ),
        "openai.txt": (f"OPENAI_API_KEY=sk-proj-{tail}{tail}Ab3dEf6hIj\n".encode(), "OpenAI API key on line 1"),
        "anthropic.txt": (f"key: sk-ant-api03-{tail}{tail}-AbCdEfAA\n".encode(), "Anthropic API key on line 1"),
        "gitlab.txt": (f"ci token glpat-Ab3dEf6hIj9kLm2nOp5q  # {MARK}\n".encode(), "GitLab Token on line 1"),
        "stripe.txt": (f"live: sk_live_Ab3dEf6hIj9kLm2nOp5qRs8t  # {MARK}\n".encode(), "Stripe Access Key on line 1"),
        "azure.txt": (
            (
                "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey="
                + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z" * 2
                + "Ab3dEf6hIj9kLm2nOp5qRs==;EndpointSuffix=core.windows.net # "
                + MARK
                + "\n"
            ).encode(),
            "Azure Storage Account access key on line 1",
        ),
        "docker.json": (
            (
                '{\n  "auths": {\n    "https://index.docker.io/v1/": {\n      "auth": "'
                + base64.b64encode(f"me:{MARK}".encode()).decode()
                + '"\n    }\n  }\n}\n'
            ).encode(),
            "Docker registry auth on line 4",
        ),
        "db.env.txt": (
            f"DATABASE_URL=postgresql://app:{MARK}@db.example.com:5432/app\n".encode(),
            "Basic Auth Credentials on line 1",
        ),
        "libpq.txt": (f"dsn = host=db dbname=app user=app password={MARK}\n".encode(), "PostgreSQL password on line 1"),
        "settings.py": (f'API_TOKEN = "{tail}Qv7Zp0Ws3Xe9Rd"\n'.encode(), "Base64 High Entropy String on line 1"),
        "keys.tar.gz": (_tar_gz("keys/id", PEM.encode()), "Private Key on line 1 (gzip, archive member keys/id)"),
        "bundle.zip": (
            _zip({"docs/readme.md": b"hello\n", "conf/npmrc": NPMRC.encode()}),
            "NPM tokens on line 1 (archive member conf/npmrc)",
        ),
        "key.gz": (gzip.compress(PEM.encode()), "Private Key on line 1 (gzip)"),
        "key16.txt": (PEM.encode("utf-16"), "Private Key on line 1"),
        "key16le.txt": (PEM.encode("utf-16-le"), "Private Key on line 1"),
        "wrapped.txt": (
            ("key below\n" + base64.encodebytes(PEM.encode()).decode()).encode(),
            "Private Key on line 2 (base64-encoded)",
        ),
        "inline.txt": (
            f"blob = {base64.b64encode(PEM.encode()).decode()}\n".encode(),
            "Private Key on line 1 (base64-encoded)",
        ),
    }


@pytest.mark.parametrize("name", sorted(_formats()))
def test_every_credential_format_is_refused_with_one_line_naming_it(project, name):
    data, named = _formats()[name]
    (project / "data/corpus" / name).write_bytes(data)
    rc, out, err = _dry_run(project)
    assert rc == 0, err
    rel = f"data/corpus/{name}"
    assert rel not in _listed(out), out
    line = next((ln for ln in out.splitlines() if ln.startswith(f"not uploaded: {rel} (credential content: ")), "")
    assert named in line and line.endswith(f"to upload it anyway: --allow-credential-file {rel})"), out
    assert MARK not in out + err and "Zq7canary" not in out + err
    rc, out, err = _dry_run(project, "--allow-credential-file", rel)  # the flag still uploads it
    assert rc == 0 and rel in _listed(out), out


def test_a_high_entropy_string_is_found_by_the_entropy_detector(tmp_path):
    p = tmp_path / "conf.py"
    p.write_text('value = "x9Fq2LmW8rTb4KcQv7Zp0Ws3Xe9RdJh6Ny1"\n')
    assert [f.kind for f in find_credentials(p)] == ["Base64 High Entropy String"]
    p.write_text('value = "the quick brown fox jumps over it"\n')
    assert find_credentials(p) == []


def test_an_archive_over_the_limits_is_refused_as_unchecked(tmp_path, monkeypatch):
    from adaptlab.study import sensitive

    p = tmp_path / "many.zip"
    p.write_bytes(_zip({f"d/{i}.txt": b"plain text\n" for i in range(5)}))
    assert find_credentials(p) == []
    monkeypatch.setattr(sensitive, "ARCHIVE_MEMBERS", 3)
    assert [f.kind for f in find_credentials(p)] == ["archive not checked (more than 3 members)"]
    monkeypatch.setattr(sensitive, "ARCHIVE_MEMBERS", 100)
    monkeypatch.setattr(sensitive, "ARCHIVE_BYTES", 40)
    assert [f.kind for f in find_credentials(p)] == ["archive not checked (more than 0 MiB unpacked)"]
    bomb = tmp_path / "bomb.gz"
    import gzip

    bomb.write_bytes(gzip.compress(b"\0" * 1_000_000))
    assert [f.kind for f in find_credentials(bomb)] == ["archive not checked (more than 0 MiB unpacked)"]
    broken = tmp_path / "broken.zip"
    broken.write_bytes(b"PK\x03\x04" + b"\x00" * 40)
    assert [f.kind for f in find_credentials(broken)] == ["archive not checked (cannot be unpacked: BadZipFile)"]


def test_an_ordinary_study_folder_uploads_whole(project):
    """The project's own job files and a small corpus of text, Markdown and PDF: nothing refused."""
    repo = Path(__file__).resolve().parents[2]
    jobs = sorted((repo / "jobs").glob("*.toml"))
    for src in jobs:
        (project / "jobs" / src.name).write_bytes(src.read_bytes())
    _write(
        project,
        "data/corpus/guide.md",
        "# Guide\n\nRotate the API key monthly; see `docs/keys.md`.\n"
        "| id | sha256 |\n| -- | -- |\n| 1 | " + "ab12" * 16 + " |\n",
    )
    _write(project, "data/corpus/paper.txt", "Dense retrieval (Karpukhin et al., 2020) encodes passages.\n" * 200)
    _write(
        project,
        "data/corpus/squad.json",
        '{"data": [{"qas": ['
        + ", ".join(  # SQuAD's hex question ids, one line
            f'{{"id": "56be4db0acb8001400a5{i:04x}", "question": "Which NFL team won Super Bowl 50?"}}'
            for i in range(300)
        )
        + "]}]}",
    )
    _write(
        project,
        "data/corpus/docs.jsonl",
        "".join(
            f'{{"_id": "{4983 + i}", "title": "Microstructural development '
            f'of human newborn cerebral white matter", "text": "..."}}\n'
            for i in range(50)
        ),
    )
    fpdf = pytest.importorskip("fpdf")
    pdf = fpdf.FPDF()
    pdf.add_page()
    pdf.set_font("helvetica", size=11)
    pdf.multi_cell(0, 5, "Domain adaptation of retrieval embeddings. " * 40)
    pdf.output(str(project / "data/corpus/paper.pdf"))
    rc, out, err = _dry_run(project)
    assert rc == 0, err
    listed = _listed(out)
    ordinary = (
        {f"jobs/{p.name}" for p in jobs}
        | {
            "data/corpus/guide.md",
            "data/corpus/paper.txt",
            "data/corpus/paper.pdf",
            "data/corpus/squad.json",
            "data/corpus/docs.jsonl",
        }
        | set(INNOCENT)
    )
    assert ordinary <= listed, out
    refused = {
        ln.split(" (", 1)[0].removeprefix("not uploaded: ") for ln in out.splitlines() if "credential content" in ln
    }
    assert refused == set(SECRETS), out


def test_the_package_source_itself_has_no_false_positive():
    """Every file of adaptlab's own package is uploaded by submit: none may look like a credential."""
    from adaptlab.study.upload import package_files

    repo = Path(__file__).resolve().parents[2]
    flagged = {rel: [str(f) for f in find_credentials(src)] for rel, src in package_files(repo)}
    assert not {k: v for k, v in flagged.items() if v}


def test_a_credential_inside_a_huge_one_line_json_is_found_quickly(tmp_path):
    """A whole data file on one line (2 MB of JSON) is looked at around each pattern match, not
    handed whole to every detector."""
    import time

    p = tmp_path / "dump.json"
    filler = ", ".join(f'{{"id": {i}, "text": "passage number {i} about retrieval"}}' for i in range(20_000))
    p.write_text(
        '{"rows": [' + filler + f', {{"cfg": "//registry.npmjs.org/:_authToken=npm_{"a1B2" * 9}"}}, ' + filler + "]}"
    )
    t0 = time.monotonic()
    assert [str(f) for f in find_credentials(p)] == ["NPM tokens on line 1"]
    assert time.monotonic() - t0 < 60
