"""One Ray instance with two fake GPUs, shared by the tests of this folder.

The fixture starts (or reuses) the embedded local Ray with ``num_gpus=2``, so actors that
ask for a GPU get distinct ``CUDA_VISIBLE_DEVICES`` although the machine has none. The
fake encoders in ``embedding_fakes`` are shipped to the workers by value (they live in
the tests folder, which the workers cannot import). When the last test of this folder is
done, Ray is shut down so that later tests never see the fake GPUs.
"""

from __future__ import annotations

from pathlib import Path

import embedding_fakes
import pytest

_HERE = Path(__file__).resolve().parent
_state = {"started": False}


@pytest.fixture
def ray_fake_gpus():
    """The shared local Ray (4 logical CPUs, 2 fake GPUs); started on first use."""
    ray = pytest.importorskip("ray")
    from ray import cloudpickle

    from adaptlab.runtime import init_ray, shutdown_ray

    if ray.is_initialized() and ray.cluster_resources().get("GPU", 0) != 2:
        shutdown_ray()  # someone else's Ray, without our fake GPUs
    info = init_ray(num_cpus=4, num_gpus=2)
    _state["started"] = True
    cloudpickle.register_pickle_by_value(embedding_fakes)
    return info


def pytest_configure(config):
    config.addinivalue_line("markers", "stops_ray: the test shuts Ray down (run after this folder's other tests)")


def pytest_collection_modifyitems(session, config, items):
    """Tests marked ``stops_ray`` run after every other test of this folder, so the folder starts
    its Ray once (a test that stopped it in the middle made the next file start it again)."""
    ours = [i for i, item in enumerate(items) if _HERE in Path(str(item.path)).resolve().parents]
    last = [items[i] for i in ours if items[i].get_closest_marker("stops_ray")]
    if not last:
        return
    end = ours[-1]
    keep = [item for item in items[: end + 1] if item not in last]
    items[:] = keep + last + items[end + 1 :]


def pytest_runtest_teardown(item, nextitem):
    """Stop our Ray when the next test is outside this folder (or there is none)."""
    if not _state["started"]:
        return
    if nextitem is not None and _HERE in Path(str(nextitem.path)).resolve().parents:
        return
    from adaptlab.runtime import shutdown_ray

    shutdown_ray()
    _state["started"] = False
