"""First-hour frictions of ``adaptlab run``: dataset column options in the study file and on
the command line, --dry-run reading dataset headers, the default store and dataset name, and
the ad-hoc run's bootstrap seed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from adaptlab.errors import ConfigError
from adaptlab.study import load_study, parse_study

ROWS = [
    ("What does the pump move?", "The pump moves coolant through the loop."),
    ("Which valve closes first?", "The inlet valve closes before the outlet valve."),
    ("How hot is the loop?", "The loop runs at ninety degrees."),
    ("Who inspects the seals?", "The operator inspects every seal weekly."),
]


def _csv(path: Path, header: str = "q,passage") -> Path:
    path.write_text(header + "\n" + "".join(f'"{q}","{c}"\n' for q, c in ROWS))
    return path


def test_dataset_options_are_in_the_study_reference():
    from adaptlab.study.keys import sections

    info = next(k for k in sections() if (k.section, k.key) == ("datasets", "options"))
    assert "question_col" in info.help and "context_col" in info.help and "--dataset-option" in info.help


def test_dataset_option_on_the_command_line(tmp_path, cli):
    data = _csv(tmp_path / "qa.csv")
    res = cli(
        "run",
        "--model",
        "hash:64",
        "--dataset",
        f"pairs:{data}",
        "--dataset-option",
        "question_col=q",
        "--dataset-option",
        "context_col=passage",
        "--metrics",
        "acc@1",
        "--bootstrap",
        "100",
        "--no-ray",
        "--no-store",
        "--format",
        "json",
    )
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["n_queries"] == 4


def test_dataset_option_needs_key_and_value(tmp_path, cli):
    res = cli(
        "run", "--model", "hash:64", "--dataset", f"pairs:{tmp_path / 'x.csv'}", "--dataset-option", "q", "--dry-run"
    )
    assert res.returncode != 0 and "--dataset-option 'q': expected KEY=VALUE" in res.stderr


@pytest.mark.parametrize("suffix", ["csv", "jsonl"])
def test_dry_run_reads_the_header(tmp_path, cli, suffix):
    data = tmp_path / f"qa.{suffix}"
    if suffix == "csv":
        _csv(data, "question,passage")
    else:
        data.write_text("".join(json.dumps({"question": q, "passage": c}) + "\n" for q, c in ROWS))
    study = tmp_path / "s.toml"
    study.write_text(f'[study]\nstore = ""\n[[datasets]]\nspec = "pairs:{data}"\n[[models]]\nref = "hash:8"\n')
    res = cli("run", str(study), "--dry-run")
    assert res.returncode != 0
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and str(data) in lines[0] and "'context'" in lines[0], res.stderr
    assert "question, passage" in lines[0]  # the columns present
    # with the column named, the dry run passes
    study.write_text(
        study.read_text().replace(
            f'spec = "pairs:{data}"', f'spec = "pairs:{data}"\noptions = {{context_col = "passage"}}'
        )
    )
    assert cli("run", str(study), "--dry-run").returncode == 0


def test_dry_run_refuses_an_option_the_format_lacks(tmp_path, cli):
    data = _csv(tmp_path / "qa.csv")
    res = cli(
        "run", "--model", "hash:8", "--dataset", f"pairs:{data}", "--dataset-option", "passage_col=p", "--dry-run"
    )
    assert res.returncode != 0 and "option 'passage_col' is not valid for format 'pairs'" in res.stderr


def test_default_dataset_name_is_the_file_stem(tmp_path):
    data = _csv(tmp_path / "my-questions.csv")
    study = parse_study(
        {
            "datasets": [
                {"spec": f"pairs:{data}", "options": {"question_col": "q", "context_col": "passage"}},
                {"spec": "beir:data/scifact"},
            ],
            "models": [{"ref": "BAAI/bge-small-en-v1.5"}],
        }
    )
    assert [d.name for d in study.datasets] == ["my-questions", "scifact"]
    assert study.models[0].name == "bge-small-en-v1.5"  # a model keeps its dots
    over = study.with_overrides(datasets=["pairs:x/data.v2.jsonl"])
    assert over.datasets[0].name == "data.v2"


def test_no_store_key_writes_to_results_of_the_study_name_and_says_so(tmp_path, cli):
    study = tmp_path / "s.toml"
    study.write_text(
        '[study]\nname = "mine"\n[[datasets]]\nspec = "synthetic:n_documents=4,seed=1"\n'
        '[[models]]\nref = "hash:8"\n[embedding]\nuse_ray = false\ncache = "off"\n'
        "[bootstrap]\nn_resamples = 50\n"
    )
    (tmp_path / "pyproject.toml").write_text("")
    loaded = load_study(study)
    assert loaded.store_root() == tmp_path / "results" / "mine"
    res = cli("run", str(study), "--dry-run")
    assert f"results store: {tmp_path / 'results' / 'mine'}" in res.stdout
    res = cli("run", str(study))
    assert res.returncode == 0, res.stderr
    assert f"results stored in {tmp_path / 'results' / 'mine'}" in res.stdout
    assert (tmp_path / "results" / "mine").is_dir() and not (tmp_path / "results" / "study").exists()
    study.write_text(study.read_text().replace('name = "mine"', 'name = "mine"\nstore = ""'))
    assert load_study(study).store_root() is None


def test_adhoc_run_uses_bootstrap_seed_zero(tmp_path, cli):
    common = [
        "run",
        "--model",
        "hash:8",
        "--dataset",
        "synthetic:n_documents=8,seed=1",
        "--metrics",
        "mrr@10",
        "--bootstrap",
        "200",
        "--no-ray",
        "--no-store",
        "--format",
        "json",
    ]
    adhoc = json.loads(cli(*common).stdout)
    filed = tmp_path / "s.toml"
    filed.write_text(
        '[study]\nstore = ""\n[[datasets]]\nspec = "synthetic:n_documents=8,seed=1"\n'
        '[[models]]\nref = "hash:8"\n[bootstrap]\nseed = 0\n'
    )
    from_file = json.loads(cli("run", str(filed), *common[5:]).stdout)
    a, b = (next(iter(o["systems"].values()))["mrr@10"] for o in (adhoc, from_file))
    assert (a["ci_low"], a["ci_high"]) == (b["ci_low"], b["ci_high"])


def test_bad_option_value_in_the_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match=r"datasets\[0\]\.options: expected a table"):
        parse_study(
            {"datasets": [{"spec": "synthetic:", "options": "q"}], "models": [{"ref": "hash:8"}]}, source="s.toml"
        )


def test_small_adhoc_run_starts_no_ray(tiny_model):
    """660 documents and 660 queries (above [embedding].local_below's default 512) embed in-process
    in an ad-hoc run: no Ray start, no wait for an actor. In a process of its own, so that no other
    test's Ray can be running in it."""
    pytest.importorskip("ray")
    script = (
        "import sys, ray\n"
        "from adaptlab.cli import main\n"
        f"code = main(['run', '--model', {str(tiny_model)!r}, '--dataset', 'synthetic:n_documents=60,seed=0',\n"
        "             '--metrics', 'acc@1', '--bootstrap', '50', '--no-store', '--format', 'json'])\n"
        "print('ray started:', ray.is_initialized(), file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "ray started: False" in res.stderr, res.stderr[-3000:]
