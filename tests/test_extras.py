"""The layered install: a lean core, and one line naming the extra when a feature needs one.

A missing package is simulated with ``sys.modules[name] = None`` (then ``import name`` raises
ImportError and ``importlib.util.find_spec(name)`` returns None), so these tests pass whether or
not the optional packages are installed here. The core's dependency closure is computed from the
installed packages' metadata, so a core dependency that drags a heavy tree is caught too.
"""

from __future__ import annotations

import ast
import importlib.metadata as md
import re
import sys
from pathlib import Path

import pytest
import tomllib

from adaptlab.errors import ConfigError, MissingExtraError, extra_installed, missing_extra, require_extra

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
EXTRAS: dict[str, list[str]] = PROJECT["optional-dependencies"]
HEAVY = {
    "ragatouille",
    "colbert-ai",
    "langchain",
    "langchain-core",
    "llama-index",
    "llama-index-core",
    "openai",
    "databricks-sdk",
    "flagembedding",
    "datasets",
    "ir-datasets",
    "peft",
    "mlflow",
    "mlflow-skinny",
    "wandb",
    "mteb",
    "polars",
    "optimum",
    "optimum-onnx",
    "optimum-intel",
    "onnxruntime",
    "openvino",
    "nncf",
    "faiss-cpu",
    "boto3",
    "botocore",
    "sqlalchemy",
    "alembic",
    "cupy-cuda12x",
}
"""Packages the core must not install, directly or through another package."""
ONE_LINE = r"^{feature} need the {extra} extra: pip install 'adaptlab\[{extra}\]' \(.+\)$"


def _name(requirement: str) -> str:
    """The normalised project name of a requirement string (PEP 503)."""
    return re.sub(r"[-_.]+", "-", re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement).group(1)).lower()


def _missing(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    """Make ``modules`` (and every loaded submodule of them) unimportable for this test."""
    for name in list(sys.modules):
        if any(name == m or name.startswith(m + ".") for m in modules):
            monkeypatch.setitem(sys.modules, name, None)
    for m in modules:
        monkeypatch.setitem(sys.modules, m, None)


def _one_line(e: BaseException, feature: str, extra: str) -> None:
    text = str(e)
    assert "\n" not in text, text
    assert re.match(ONE_LINE.format(feature=re.escape(feature), extra=extra), text), text
    assert extra in EXTRAS, f"the message names [{extra}], which pyproject.toml does not define"


# ----------------------------------------------------------------------------- the helper


def test_require_extra_returns_the_module_when_installed() -> None:
    assert require_extra("json", "none", "JSON files") is sys.modules["json"]
    assert extra_installed("json") and not extra_installed("adaptlab_no_such_module.sub")


def test_require_extra_is_one_line_naming_the_extra(monkeypatch) -> None:
    _missing(monkeypatch, "colbert")
    with pytest.raises(MissingExtraError) as info:
        require_extra("colbert.modeling.checkpoint", "colbert", "ColBERT models")
    _one_line(info.value, "ColBERT models", "colbert")
    assert info.value.extra == "colbert" and isinstance(info.value, ConfigError)  # the CLI prints one line
    assert not extra_installed("colbert")


def test_a_re_raised_error_keeps_its_class_and_extra() -> None:
    """Callers add context as ``raise type(e)(f"{e} ...")`` (the study runner names what was
    committed): the error must accept one message and still name its extra."""
    e = missing_extra("ColBERT models", "colbert", "No module named 'colbert'")
    again = type(e)(f"{e} [no evaluation rows of this study were committed]")
    assert isinstance(again, MissingExtraError) and again.extra == "colbert"
    assert MissingExtraError("some other message").extra == ""


# ----------------------------------------------------------------------------- each import site


def test_colbert_models_name_the_colbert_extra(monkeypatch) -> None:
    from adaptlab.models.colbert import import_colbert

    _missing(monkeypatch, "colbert")
    with pytest.raises(MissingExtraError) as info:
        import_colbert()
    _one_line(info.value, "ColBERT models", "colbert")


def test_a_colbert_study_without_the_extra_is_one_line(monkeypatch, tmp_path, tiny_model, cli) -> None:
    bert = tiny_model.with_name(tiny_model.name + "-hf")
    study = tmp_path / "colbert.toml"
    study.write_text(f"""
[study]
name = "colbert-missing"
store = "{(tmp_path / "store").as_posix()}"

[[datasets]]
name = "syn"
spec = "synthetic:n_documents=3,seed=0"

[[models]]
name = "colbert"
ref = "{bert.as_posix()}"
backend = "colbert"
options = {{from_bert = true}}

[evaluation]
metrics = ["acc@1"]
k = 5

[embedding]
use_ray = false
""")
    _missing(monkeypatch, "colbert")
    done = cli("run", str(study))
    err = [line for line in done.stderr.splitlines() if line.startswith("adaptlab")]
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert len(err) == 1 and "ColBERT models need the colbert extra: pip install 'adaptlab[colbert]'" in err[0], err


def test_a_study_names_a_missing_extra_at_dry_run(monkeypatch, tmp_path, tiny_model) -> None:
    """The study is checked whole before any work: a model whose extra is missing is one line
    naming the entry and the extra at load time (a --dry-run), not when its embedding starts."""
    from adaptlab import load_study
    from adaptlab.study.inputs import check_inputs

    study = tmp_path / "flag.toml"
    study.write_text(f"""
[study]
name = "flag-missing"
store = ""

[[datasets]]
spec = "synthetic:n_documents=3,seed=0"

[[models]]
name = "bge"
ref = "{tiny_model.as_posix()}"
backend = "flag"
""")
    _missing(monkeypatch, "FlagEmbedding")
    with pytest.raises(MissingExtraError) as info:
        check_inputs(load_study(study))
    message = str(info.value)
    assert "\n" not in message and "[[models]] entry 1 ('bge')" in message, message
    assert "pip install 'adaptlab[flag]'" in message and message.endswith("nothing was run"), message


def test_flag_models_name_the_flag_extra(monkeypatch, tiny_model) -> None:
    from adaptlab.models import load_encoder

    _missing(monkeypatch, "FlagEmbedding")
    with pytest.raises(MissingExtraError) as info:
        load_encoder(str(tiny_model), backend="flag", device="cpu")
    _one_line(info.value, "FlagEmbedding models (bge-*, llm-embedder)", "flag")


@pytest.mark.parametrize(
    ("backend", "module", "extra", "feature"),
    [
        ("colbert", "colbert", "colbert", "ColBERT models"),
        ("flag", "FlagEmbedding", "flag", "FlagEmbedding models (bge-*, llm-embedder)"),
    ],
)
def test_a_backend_is_checked_before_any_work(monkeypatch, backend, module, extra, feature) -> None:
    from adaptlab.models import check_backend_packages

    check_backend_packages("sentence-transformers")  # the core's backend: nothing to check
    _missing(monkeypatch, module)
    with pytest.raises(MissingExtraError) as info:
        check_backend_packages(backend)
    _one_line(info.value, feature, extra)


@pytest.mark.parametrize(("backend", "feature"), [("onnx", "ONNX"), ("openvino", "OpenVINO")])
def test_onnx_and_openvino_name_the_fast_extra(monkeypatch, backend, feature) -> None:
    from adaptlab.models import check_backend_packages

    _missing(monkeypatch, "optimum")
    with pytest.raises(MissingExtraError) as info:
        check_backend_packages("sentence-transformers", backend)
    _one_line(info.value, f"{feature} embedding backends", "fast")


def test_faiss_search_names_the_fast_extra(monkeypatch) -> None:
    from adaptlab.retrieval.search import resolve_backend

    _missing(monkeypatch, "faiss")
    with pytest.raises(MissingExtraError) as info:
        resolve_backend("faiss")
    _one_line(info.value, "FAISS searches (backend='faiss')", "fast")
    assert resolve_backend("auto") in ("numpy", "cuda")  # the core searches without FAISS


def test_s3_locations_name_the_s3_extra(monkeypatch) -> None:
    from adaptlab.storage.objects import check_remote_support

    _missing(monkeypatch, "boto3")
    with pytest.raises(MissingExtraError) as info:
        check_remote_support("s3://bucket/models")
    _one_line(info.value, "s3:// artifacts and embedding caches", "s3")
    check_remote_support("/local/folder")  # a local path needs nothing


def test_mlflow_names_the_trackers_extra(monkeypatch, tmp_path) -> None:
    from adaptlab.results.exports import mlflow_log

    _missing(monkeypatch, "mlflow")
    with pytest.raises(MissingExtraError) as info:
        mlflow_log._client((tmp_path / "mlruns").as_uri())
    _one_line(info.value, "MLflow exports", "trackers")


def test_wandb_names_the_trackers_extra(monkeypatch) -> None:
    from adaptlab.results.exports import wandb_log

    _missing(monkeypatch, "wandb")
    with pytest.raises(MissingExtraError) as info:
        wandb_log._wandb()
    _one_line(info.value, "W&B exports", "trackers")


# ----------------------------------------------------------------------------- pyproject.toml


def _extras(spec: str) -> set[str]:
    """The extras a requirement asks for: ``ray[default,tune]>=2`` -> {default, tune}."""
    found = re.search(r"\[([^\]]*)\]", spec)
    return {e.strip() for e in found.group(1).split(",")} if found else set()


def _closure(roots: list[str]) -> set[str]:
    """Every installed project that ``roots`` (requirement strings) pull in, extras followed.
    Requirements under an environment marker (Python version, platform) are left out: the core
    names two (tomli, typing_extensions), and the packages' own are small back-ports."""
    seen: set[tuple[str, frozenset[str]]] = set()  # a project asked for again with other extras is followed again
    stack = [r for r in roots if ";" not in r]
    while stack:
        spec = stack.pop()
        name = _name(spec)
        if (name, frozenset(_extras(spec))) in seen:
            continue
        seen.add((name, frozenset(_extras(spec))))
        try:
            requires = md.requires(name) or []
        except md.PackageNotFoundError:
            continue
        for sub in requires:
            inner, _, marker = sub.partition(";")
            wanted = set(re.findall(r"extra\s*==\s*['\"]([^'\"]+)['\"]", marker))
            if (wanted and not wanted & _extras(spec)) or (marker.strip() and not wanted):
                continue
            stack.append(inner)
    return {name for name, _ in seen}


def test_the_core_names_no_heavy_package() -> None:
    core = {_name(r) for r in PROJECT["dependencies"]}
    assert not core & HEAVY, f"core dependencies that belong in an extra: {sorted(core & HEAVY)}"


def test_the_core_drags_no_heavy_package() -> None:
    pytest.importorskip("sentence_transformers")
    dragged = _closure(PROJECT["dependencies"])
    assert {"torch", "transformers", "sentence-transformers", "ray", "deltalake", "bm25s"} <= dragged
    assert not dragged & HEAVY, f"the core pulls in {sorted(dragged & HEAVY)}"


def test_all_holds_every_extra_and_test_holds_all() -> None:
    named = {"colbert", "flag", "fast", "trackers", "s3"}
    assert named <= set(EXTRAS)
    union = {_name(r) for extra in named for r in EXTRAS[extra]}
    assert {_name(r) for r in EXTRAS["all"]} == union
    assert set(EXTRAS["all"]) <= set(EXTRAS["test"])  # the suite tests every extra's feature
    assert set(EXTRAS["wandb"]) <= set(EXTRAS["trackers"])
    assert not {_name(r) for r in EXTRAS["all"]} & {_name(r) for r in EXTRAS["gpu"]}  # CUDA only on request


def test_every_extra_a_message_names_exists() -> None:
    named: dict[str, str] = {}
    for path in sorted((ROOT / "platform" / "adaptlab").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in (
                "require_extra",
                "missing_extra",
            ):
                arg = node.args[1] if len(node.args) > 1 else None  # the extra: second in both
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    named[arg.value] = f"{path.relative_to(ROOT)}:{node.lineno}"
    assert {"colbert", "flag", "fast", "trackers", "s3"} <= set(named), named
    assert not set(named) - set(EXTRAS), {k: v for k, v in named.items() if k not in EXTRAS}
