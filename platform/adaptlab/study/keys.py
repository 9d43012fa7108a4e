"""Every key a study file may hold, with its type, default, allowed values and a one-line help
text: the reference of the study file, read from the dataclasses that parse it.

:func:`sections` walks the sections of :class:`~adaptlab.study.schema.Study` (``[study]``,
``[[datasets]]``, ..., ``[adapt]`` and its tables, ``[tune]``) and returns one :class:`KeyInfo`
per key, so the documentation is generated from the code that checks the file and cannot list a
key the parser refuses or miss one it accepts. The training tables (``[adapt.pt]``,
``[adapt.ft]``, ``[adapt.colbert]``) and the sweep's keys of ``[tune]`` are the fields of the
trainers' and the sweep's configurations (:mod:`adaptlab.adapt.train`), whose defaults are
declared there; their help texts are here, next to the rest of the study file's.

Examples
--------
>>> from adaptlab.study.keys import sections
>>> keys = {(k.section, k.key): k for k in sections()}
>>> k = keys[("adapt", "fraction")]
>>> k.type, k.default, k.allowed
('number', '0.3', '(0.0, 1.0]')
>>> keys[("datasets", "options")].help.startswith("the format's options")
True
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields
from typing import Any, Union, get_args, get_origin, get_type_hints

from adaptlab.adapt.train.colbert import ColBERTFTConfig
from adaptlab.adapt.train.ft import FTConfig
from adaptlab.adapt.train.pt import PTConfig
from adaptlab.adapt.train.sweep_config import SweepConfig
from adaptlab.stats import BootstrapConfig
from adaptlab.study.adapt_config import (
    _SHARED_TRAINING_KEYS,
    AdaptSettings,
    ColBERTSettings,
    LLMSettings,
    TuneSettings,
)
from adaptlab.study.schema import (
    AnalysisSection,
    BootstrapSection,
    DatasetSection,
    EmbeddingSection,
    EvaluationSection,
    ModelSection,
    StudySection,
    interval_text,
    toml_key,
)

__all__ = ["KeyInfo", "sections"]


@dataclass(frozen=True)
class KeyInfo:
    """One key of a study file: its section (``"adapt.ft"``; ``"datasets"`` for the
    ``[[datasets]]`` tables), name, type, default (as TOML text, or what it follows), allowed
    values or range (``""``: any of its type) and a one-line help text."""

    section: str
    key: str
    type: str
    default: str
    allowed: str
    help: str


TRAINING_HELP: dict[str, str] = {
    "learning_rate": "the optimizer's learning rate",
    "epochs": "passes over the training data",
    "batch_size": "examples per training step",
    "warmup_ratio": "share of the steps with a linear learning-rate warm-up, in [0, 1)",
    "weight_decay": "AdamW weight decay",
    "max_grad_norm": "gradient clipping norm",
    "max_steps": "at most this many steps (0: no limit)",
    "min_steps": "the training check's minimum number of steps (0: no minimum)",
    "min_weight_change": "the training check's minimum relative weight change (0: no check)",
    "warn_only": "a failed training check warns instead of failing",
    "gradient_checkpointing": 'recompute each layer in the backward pass: less memory, same numbers ("auto": '
    "when it lets stages share a node)",
    "precision": '"fp32", or "bf16" (bfloat16 autocast; changes the numbers)',
    "fused_attention": "train without attention dropout on the fused SDPA kernel (changes the numbers)",
    "length_buckets": "batch examples of similar token length (changes the numbers)",
    "mlm_probability": "share of tokens masked, in (0, 1)",
    "max_seq_length": "tokens per training text (FT: 0 for the model's)",
    "num_negatives": "hard negatives per question in the loss (at most [adapt].n_negatives)",
    "scale": "the loss's similarity scale (1/temperature)",
    "query_prefix": 'text put before every training question ("auto": the model\'s own)',
    "passage_prefix": 'text put before every training passage ("auto": the model\'s own)',
    "negatives_per_query": "hard negatives per training question (one triple each)",
    "random_negatives": "negatives sampled for a question without a hard one",
    "use_ib_negatives": "use in-batch negatives",
    "warmup_steps": "steps of learning-rate warm-up",
    "doc_maxlen": "tokens per document (kept with the checkpoint)",
    "query_maxlen": "tokens per query (kept with the checkpoint)",
    "dim": "the projection's dimension (a plain BERT base only)",
    "timeout_s": "seconds a ColBERT training may take",
    "retries": "retries of a failed ColBERT training",
}
"""Help texts of the trainers' configuration fields (``[adapt.pt]``, ``[adapt.ft]``,
``[adapt.colbert]`` and the training keys ``[adapt]`` shares with PT and FT)."""

SWEEP_HELP: dict[str, str] = {
    "param_space": "tunable name -> a list (choice), {loguniform = [lo, hi]}, {grid = [...]} or a fixed value",
    "variant": '"ft" (fine-tune the base model) or "pt-ft" (its PT artifact)',
    "measure": "the per-query measure of the objective",
    "num_samples": "trials to draw (a grid entry multiplies them)",
    "search": '"random" (seeded) or "optuna" (TPE; needs optuna)',
    "confirm_fraction": "share of the validation questions kept to re-score the chosen trial, in (0, 1)",
    "grace_period": "ASHA: epochs before a trial may stop",
    "reduction_factor": "ASHA: 1/factor of the trials kept at each rung",
    "max_epochs": "ASHA's last rung (0: the largest epochs of the space)",
    "cpus_per_trial": "CPUs per trial",
    "gpus_per_trial": 'GPUs per trial ("auto": 1 when the cluster has GPUs)',
    "max_concurrent_trials": "trials at once (0: as many as fit)",
    "resume": "restore an experiment already at the storage path",
    "n_resamples": "the objective's bootstrap resamples",
    "sample_size": "the objective's queries per resample (0: all)",
    "ci_seed": "the objective's bootstrap seed",
}
"""Help texts of the sweep's keys of ``[tune]`` (:class:`SweepConfig` and its bootstrap)."""

_TABLES: tuple[tuple[str, type], ...] = (
    ("study", StudySection),
    ("datasets", DatasetSection),
    ("models", ModelSection),
    ("evaluation", EvaluationSection),
    ("bootstrap", BootstrapSection),
    ("embedding", EmbeddingSection),
    ("analysis", AnalysisSection),
    ("adapt", AdaptSettings),
)


def sections() -> list[KeyInfo]:
    """Every section and key of a study file, in file order (see the module docstring)."""
    out = [info for name, cls in _TABLES for info in _declared(name, cls)]
    out += [_config_key("adapt", PTConfig, key, shared=True) for key in _SHARED_TRAINING_KEYS]
    out += [_config_key("adapt.pt", PTConfig, f.name) for f in fields(PTConfig)]
    out += [_config_key("adapt.ft", FTConfig, f.name) for f in fields(FTConfig)]
    out += _declared("adapt.llm", LLMSettings)
    out += _declared("adapt.colbert", ColBERTSettings)
    out += [_config_key("adapt.colbert", ColBERTFTConfig, f.name) for f in fields(ColBERTFTConfig)]
    out += _declared("tune", TuneSettings)
    out += [_config_key("tune", SweepConfig, f.name) for f in fields(SweepConfig) if f.name != "bootstrap"]
    boot = BootstrapConfig()
    out += [
        KeyInfo("tune", "n_resamples", "integer", str(boot.n_resamples), ">= 1", SWEEP_HELP["n_resamples"]),
        KeyInfo("tune", "sample_size", "integer", "0", ">= 0", SWEEP_HELP["sample_size"]),
        KeyInfo("tune", "ci_seed", "integer", "derived from [study].seed", ">= 0", SWEEP_HELP["ci_seed"]),
    ]
    return out


def _declared(section: str, cls: type) -> list[KeyInfo]:
    """The keys of a section whose dataclass declares them with :func:`~adaptlab.study.schema.setting`
    (fields that are derived, not keys of the file, and the sub-tables are left out)."""
    hints = get_type_hints(cls)
    out = []
    for f in fields(cls):
        meta = f.metadata
        if "help" not in meta or meta["help"].endswith("(derived)") or meta["help"].startswith("[adapt."):
            continue
        out.append(
            KeyInfo(
                section,
                toml_key(f),
                _type_text(hints[f.name], meta),
                _default_text(f),
                _allowed_text(meta),
                meta["help"],
            )
        )
    return out


def _config_key(section: str, cls: type, name: str, *, shared: bool = False) -> KeyInfo:
    """A key that is a field of a trainer's or the sweep's configuration."""
    f = next(f for f in fields(cls) if f.name == name)
    help_text = TRAINING_HELP.get(name) or SWEEP_HELP[name]
    if shared:
        help_text += " (for PT and FT both; or set it in [adapt.pt] / [adapt.ft])"
    meta = {"off": "auto"} if name == "gpus_per_trial" else {}
    default = _default_text(f)
    if name == "gpus_per_trial":
        default = '"auto"'
    if default == "None" and name in ("max_steps", "max_seq_length", "max_epochs", "max_concurrent_trials"):
        default = "0"
    return KeyInfo(section, name, _type_text(get_type_hints(cls)[name], meta), default, "", help_text)


def _type_text(tp: Any, meta: Mapping[str, Any]) -> str:
    """A field's type as the study file spells it."""
    args = set(get_args(tp)) if get_origin(tp) in (Union, types.UnionType) else set()
    if meta.get("off") is not None:
        return 'number or "auto"' if meta["off"] == "auto" else "number or false"
    if args == {bool, str}:
        return 'boolean or "auto"'
    base = next(iter(args - {type(None)})) if args else tp
    if get_origin(base) in (list, tuple):
        item = get_args(base)[0]
        return "list of strings" if item is str else "list"
    if get_origin(base) in (dict, Mapping) or base is Mapping or base is dict:
        return "table"
    names = {str: "string", int: "integer", float: "number", bool: "boolean"}
    if base in names:
        return names[base]
    return "string"  # paths and references


def _default_text(f: Any) -> str:
    """A field's default as TOML text, or what it follows (``setting(default_text=...)``)."""
    if f.metadata.get("default_text"):
        return str(f.metadata["default_text"])
    value = f.default_factory() if f.default is MISSING and f.default_factory is not MISSING else f.default
    if value is MISSING:
        return "required"
    if value is None and f.metadata.get("off") is not None:
        return '"auto"' if f.metadata["off"] == "auto" else "false"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(value, list):
        return "[" + ", ".join(f'"{v}"' if isinstance(v, str) else str(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{}" if not value else str(value)
    return str(value)


def _allowed_text(meta: Mapping[str, Any]) -> str:
    """A field's allowed values: its choices, minimum or range."""
    if meta.get("choices") is not None:
        return ", ".join(f'"{c}"' for c in meta["choices"])
    if meta.get("minimum") is not None:
        return f">= {meta['minimum']}"
    if meta.get("range") is not None:
        return interval_text(*meta["range"])
    return ""
