"""Sphinx extension of adaptlab's documentation: the generated reference pages.

- ``adaptlab-study``: the study file, from the schema's dataclasses (:mod:`adaptlab_docs.study`);
- ``adaptlab-cli``: the command line, from the argument parsers (:mod:`adaptlab_docs.cli`);
- ``adaptlab-api``: the Python API, from the docstrings of ``adaptlab.__all__``
  (:mod:`adaptlab_docs.api`);
- docstring references to adaptlab names the site has no page for are kept as code text when the
  name exists, and warned about when it does not (:mod:`adaptlab_docs.refs`).

Each is computed when the site is built, so the reference cannot drift from the code."""

from __future__ import annotations

from typing import Any

from sphinx.application import Sphinx

from adaptlab_docs.api import ApiReference
from adaptlab_docs.cli import CliReference
from adaptlab_docs.refs import keep_existing
from adaptlab_docs.study import StudyReference


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_config_value("adaptlab_study_require_meaning", False, "env")
    app.add_directive("adaptlab-study", StudyReference)
    app.add_directive("adaptlab-cli", CliReference)
    app.add_directive("adaptlab-api", ApiReference)
    app.connect("missing-reference", keep_existing)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
