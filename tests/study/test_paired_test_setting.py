"""The paired test is a setting like the interval: ``[bootstrap].test`` in a study file and
``--test`` on the command line reach the evaluation's ``BootstrapConfig`` (default sign-flip at
every number of queries)."""

from __future__ import annotations

import pytest

from adaptlab import load_study
from adaptlab.cli import build_parser
from adaptlab.cli._common import bootstrap_config
from adaptlab.errors import ConfigError

STUDY = """
[study]
name = "t"
store = ""

[[datasets]]
spec = "synthetic:n_documents=3,seed=0"

[[models]]
ref = "hash:8"
{bootstrap}
"""


def _study(tmp_path, bootstrap: str = ""):
    path = tmp_path / "s.toml"
    path.write_text(STUDY.format(bootstrap=bootstrap))
    return load_study(path)


def test_the_study_default_is_the_sign_flip_test(tmp_path):
    assert _study(tmp_path).bootstrap_config().test == "sign-flip"


def test_a_study_can_ask_for_the_bootstrap_p(tmp_path):
    assert _study(tmp_path, '[bootstrap]\ntest = "bootstrap"').bootstrap_config().test == "bootstrap"


def test_an_unknown_test_names_the_key_and_the_choices(tmp_path):
    with pytest.raises(ConfigError, match=r"\[bootstrap\]\.test.*sign-flip.*bootstrap"):
        _study(tmp_path, '[bootstrap]\ntest = "t-test"')


@pytest.mark.parametrize("given, expected", [((), "sign-flip"), (("--test", "bootstrap"), "bootstrap")])
def test_the_command_line_passes_the_test(given, expected):
    args = build_parser().parse_args(["evaluate", "--qrels", "q.txt", "--run", "a.trec", *given])
    assert bootstrap_config(args).test == expected
