"""detect-secrets plugins for credential formats the library does not ship a detector for.

:mod:`adaptlab.study.sensitive` scans with every plugin of detect-secrets (Yelp, "detect-secrets",
https://github.com/Yelp/detect-secrets) and adds these, loaded through the library's own
custom-plugin mechanism (a plugin file named by path, as ``detect-secrets scan --plugin FILE``
does). Each is a :class:`CredentialFormat`, a :class:`~detect_secrets.plugins.base.RegexBasedDetector`
declared by its secret type and patterns: a line matching one of them holds a secret (group 1
when the pattern has one, else the whole match).

The formats, each from its issuer's documentation:

- ``.netrc`` entries with a password, ``machine HOST`` or ``default`` (GNU inetutils manual,
  "The .netrc file"), on one line or with ``password`` on a line of its own;
- OpenAI project, service-account and admin keys (``sk-proj-``, ``sk-svcacct-``, ``sk-admin-``;
  the library knows only the older ``sk-...T3BlbkFJ...`` keys);
- Anthropic API and admin keys (``sk-ant-api03-``, ``sk-ant-admin01-``);
- Docker's ``config.json`` registry credentials (``"auth"``: base64 of ``user:password``, and
  ``"identitytoken"``; Docker docs, "docker login");
- libpq keyword/value connection strings with a password (``host=... password=...``;
  PostgreSQL docs, section 32.1.1 "Connection Strings"); the URI form
  ``postgresql://<user>:<password>@host`` is the library's Basic Auth detector;
- Google Cloud service-account key files (a JSON ``type`` of ``service_account``);
- kubeconfig user credentials (``client-key-data``, ``token``, ``id-token``, ``refresh-token``);
- Hugging Face access tokens (``hf_`` and 34 letters);
- AWS secret access keys in the shared credentials file without quotes (AWS CLI User Guide,
  "Configuration and credential file settings"; the library's AWS detector wants them quoted).

This module is loaded by file path by detect-secrets (its plugin loader), so it imports nothing
of adaptlab.
"""

from __future__ import annotations

import re
from typing import Any

from detect_secrets.plugins.base import RegexBasedDetector

__all__ = [
    "AnthropicKeyDetector",
    "AwsSecretAccessKeyDetector",
    "DockerConfigAuthDetector",
    "GcpServiceAccountDetector",
    "HuggingFaceTokenDetector",
    "KubeconfigCredentialDetector",
    "LibpqPasswordDetector",
    "NetrcPasswordDetector",
    "OpenAIProjectKeyDetector",
]
"""The detectors (the plugin loader takes these names; :class:`CredentialFormat` is their base)."""


class CredentialFormat(RegexBasedDetector):
    """The base of the detectors here: a subclass names its ``secret_type`` and its ``patterns``
    (regular expressions, compiled once into the ``denylist`` detect-secrets scans with) as class
    keywords. Left abstract itself (no secret type), so the plugin loader skips it."""

    def __init_subclass__(cls, *, secret_type: str, patterns: tuple[str, ...], **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # the library declares both as abstract properties; a detector's are constants of its class
        setattr(cls, "secret_type", secret_type)  # noqa: B010
        setattr(cls, "denylist", tuple(re.compile(p) for p in patterns))  # noqa: B010


class NetrcPasswordDetector(
    CredentialFormat,
    secret_type=".netrc password",  # pragma: allowlist secret
    patterns=(  # pragma: allowlist secret
        r"(?:^|\s)(?:machine\s+\S+|default)(?:\s+(?:login|account)\s+\S+)*\s+password\s+(\S+)",
        r"^\s*(?:(?:login|account)\s+\S+\s+)*password\s+(\S+)\s*$",
    ),
):
    """A ``.netrc`` password: ``machine H login U password P``, ``default ... password P``, or a
    line holding only ``password P`` (the entry's tokens spread over lines)."""


class OpenAIProjectKeyDetector(
    CredentialFormat,
    secret_type="OpenAI API key",  # pragma: allowlist secret
    patterns=(  # pragma: allowlist secret
        r"(?<![A-Za-z0-9_-])(sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,})",
    ),
):
    """OpenAI's project, service-account and admin keys."""


class AnthropicKeyDetector(
    CredentialFormat,
    secret_type="Anthropic API key",  # pragma: allowlist secret
    patterns=(  # pragma: allowlist secret
        r"(?<![A-Za-z0-9_-])(sk-ant-(?:api|admin)\d{2}-[A-Za-z0-9_-]{20,})",
    ),
):
    """Anthropic's API and admin keys."""


class DockerConfigAuthDetector(
    CredentialFormat,
    secret_type="Docker registry auth",  # pragma: allowlist secret
    patterns=(  # pragma: allowlist secret
        r"\"(?:auth|identitytoken)\"\s*:\s*\"([A-Za-z0-9+/=._-]{8,})\"",
    ),
):
    """A registry credential of Docker's ``config.json``."""


class LibpqPasswordDetector(
    CredentialFormat,
    secret_type="PostgreSQL password",  # pragma: allowlist secret
    patterns=(  # pragma: allowlist secret
        r"(?i)\b(?:host|hostaddr|dbname|user|port)\s*=\s*\S+.*?\bpassword\s*=\s*'?([^\s']+)",
        r"(?i)\bpassword\s*=\s*'?([^\s';]+)'?.*?\b(?:host|hostaddr|dbname|user)\s*=",
    ),
):
    """A password in a libpq keyword/value connection string (with at least one other keyword)."""


class GcpServiceAccountDetector(
    CredentialFormat,
    secret_type="GCP service-account key",  # pragma: allowlist secret
    patterns=(  # pragma: allowlist secret
        r"\"type\"\s*:\s*\"(service_account)\"",
    ),
):
    """A Google Cloud service-account key file."""


class KubeconfigCredentialDetector(
    CredentialFormat,
    secret_type="kubeconfig credential",  # pragma: allowlist secret
    patterns=(  # pragma: allowlist secret
        r"^\s*client-key-data\s*:\s*(\S{16,})",
        r"^\s*(?:token|id-token|refresh-token)\s*:\s*[\"']?([A-Za-z0-9._~+/=-]{16,})",
    ),
):
    """A kubeconfig user's key or token."""


class HuggingFaceTokenDetector(
    CredentialFormat,
    secret_type="Hugging Face token",  # pragma: allowlist secret
    patterns=(  # pragma: allowlist secret
        r"(?<![A-Za-z0-9_])(hf_[A-Za-z]{30,})",
    ),
):
    """A Hugging Face user access token."""


class AwsSecretAccessKeyDetector(
    CredentialFormat,
    secret_type="AWS secret access key",  # pragma: allowlist secret
    patterns=(  # pragma: allowlist secret
        r"(?i)(?:aws_secret_access_key|secretaccesskey|aws_secret_key)[\"']?\s*[:=]\s*[\"']?"
        r"([A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])",
    ),
):
    """An AWS secret access key assigned in the shared credentials file or JSON, quoted or not
    (the library's AWS detector needs the value quoted)."""
