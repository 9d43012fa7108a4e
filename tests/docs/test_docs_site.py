"""The generated reference pages of the documentation site cover the code (docs/_ext/adaptlab_docs).

Each test renders a page the way the site build does (docutils nodes, no Sphinx needed) and checks
it against what the code accepts, found independently of the generator: every command and option
of the ``adaptlab`` parsers, every key the study loader accepts (asked of the loader itself: an
unknown key's error lists the valid ones) and every name of ``adaptlab.__all__``. The full site
build (``python -m sphinx -W --keep-going -n -b html docs docs/_build/html``) runs in CI."""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from pathlib import Path

import pytest

pytest.importorskip("docutils")
from docutils.frontend import get_default_settings  # noqa: E402
from docutils.parsers.rst import Parser  # noqa: E402
from docutils.utils import new_document  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

from adaptlab.cli import build_parser  # noqa: E402
from adaptlab.errors import ConfigError  # noqa: E402
from adaptlab.study import load as study_load  # noqa: E402
from adaptlab.study.load import load_study  # noqa: E402
from adaptlab.study.schema import StudySection  # noqa: E402
from adaptlab_docs import api, cli, refs, study  # noqa: E402


def _document():
    return new_document("<test>", get_default_settings(Parser))


def _text(nodes_list) -> str:
    return "\n".join(n.astext() for n in nodes_list)


# -- CLI ---------------------------------------------------------------------------------------


def _parser_walk(parser: argparse.ArgumentParser, path: tuple[str, ...]):
    """(command path, option strings) of every parser, found with argparse alone."""
    options = [s for a in parser._actions if a.help != argparse.SUPPRESS for s in a.option_strings]
    yield path, options
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _parser_walk(child, (*path, name))


def test_every_cli_command_and_option_is_in_the_cli_reference():
    cmds = cli.commands()
    sections = {c.name: _text(cli.render([c], _document())) for c in cmds}
    walked = list(_parser_walk(build_parser(), ("adaptlab",)))
    assert len(walked) >= 12  # adaptlab and its sub-commands
    for path, options in walked:
        name = " ".join(path)
        assert name in sections, f"command {name!r} has no section in the CLI reference"
        for option in options:
            assert re.search(rf"(^|[\s,]){re.escape(option)}([\s,=]|$)", sections[name], re.M), (
                f"{name}: option {option} is not in the CLI reference"
            )


def test_cli_reference_shows_help_texts_and_defaults():
    text = _text(cli.render(cli.commands(), _document()))
    run = next(c for c in cli.commands() if c.path == ("adaptlab", "run"))
    assert "Run a study" in text
    assert any("--bootstrap" in o.strings and o.help for o in run.options)
    assert "--" in text and "\u2013" not in text  # option names keep their two hyphens


# -- study file ------------------------------------------------------------------------------

MINIMAL = '[[datasets]]\nspec = "synthetic:n_documents=20,seed=0"\n\n[[models]]\nref = "minilm"\n\n'
ADAPT = '[adapt]\ncorpus = "synthetic:n_documents=20,seed=0"\n'
PROBES = {
    "study": "[study]\nzz_probe = 1\n",
    "evaluation": "[evaluation]\nzz_probe = 1\n",
    "bootstrap": "[bootstrap]\nzz_probe = 1\n",
    "embedding": "[embedding]\nzz_probe = 1\n",
    "analysis": "[analysis]\nzz_probe = 1\n",
    "datasets": None,
    "models": None,
    "adapt": ADAPT + "zz_probe = 1\n",
    "adapt.pt": ADAPT + "[adapt.pt]\nzz_probe = 1\n",
    "adapt.ft": ADAPT + "[adapt.ft]\nzz_probe = 1\n",
    "adapt.llm": ADAPT + '[adapt.llm]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\nzz_probe = 1\n',
    "adapt.colbert": ADAPT + "[adapt.colbert]\nzz_probe = 1\n",
    "tune": ADAPT + "[tune]\nzz_probe = 1\n",
}
"""A study file per section with one unknown key in it: the loader's error lists the valid keys."""


def _probe(tmp_path: Path, section: str) -> set[str]:
    """The keys the study loader accepts in ``section``, read from its unknown-key error."""
    body = PROBES[section]
    if body is None:  # an array of tables: the probe key goes into its first entry
        text = MINIMAL.replace(f"[[{section}]]\n", f"[[{section}]]\nzz_probe = 1\n")
    else:
        text = MINIMAL + body
    path = tmp_path / f"probe-{section}.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_study(path)
    message = str(err.value)
    assert "zz_probe" in message, message
    return set(message.split("valid keys: ", 1)[1].split(", "))


def accepted_keys(tmp_path: Path) -> dict[str, set[str]]:
    """``{section: keys}`` as the loader accepts them."""
    return {section: _probe(tmp_path, section) for section in PROBES}


def missing_entries(accepted: dict[str, set[str]], secs: list[study.Section]) -> list[str]:
    """``[section].key`` of every accepted key without a row in the rendered reference (a key
    naming a sub-table, ``[adapt].pt``, is covered by that sub-table's section)."""
    rendered = {}
    for s in secs:
        (node,) = study.render([s], _document())
        table = node.children[-1]
        rows = list(table.findall(lambda n: n.tagname == "row"))
        rendered[s.name] = {r.children[0].astext() for r in rows[1:]}  # the first row is the header
    missing = []
    for section, keys in accepted.items():
        for key in sorted(keys):
            if key not in rendered.get(section, set()) and f"{section}.{key}" not in rendered:
                missing.append(f"[{section}].{key}")
    return missing


def test_every_study_key_has_an_entry_in_the_study_reference(tmp_path):
    accepted = accepted_keys(tmp_path)
    assert sum(len(k) for k in accepted.values()) > 100
    assert missing_entries(accepted, study.sections()) == []


def test_a_key_the_loader_accepts_without_a_reference_entry_fails(tmp_path, monkeypatch):
    """A new key that only the loader knows (here [study].fake_key, added to the loader's section
    class) is reported: the reference is generated from the schema, not from the loader."""

    @dataclasses.dataclass
    class WithFakeKey(StudySection):
        fake_key: int = 0

    monkeypatch.setitem(study_load._SECTIONS, "study", WithFakeKey)
    accepted = accepted_keys(tmp_path)
    assert "fake_key" in accepted["study"]
    assert missing_entries(accepted, study.sections()) == ["[study].fake_key"]


def test_every_study_key_has_a_meaning():
    """Once the schema declares a help text per key (adaptlab.study.keys), a key without one fails
    here as it fails the site build (``adaptlab_study_require_meaning``)."""
    pytest.importorskip("adaptlab.study.keys", reason="the schema does not declare help texts yet")
    assert study.undocumented(study.sections()) == []


def test_study_reference_rows_show_type_and_default():
    secs = {s.name: s for s in study.sections()}
    bootstrap = {k.name: k for k in secs["bootstrap"].keys}
    assert (bootstrap["n_resamples"].type, bootstrap["n_resamples"].default) == ("integer", "1000")
    assert secs["datasets"].array and secs["datasets"].header == "[[datasets]]"
    evaluation = {k.name: k for k in secs["evaluation"].keys}
    assert evaluation["metrics"].type == "list of strings"
    assert study.type_text(int | None) == "integer (optional)"
    assert study.toml_value(("a", True, 0.5)) == '["a", true, 0.5]'


# -- Python API --------------------------------------------------------------------------------


def test_every_public_api_name_is_in_the_api_reference():
    import adaptlab

    lines = "\n".join(api.page_lines(api.public_names()))
    for name in adaptlab.__all__:
        if name == "__version__":
            continue
        module = getattr(adaptlab, name)
        target = module.__name__ if name == "results" else f"adaptlab.{name}"
        assert re.search(rf"^\.\. auto(function|class|module):: {re.escape(target)}$", lines, re.M), name


def test_api_reference_documents_lazy_module_names_and_returned_types():
    lines = "\n".join(api.page_lines(api.public_names()))
    assert ".. autoclass:: adaptlab.results.ResultsStore" in lines  # loaded on first use
    assert ".. autoclass:: adaptlab.study.schema.Study" in lines  # what load_study returns


def test_docstring_references_to_names_that_do_not_exist_stay_broken():
    """The strict build keeps a reference to an adaptlab name that exists as code text and warns
    about one that exists nowhere (a typo, a removed function)."""
    assert refs.exists("adaptlab.study.load.load_study", None, None)
    assert refs.exists("ResultsStore", "adaptlab.analysis.compare", None)  # imported for type checking only
    assert refs.exists("Study", "adaptlab.study.load", None)
    assert not refs.exists("adaptlab.study.load.no_such_function", None, None)
    assert not refs.exists("Sttudy", "adaptlab.study.load", None)
