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


def setup(app: Any) -> dict[str, Any]:
    """Register the directives and the reference check (Sphinx imported here only, so the
    enumerations can be imported and tested without it)."""
    from adaptlab_docs.directives import ApiReference, CliReference, StudyReference
    from adaptlab_docs.refs import keep_existing

    app.add_config_value("adaptlab_study_require_meaning", False, "env")
    app.add_directive("adaptlab-study", StudyReference)
    app.add_directive("adaptlab-cli", CliReference)
    app.add_directive("adaptlab-api", ApiReference)
    app.connect("missing-reference", keep_existing)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
