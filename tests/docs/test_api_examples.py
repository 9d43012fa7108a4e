"""The docstring examples run, so they cannot drift from the code (the suite's equivalent of
``pytest --doctest-modules`` on the library).

Every public entry point of ``adaptlab.__all__`` documents its parameters in a ``Parameters``
section and shows a runnable ``Examples`` section (numpy docstring style); every ``>>>`` example
anywhere in platform/adaptlab runs, in a fresh folder (examples that write a study file or a
store write them there)."""

from __future__ import annotations

import doctest
import importlib
import inspect
import sys
from pathlib import Path
from typing import Any

import pytest

import adaptlab

ROOT = Path(adaptlab.__file__).resolve().parent
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
SKIP: dict[str, str] = {}
"""Doctests that are not meant to run, by name, with the reason."""


def entry_points() -> dict[str, Any]:
    """``{public name: the object whose docstring documents it}`` (``results``: ``results.open``)."""
    out = {}
    for name in adaptlab.__all__:
        if name == "__version__":
            continue
        obj = getattr(adaptlab, name)
        out[name] = obj.open if inspect.ismodule(obj) else obj
    return out


def _module_of(obj: Any) -> Any:
    return sys.modules[obj.__module__]


def _entry_tests() -> dict[str, doctest.DocTest]:
    finder = doctest.DocTestFinder(recurse=False)
    tests = {}
    for obj in entry_points().values():
        for t in finder.find(
            obj, f"{obj.__module__}.{obj.__qualname__}", module=_module_of(obj), globs=vars(_module_of(obj))
        ):
            tests[t.name] = t
    return tests


def _module_tests() -> dict[str, doctest.DocTest]:
    """Every module whose source holds a ``>>>`` example, imported and searched whole."""
    finder = doctest.DocTestFinder()
    tests = {}
    for path in sorted(ROOT.rglob("*.py")):
        if ">>> " not in path.read_text(encoding="utf-8"):
            continue
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        module = importlib.import_module(name)
        for t in finder.find(module, name):
            if t.examples:
                tests[t.name] = t
    return tests


ALL_TESTS = {**_module_tests(), **_entry_tests()}


@pytest.mark.parametrize("name", sorted(entry_points()))
def test_every_entry_point_has_parameters_and_an_example(name):
    obj = entry_points()[name]
    doc = inspect.getdoc(obj) or ""
    assert "Parameters\n----------" in doc, f"adaptlab.{name}: no Parameters section"
    assert "Examples\n--------" in doc, f"adaptlab.{name}: no Examples section"
    found = [t for t in ALL_TESTS.values() if t.name == f"{obj.__module__}.{obj.__qualname__}"]
    assert found and found[0].examples, f"adaptlab.{name}: no >>> example"


@pytest.mark.parametrize("name", sorted(ALL_TESTS))
def test_example_runs(name, tmp_path, monkeypatch):
    if name in SKIP:
        pytest.skip(SKIP[name])
    monkeypatch.chdir(tmp_path)
    test = ALL_TESTS[name]
    test.globs = dict(test.globs)  # each run on a copy: examples do not see each other's names
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    report: list[str] = []
    runner.run(test, out=report.append)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, "".join(report)


def test_a_wrong_example_fails(tmp_path):
    """Guards the guard: an example whose output differs is a failure."""
    parser = doctest.DocTestParser()
    test = parser.get_doctest(">>> 1 + 1\n3\n", {}, "wrong", str(tmp_path / "x.py"), 0)
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    runner.run(test, out=lambda _: None)
    assert runner.summarize(verbose=False).failed == 1
