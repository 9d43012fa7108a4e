"""adaptlab.study: a study file (TOML) from validation to stored results.

``load_study`` reads and validates a file whole into typed sections (``[adapt]``/``[tune]``
included; every key with its default and help text: ``sections()``);
``Study.with_overrides`` applies command-line options; ``run_study`` runs it, with or without an
adaptation stage; ``submit_study`` sends it to a Ray cluster. Seeds: :mod:`adaptlab.study.seeds`.
"""

from __future__ import annotations

from adaptlab.study.adapt_config import AdaptSettings, TuneSettings, parse_adapt_section, parse_tune_section
from adaptlab.study.adaptation import TUNE_MEASURE, system_name
from adaptlab.study.inputs import check_inputs
from adaptlab.study.keys import KeyInfo, sections
from adaptlab.study.load import load_study, parse_study
from adaptlab.study.outcome import DatasetOutcome, ScaleStudyOutcome, StudyOutcome, SystemInfo
from adaptlab.study.runner import EvalOutputs, evaluate_systems, export_runs, run_scale_study, run_study
from adaptlab.study.schema import Study, default_name, project_root
from adaptlab.study.seeds import stage_seed
from adaptlab.study.submit import SubmitResult, describe_code, source_info, submit_study, upload_plan
from adaptlab.study.upload import ALLOW_CREDENTIAL_FLAG

__all__ = [
    "ALLOW_CREDENTIAL_FLAG",
    "AdaptSettings",
    "DatasetOutcome",
    "EvalOutputs",
    "KeyInfo",
    "ScaleStudyOutcome",
    "Study",
    "StudyOutcome",
    "SubmitResult",
    "SystemInfo",
    "TUNE_MEASURE",
    "TuneSettings",
    "check_inputs",
    "default_name",
    "describe_code",
    "evaluate_systems",
    "export_runs",
    "load_study",
    "parse_adapt_section",
    "parse_study",
    "parse_tune_section",
    "project_root",
    "run_scale_study",
    "run_study",
    "sections",
    "source_info",
    "stage_seed",
    "submit_study",
    "system_name",
    "upload_plan",
]
