"""Joining a Ray cluster at an address, with Ray's token authentication.

A token-protected cluster refuses a client whose ``RAY_AUTH_MODE`` is unset even when the token
is on disk, so when a token is available (``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH`` or
``~/.ray/auth_token``) and the mode is unset, :func:`connect` sets ``RAY_AUTH_MODE=token`` for
this process before connecting. Token authentication is never disabled here; ``RAY_AUTH_MODE``
set by the user is respected.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from adaptlab.errors import ConfigError

__all__ = ["auth_mode", "connect", "set_token_mode_for_client", "token_available"]


def auth_mode() -> str:
    """``"token"`` or ``"disabled"``: the authentication mode of the Ray this process runs (the
    environment's ``RAY_AUTH_MODE``, else ``"unknown"``, when Ray does not say)."""
    try:
        from ray._raylet import AuthenticationMode, get_authentication_mode  # type: ignore[attr-defined]  # private

        return "token" if get_authentication_mode() == AuthenticationMode.TOKEN else "disabled"
    except Exception:  # noqa: BLE001 - private API; absence must not break init
        return os.environ.get("RAY_AUTH_MODE", "unknown").lower()


def token_available() -> bool:
    """Whether a Ray token is available here (``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH`` or
    ``~/.ray/auth_token``)."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return True
    path = os.environ.get("RAY_AUTH_TOKEN_PATH")
    if path and Path(path).expanduser().is_file():
        return True
    return (Path.home() / ".ray" / "auth_token").is_file()


def set_token_mode_for_client() -> None:
    """``RAY_AUTH_MODE=token`` for this process when a token is available and the mode is unset."""
    if "RAY_AUTH_MODE" in os.environ or not token_available():
        return
    os.environ["RAY_AUTH_MODE"] = "token"
    try:  # refresh Ray's cached config so this process sees the mode (what ray.init does itself)
        from ray._raylet import Config  # type: ignore[attr-defined]  # private, not in Ray's stub

        Config.initialize("")
    except Exception:  # noqa: BLE001 - private API
        pass


def connect(address: str, common: dict[str, Any]) -> Any:
    """``ray.init(address=...)`` with our token mode; unreachable or refusing clusters -> ConfigError."""
    import ray  # deferred: ray is heavy and only needed here

    set_token_mode_for_client()
    try:
        return ray.init(address=address, **common)
    except (ConnectionError, RuntimeError, TimeoutError) as e:
        raise ConfigError(
            f"cannot connect to the Ray cluster at {address!r}: {e}. Check the address (the head "
            "node's GCS port, 6379 by default, or ray://host:10001), and for token authentication "
            "make the cluster's token available here: RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or "
            "~/.ray/auth_token (on the head node: `ray get-auth-token`)"
        ) from e
