"""One name rule everywhere (issue 28): evaluate's run names (from file names), ``--dataset`` and
``--baseline``, the system and dataset names of an evaluation commit, and document ids from corpus
file names pass the study file's check: control characters and bidi overrides are refused with
exit 2 naming the value, names are NFC-normalised, and two names equal once normalised are refused."""

from __future__ import annotations

import unicodedata

import pytest

from adaptlab import results
from adaptlab.data.documents import load_documents
from adaptlab.errors import ConfigError
from adaptlab.evaluation import evaluate
from adaptlab.storage import check_names
from adaptlab.study.load import load_study
from robustness.hostile import RUN, STUDY, assert_one_line_error, cli, digest

NFC, NFD = unicodedata.normalize("NFC", "h\u00e9"), unicodedata.normalize("NFD", "h\u00e9")
HOSTILE = {"esc": "a\x1b[31mred", "newline": "a\nb", "bidi": "abc\u202edcba", "nul-free control": "a\x07b"}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_run_file_name_with_a_control_character_is_refused(work, case):
    name = HOSTILE[case].replace("\x00", "")
    (work / f"{name}.txt").write_text(RUN)
    rc, out, err = cli(["evaluate", "--qrels", "qrels.txt", "--run", f"{name}.txt", "--store", "st", "--dataset", "d"])
    line = assert_one_line_error(rc, err, ("--run", repr(name)))
    assert "\x1b" not in out + err and "\u202e" not in out + err and not (work / "st").exists(), line


@pytest.mark.parametrize("option", ["--dataset", "--baseline"])
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_dataset_and_baseline_values_with_a_control_character_are_refused(work, option, case):
    values = {"--dataset": "d", "--baseline": "run", option: HOSTILE[case]}
    args = ["evaluate", "--qrels", "qrels.txt", "--run", "run.txt", "--store", "st"]
    rc, out, err = cli([*args, *(x for kv in values.items() for x in kv)])
    assert_one_line_error(rc, err, (option, repr(HOSTILE[case])))
    assert not (work / "st").exists()


def test_two_run_names_equal_once_normalised_are_refused(work):
    (work / f"{NFC}.txt").write_text(RUN)
    (work / f"{NFD}.txt").write_text(RUN)
    before = digest(work / "st")
    rc, _out, err = cli(
        [
            "evaluate",
            "--qrels",
            "qrels.txt",
            "--run",
            f"{NFC}.txt",
            "--run",
            f"{NFD}.txt",
            "--store",
            "st",
            "--dataset",
            "d",
        ]
    )
    assert_one_line_error(rc, err, ("--run", "equal once normalised", repr(NFC), repr(NFD)))
    assert digest(work / "st") == before


def test_names_are_stored_in_nfc(work):
    (work / f"{NFD}.txt").write_text(RUN)
    rc, _out, err = cli(
        ["evaluate", "--qrels", "qrels.txt", "--run", f"{NFD}.txt", "--store", "st", "--dataset", f"d-{NFD}"]
    )
    assert rc == 0, err
    runs = results.open(work / "st").runs().to_pylist()
    assert [(r["system"], r["dataset"]) for r in runs] == [(NFC, f"d-{NFC}")]


def test_the_python_api_applies_the_same_rule(work):
    with pytest.raises(ConfigError, match=r"evaluate\(\): system"):
        evaluate({"q1": {"d1": 1}}, {"q1": {"d1": 1.0}}, system="x\u202ey")
    assert evaluate({"q1": {"d1": 1}}, {"q1": {"d1": 1.0}}, system=NFD).system == NFC
    with pytest.raises(ConfigError, match="equal once normalised"):
        check_names([NFC, "other", NFD], "names")


def test_study_names_equal_once_normalised_are_refused_and_stored_in_nfc(work):
    two = STUDY.replace(
        'name = "h"\nref = "hash:16"', f'name = "{NFC}"\nref = "hash:16"\n\n[[models]]\nname = "{NFD}"\nref = "hash:8"'
    )
    (work / "study.toml").write_text(two)
    rc, _out, err = cli(["run", "study.toml", "--dry-run"])
    assert_one_line_error(rc, err, ("[[models]] names", "equal once normalised"))
    (work / "study.toml").write_text(STUDY.replace('name = "h"', f'name = "{NFD}"'))
    assert load_study(work / "study.toml").models[0].name == NFC


def test_document_ids_from_file_names_follow_the_rule(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a\x1b[2Jb.txt").write_text("some text\n")
    with pytest.raises(ConfigError, match=r"document id from the file name: expected printable"):
        load_documents(corpus)
    (corpus / "a\x1b[2Jb.txt").unlink()
    (corpus / f"{NFD} doc.txt").write_text("some text\n")
    assert [d.id for d in load_documents(corpus)] == [f"{NFC}_doc"]
    (corpus / f"{NFC} doc.txt").write_text("other text\n")
    with pytest.raises(Exception, match="duplicate document id"):
        load_documents(corpus)
