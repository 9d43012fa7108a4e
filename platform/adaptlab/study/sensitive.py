"""Credentials recognised by their content, wherever they sit and whatever their file is called.

``adaptlab submit`` leaves out files whose names look like credentials
(:data:`adaptlab.study.upload.CREDENTIAL_PATTERNS`); a credential saved under an ordinary name
(``jobs/aws_credentials.txt``, ``data/my_ssh_key``) is caught here instead, by the formats the
issuers document:

- PEM private keys (RFC 7468 section 10: ``-----BEGIN ... PRIVATE KEY-----``, also OpenSSH's
  and PGP's private key blocks);
- AWS access key ids (``AKIA``/``ASIA``/... followed by 16 upper-case letters or digits) and
  secret access keys assigned to ``aws_secret_access_key`` (the shared credentials file,
  AWS CLI User Guide "Configuration and credential file settings") or ``SecretAccessKey`` (JSON);
- Google Cloud service-account key files (a JSON ``type`` of ``service_account``, Google Cloud IAM docs,
  "Create and delete service account keys");
- kubeconfig user credentials (``client-key-data``, ``token``, ``id-token``/``refresh-token`` of
  an auth provider; Kubernetes docs, "Organizing cluster access using kubeconfig files");
- ``.netrc`` entries with a password (``machine HOST login USER password PW``, GNU inetutils
  manual, "The .netrc file");
- tokens with a documented prefix: GitHub (``ghp_``, ``gho_``, ``ghs_``, ``github_pat_``),
  Hugging Face (``hf_``), Slack (``xox[bpas]-``).

Files are read in blocks of :data:`BLOCK` bytes with an overlap, so a large data file costs one
block of memory; a match is reported with the kind of credential and its line, never its value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["BLOCK", "CredentialFinding", "find_credentials"]

BLOCK = 1 << 20
"""Bytes read at a time; consecutive blocks overlap by :data:`_OVERLAP` so no match is split."""
_OVERLAP = 4096

_DASHES = b"-" * 5
_PATTERNS: tuple[tuple[str, re.Pattern[bytes]], ...] = (
    ("private key", re.compile(_DASHES + rb"BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?" + _DASHES)),
    ("AWS access key id", re.compile(rb"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA)[A-Z0-9]{16}(?![A-Z0-9])")),
    ("AWS secret access key", re.compile(
        rb"(?i)(?:aws_secret_access_key|secretaccesskey|aws_secret_key)[\"']?\s*[:=]\s*[\"']?[A-Za-z0-9/+=]{40}")),
    ("GCP service-account key", re.compile(rb"\"type\"\s*:\s*\"service_account\"")),
    ("kubeconfig client key", re.compile(rb"(?m)^\s*client-key-data\s*:\s*\S{16,}")),
    ("kubeconfig token", re.compile(rb"(?m)^\s*(?:token|id-token|refresh-token)\s*:\s*[\"']?[A-Za-z0-9._~+/=-]{16,}")),
    (".netrc password", re.compile(rb"(?:^|\s)machine\s+\S+\s+(?:login\s+\S+\s+)?password\s+\S+")),
    ("access token", re.compile(rb"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{40,}"
                                rb"|hf_[A-Za-z]{30,}|xox[bpas]-[A-Za-z0-9-]{10,})")),
)


@dataclass(frozen=True)
class CredentialFinding:
    """What was found (``"private key"``) and on which line (1-based); never the value."""

    kind: str
    line: int

    def __str__(self) -> str:
        return f"{self.kind} on line {self.line}"


def find_credentials(path: Path) -> list[CredentialFinding]:
    """The credentials in the file ``path`` by content (at most one finding per kind, the first),
    in the order of :data:`_PATTERNS`; ``[]`` for a file without any. Reads block by block."""
    found: dict[str, int] = {}
    lines_before = 0  # newlines before the start of the current block
    carry = b""
    with open(path, "rb") as f:
        while True:
            block = f.read(BLOCK)
            data = carry + block
            for kind, pattern in _PATTERNS:
                if kind not in found:
                    m = pattern.search(data)
                    if m:
                        found[kind] = lines_before + data.count(b"\n", 0, m.start()) + 1
            if not block or len(found) == len(_PATTERNS):
                break
            carry = data[-_OVERLAP:]
            lines_before += data.count(b"\n") - carry.count(b"\n")
    order = [k for k, _ in _PATTERNS]
    return [CredentialFinding(k, found[k]) for k in order if k in found]
