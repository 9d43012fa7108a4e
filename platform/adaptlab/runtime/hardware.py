"""What the processor computes natively: the one place that decides whether a reduced precision
really runs at that precision here.

A bfloat16 request on a CPU without AVX512-BF16 or AMX is not computed in bfloat16: OpenVINO's CPU
plugin silently keeps fp32 (its precision hint is a hint), torch emulates it slowly. A system stored
under a ``-bf16`` name must have been computed in bfloat16, so embedding and training both ask
:func:`bf16_support` first and refuse with one line naming the missing instruction sets.

Intel (2023), *Intel 64 and IA-32 Architectures Software Developer's Manual*, vol. 1, ch. 14
(AVX512_BF16) and ch. 20 (AMX) name the CPU flags read here; Linux reports them in
``/proc/cpuinfo`` as ``avx512_bf16`` and ``amx_bf16``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["BF16_FLAGS", "Support", "bf16_support", "cpu_flags"]

BF16_FLAGS = ("avx512_bf16", "amx_bf16")
"""CPU flags (Linux names) of native bfloat16 arithmetic: either one is enough."""
_CPUINFO = Path("/proc/cpuinfo")


@dataclass(frozen=True)
class Support:
    """Whether a device computes a precision natively, and why not when it does not."""

    native: bool
    reason: str = ""


@functools.lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags as Linux names them (``avx2``, ``avx512_bf16``, ``amx_bf16``, ...);
    empty where ``/proc/cpuinfo`` is missing (then torch's own checks decide, see
    :func:`bf16_support`)."""
    try:
        text = _CPUINFO.read_text(errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.partition(":")[2].split())
    return frozenset()


def bf16_support(device: Any = "cpu") -> Support:
    """Does ``device`` (``"cpu"``, ``"cuda"``, ``"cuda:1"`` or a torch device) compute bfloat16
    natively? A CPU needs AVX512-BF16 or AMX-BF16; a CUDA device asks torch
    (``torch.cuda.is_bf16_supported``, compute capability 8.0 or newer)."""
    kind = str(getattr(device, "type", device)).split(":")[0]
    if kind == "cuda":
        import torch  # deferred: only a GPU request pays torch's import here

        ok = bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
        return Support(ok, "" if ok else "this GPU computes no bfloat16 natively (compute capability < 8.0)")
    flags = cpu_flags()
    if not flags:
        return _torch_cpu_bf16()
    if any(flag in flags for flag in BF16_FLAGS):
        return Support(True)
    have = ", ".join(f for f in ("avx2", "avx512f", "avx512_vnni") if f in flags) or "none of AVX2/AVX-512"
    return Support(False, f"this CPU lacks AVX512-BF16 and AMX-BF16 (it has {have})")


def _torch_cpu_bf16() -> Support:
    """torch's own CPU checks, where the flags cannot be read (no ``/proc``)."""
    import torch

    ok = bool(
        getattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)()
        or getattr(torch.cpu, "_is_amx_tile_supported", lambda: False)()
    )
    return Support(ok, "" if ok else "this CPU computes no bfloat16 natively (no AVX512-BF16, no AMX)")
