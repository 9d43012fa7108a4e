"""Device facts shared by the benchmarks: which device ran, library versions, memory bandwidth.

Imported as ``benchmarks.gpu.devinfo`` by the benchmarks and the preflight. Nothing here needs a
GPU: every function degrades to the CPU.
"""

from __future__ import annotations

import platform
import time
from typing import Any

# Peak memory bandwidth in GB/s (vendor figures) for the bandwidth bound of bench_search.py.
# Matched against torch.cuda.get_device_name() by substring, first match wins.
BANDWIDTH_GBS: tuple[tuple[str, float], ...] = (
    ("H200", 4800.0),
    ("H100 NVL", 3900.0),
    ("H100 PCIe", 2000.0),
    ("H100", 3350.0),  # SXM5 (HBM3)
    ("A100-SXM4-80GB", 2039.0),
    ("A100 80GB PCIe", 1935.0),
    ("A100", 1555.0),
    ("L40S", 864.0),
    ("V100", 900.0),
)


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (else platform.processor())."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def resolve_device(device: str = "auto") -> str:
    """``auto`` -> ``cuda`` when torch sees a GPU, else ``cpu``; ``cuda`` without a GPU raises."""
    import torch

    if device in (None, "", "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    if str(device).startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit(
            f"--device {device}: torch {torch.__version__} sees no CUDA GPU "
            "(a CPU-only torch wheel, or no driver); use --device cpu or auto"
        )
    return str(device)


def device_name(device: str = "auto") -> str:
    """A readable name of ``device``: the GPU's name from torch, or the CPU model."""
    try:
        import torch

        dev = resolve_device(device)
        if dev.startswith("cuda"):
            return str(torch.cuda.get_device_name(torch.device(dev)))
    except (ImportError, SystemExit):
        pass
    return f"CPU: {cpu_model()}"


def environment() -> dict[str, Any]:
    """Versions of the libraries the GPU paths use, and the visible GPU (None on the CPU)."""
    env: dict[str, Any] = {"python": platform.python_version(), "cpu": cpu_model()}
    try:
        import torch

        env["torch"] = torch.__version__
        env["torch_cuda"] = torch.version.cuda
        env["cuda_available"] = bool(torch.cuda.is_available())
        env["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except ImportError:
        env["torch"] = None
    try:
        import cupy

        env["cupy"] = cupy.__version__
    except Exception as e:  # noqa: BLE001 - any import failure means "no CuPy here"
        env["cupy"] = f"unavailable ({type(e).__name__})"
    for name in ("faiss", "ray", "sentence_transformers", "transformers"):
        try:
            mod = __import__(name)
            env[name] = getattr(mod, "__version__", "present")
        except Exception as e:  # noqa: BLE001
            env[name] = f"unavailable ({type(e).__name__})"
    return env


def table_bandwidth_gbs(name: str) -> float | None:
    """The vendor bandwidth of a GPU named ``name`` from :data:`BANDWIDTH_GBS`, or None."""
    for key, gbs in BANDWIDTH_GBS:
        if key.lower() in name.lower():
            return gbs
    return None


def measure_bandwidth_gbs(device: str, nbytes: int = 1 << 30, repeat: int = 5) -> float:
    """Copy bandwidth (bytes read + written per second, in GB/s) of a ``nbytes`` device copy,
    best of ``repeat``. On the CPU a numpy copy of ``nbytes // 4`` (smaller, quick)."""
    import torch

    if not device.startswith("cuda"):
        import numpy as np

        a = np.ones(max(1, nbytes // 16), dtype=np.float32)
        b = np.empty_like(a)
        best = float("inf")
        for _ in range(repeat):
            t = time.perf_counter()
            np.copyto(b, a)
            best = min(best, time.perf_counter() - t)
        return 2 * a.nbytes / best / 1e9
    a = torch.empty(nbytes // 4, dtype=torch.float32, device=device).fill_(1.0)
    b = torch.empty_like(a)
    b.copy_(a)
    torch.cuda.synchronize(device)
    best = float("inf")
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        b.copy_(a)
        end.record()
        torch.cuda.synchronize(device)
        best = min(best, start.elapsed_time(end) / 1e3)
    del a, b
    torch.cuda.empty_cache()
    return 2 * nbytes / best / 1e9


def bandwidth_gbs(device: str, given: float | None = None) -> tuple[float, str]:
    """(GB/s, where it came from): ``given``, else the table for the GPU's name, else measured."""
    if given:
        return float(given), "given (--bandwidth-gbs)"
    if device.startswith("cuda"):
        gbs = table_bandwidth_gbs(device_name(device))
        if gbs is not None:
            return gbs, "vendor table"
    return measure_bandwidth_gbs(device), "measured (device copy, read + write)"


def sync(device: str) -> None:
    """Wait for queued GPU work (no-op on the CPU)."""
    if str(device).startswith("cuda"):
        import torch

        torch.cuda.synchronize(torch.device(device))
