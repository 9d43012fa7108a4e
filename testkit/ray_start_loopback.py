"""``ray start`` that keeps a loopback ``--node-ip-address`` (run as ``python THIS start ...``).

Ray 2.60 replaces ``--node-ip-address=127.0.0.1`` by the machine's external address unless its
constant ``ENABLE_RAY_CLUSTER`` is false (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, the Windows and
macOS rule), and with that address the GCS server, the raylet and the agents listen on all
interfaces. With the variable at 0 every process of the node keeps 127.0.0.1 and listens there
only, but ``ray start --address=...`` then refuses to add a worker node ("Multi-node Ray clusters
are not supported on Windows and OSX"). This wrapper lifts that one refusal: the CLI module sees
the constant as true, everything else (the address rule in ``ray._private.services``) as false.
The processes the node starts inherit the variable, so job drivers keep 127.0.0.1 too.
"""

from __future__ import annotations

import sys
import types

LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
"""The environment every process of a loopback-only test cluster and its drivers need."""


class _ClusterAllowed(types.ModuleType):
    """``ray_constants`` as the CLI sees it: the real module's values, clusters allowed."""

    def __init__(self, real: types.ModuleType) -> None:
        super().__init__(real.__name__)
        self._real = real
        self.ENABLE_RAY_CLUSTER = True

    def __getattr__(self, name: str) -> object:
        return getattr(self._real, name)


def main() -> None:
    from ray._private import ray_constants
    from ray.scripts import scripts

    if ray_constants.ENABLE_RAY_CLUSTER:
        sys.exit(
            f"{__file__}: set {', '.join(f'{k}={v}' for k, v in LOOPBACK_ENV.items())} (else Ray replaces "
            "a loopback node address by the external one)"
        )
    scripts.ray_constants = _ClusterAllowed(ray_constants)
    sys.argv[0] = "ray"
    scripts.main()


if __name__ == "__main__":
    main()
