"""detect-secrets plugins for credential formats the library does not ship a detector for.

:mod:`adaptlab.study.sensitive` scans with every plugin of detect-secrets (Yelp, "detect-secrets",
https://github.com/Yelp/detect-secrets) and adds these, loaded through the library's own
custom-plugin mechanism (a plugin file named by path, as ``detect-secrets scan --plugin FILE``
does). Each is a :class:`~detect_secrets.plugins.base.RegexBasedDetector`: a line matching one of
its ``denylist`` patterns holds a secret (group 1 when the pattern has one, else the whole match).

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

from detect_secrets.plugins.base import RegexBasedDetector

__all__ = ["AnthropicKeyDetector", "AwsSecretAccessKeyDetector", "DockerConfigAuthDetector", "GcpServiceAccountDetector", "HuggingFaceTokenDetector",
           "KubeconfigCredentialDetector", "LibpqPasswordDetector", "NetrcPasswordDetector",
           "OpenAIProjectKeyDetector"]


class NetrcPasswordDetector(RegexBasedDetector):
    """A ``.netrc`` password: ``machine H login U password P``, ``default ... password P``, or a
    line holding only ``password P`` (the entry's tokens spread over lines)."""

    secret_type = ".netrc password"  # pragma: allowlist secret
    denylist = (
        re.compile(r"(?:^|\s)(?:machine\s+\S+|default)(?:\s+(?:login|account)\s+\S+)*\s+password\s+(\S+)"),
        re.compile(r"^\s*(?:(?:login|account)\s+\S+\s+)*password\s+(\S+)\s*$"),
    )


class OpenAIProjectKeyDetector(RegexBasedDetector):
    """OpenAI's project, service-account and admin keys."""

    secret_type = "OpenAI API key"  # pragma: allowlist secret
    denylist = (re.compile(r"(?<![A-Za-z0-9_-])(sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,})"),)


class AnthropicKeyDetector(RegexBasedDetector):
    """Anthropic's API and admin keys."""

    secret_type = "Anthropic API key"  # pragma: allowlist secret
    denylist = (re.compile(r"(?<![A-Za-z0-9_-])(sk-ant-(?:api|admin)\d{2}-[A-Za-z0-9_-]{20,})"),)


class DockerConfigAuthDetector(RegexBasedDetector):
    """A registry credential of Docker's ``config.json``."""

    secret_type = "Docker registry auth"  # pragma: allowlist secret
    denylist = (re.compile(r"\"(?:auth|identitytoken)\"\s*:\s*\"([A-Za-z0-9+/=._-]{8,})\""),)


class LibpqPasswordDetector(RegexBasedDetector):
    """A password in a libpq keyword/value connection string (with at least one other keyword)."""

    secret_type = "PostgreSQL password"  # pragma: allowlist secret
    denylist = (
        re.compile(r"\b(?:host|hostaddr|dbname|user|port)\s*=\s*\S+.*?\bpassword\s*=\s*'?([^\s']+)", re.IGNORECASE),
        re.compile(r"\bpassword\s*=\s*'?([^\s';]+)'?.*?\b(?:host|hostaddr|dbname|user)\s*=", re.IGNORECASE),
    )


class GcpServiceAccountDetector(RegexBasedDetector):
    """A Google Cloud service-account key file."""

    secret_type = "GCP service-account key"  # pragma: allowlist secret
    denylist = (re.compile(r"\"type\"\s*:\s*\"(service_account)\""),)


class KubeconfigCredentialDetector(RegexBasedDetector):
    """A kubeconfig user's key or token."""

    secret_type = "kubeconfig credential"  # pragma: allowlist secret
    denylist = (
        re.compile(r"^\s*client-key-data\s*:\s*(\S{16,})"),
        re.compile(r"^\s*(?:token|id-token|refresh-token)\s*:\s*[\"']?([A-Za-z0-9._~+/=-]{16,})"),
    )


class HuggingFaceTokenDetector(RegexBasedDetector):
    """A Hugging Face user access token."""

    secret_type = "Hugging Face token"  # pragma: allowlist secret
    denylist = (re.compile(r"(?<![A-Za-z0-9_])(hf_[A-Za-z]{30,})"),)


class AwsSecretAccessKeyDetector(RegexBasedDetector):
    """An AWS secret access key assigned in the shared credentials file or JSON, quoted or not
    (the library's AWS detector needs the value quoted)."""

    secret_type = "AWS secret access key"  # pragma: allowlist secret
    denylist = (re.compile(r"(?i)(?:aws_secret_access_key|secretaccesskey|aws_secret_key)[\"']?\s*[:=]\s*[\"']?"
                           r"([A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"),)
