"""init_ray: local start settings, idempotency, argument checks, client token mode."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from adaptlab.errors import ConfigError
from adaptlab.runtime import cluster, local_num_cpus, ray_auth


@pytest.mark.parametrize(("cores", "expected"), [(1, 4), (2, 4), (3, 6), (8, 16)])
def test_local_num_cpus_never_starves_a_small_machine(cores, expected):
    assert local_num_cpus(cores) == expected


def test_address_with_local_only_resources_is_rejected():
    with pytest.raises(ConfigError, match="num_cpus can only be set when starting a local Ray"):
        cluster.init_ray("127.0.0.1:6379", num_cpus=4)
    with pytest.raises(ConfigError, match="dashboard"):
        cluster.init_ray("auto", dashboard=True)
    with pytest.raises(ConfigError, match="non-negative integer"):
        cluster.init_ray(num_gpus=-1)


def test_client_token_mode_is_set_only_when_a_token_exists(monkeypatch, tmp_path):
    monkeypatch.setattr(ray_auth.Path, "home", lambda: tmp_path)  # no ~/.ray/auth_token
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH", raising=False)
    # set, then deleted, so monkeypatch records the variable and removes at teardown the value the
    # code under test sets below (a bare delenv of an absent variable records nothing, and the
    # "token" mode leaked into later tests' embedded Ray starts)
    monkeypatch.setenv("RAY_AUTH_MODE", "unset")
    monkeypatch.delenv("RAY_AUTH_MODE")
    assert not ray_auth.token_available()
    token = tmp_path / "token"
    token.write_text("x" * 32)
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(token))
    assert ray_auth.token_available()
    refreshed = []

    class FakeConfig:
        @staticmethod
        def initialize(text):
            refreshed.append(text)

    monkeypatch.setattr("ray._raylet.Config", FakeConfig)
    ray_auth.set_token_mode_for_client()  # mode unset + token on disk -> token mode
    assert os.environ["RAY_AUTH_MODE"] == "token" and refreshed == [""]
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # an explicit choice is respected
    ray_auth.set_token_mode_for_client()
    assert os.environ["RAY_AUTH_MODE"] == "disabled" and refreshed == [""]


_SCRIPT = textwrap.dedent(
    """
    import json, ray
    from adaptlab.runtime import init_ray, cluster_has_gpus, local_num_cpus
    a = init_ray()
    b = init_ray(num_cpus=99)  # already running: returned as is
    print(json.dumps({"a": a.__dict__, "b": b.__dict__, "gpus": cluster_has_gpus(),
                      "expected_cpus": local_num_cpus(),
                      "progress": ray.data.DataContext.get_current().enable_progress_bars}))
    """
)


def test_local_start_in_a_fresh_process():
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_AUTH_MODE")}
    out = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    info = json.loads(out.stdout.strip().splitlines()[-1])
    a, b = info["a"], info["b"]
    assert a["started_here"] and a["num_cpus"] == info["expected_cpus"] >= 4
    assert a["address"].startswith("127.0.0.1:")  # the node address is loopback (issue 22)
    assert a["auth_mode"] == "token"  # Ray 2.60's default for local clusters, kept on
    assert a["dashboard_url"] is None  # dashboard off by default
    assert b == a  # idempotent
    assert info["gpus"] is False and info["progress"] is False
    assert "Token authentication is enabled" not in out.stderr  # quiet


def test_cluster_has_gpus_needs_ray(monkeypatch):
    import ray

    monkeypatch.setattr(ray, "is_initialized", lambda: False)  # whether or not a shared Ray is up
    with pytest.raises(RuntimeError, match="init_ray"):
        cluster.cluster_has_gpus()


_BACKGROUND = textwrap.dedent(
    """
    import json
    import ray
    from adaptlab.runtime import cluster, init_ray, on_shutdown, shutdown_ray, start_ray
    from adaptlab.runtime.watchdog import session_pids

    calls = []
    future = start_ray()
    same = start_ray() is future  # a second call while starting returns the same future
    info = init_ray()  # waits for the background start instead of starting a second Ray
    on_shutdown(lambda: calls.append("released"))
    session = ray._private.worker._global_node.get_session_dir_path()
    watchdog = cluster._STATE.watchdog
    shutdown_ray()
    print(json.dumps({"same": same, "equal": future.result() == info, "started": info.started_here,
                      "calls": calls, "watchdog_exit": watchdog.process.returncode,
                      "left": session_pids(session), "handle": cluster._STATE.watchdog}))
    """
)


def test_background_start_is_awaited_and_shutdown_calls_hooks():
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_AUTH_MODE")}
    out = subprocess.run([sys.executable, "-c", _BACKGROUND], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    info = json.loads(out.stdout.strip().splitlines()[-1])
    assert info == {
        "same": True,
        "equal": True,
        "started": True,
        "calls": ["released"],
        "watchdog_exit": 0,
        "left": [],
        "handle": None,
    }  # the watchdog stopped with Ray
    assert "SIGTERM handler is not set" not in out.stderr  # quiet about the background thread
