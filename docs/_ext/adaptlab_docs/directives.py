"""The Sphinx directives of the generated reference pages (``adaptlab-study``, ``adaptlab-cli``,
``adaptlab-api``). The enumerations and renderers they call need only docutils, so the tests can
run them without Sphinx (tests/docs/test_docs_site.py)."""

from __future__ import annotations

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

from adaptlab_docs import api, cli, study

logger = logging.getLogger(__name__)


class StudyReference(SphinxDirective):
    """``adaptlab-study``: the study-file reference (no arguments). With the configuration value
    ``adaptlab_study_require_meaning`` true, a key without a help text is a build warning."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        self.env.note_dependency(study.__file__)
        secs = study.sections()
        missing = study.undocumented(secs)
        if missing:
            message = f"{len(missing)} study-file keys have no description in the code: {', '.join(missing)}"
            if self.config.adaptlab_study_require_meaning:
                logger.warning(message, location=self.get_location())
            else:
                logger.info(message)
        return study.render(secs, self.state.document)


class CliReference(SphinxDirective):
    """``adaptlab-cli``: the whole command-line reference (no arguments)."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        self.env.note_dependency(cli.__file__)
        return cli.render(cli.commands(), self.state.document)


class ApiReference(SphinxDirective):
    """``adaptlab-api``: every public name of adaptlab, documented from its docstring."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        self.env.note_dependency(api.__file__)
        container = nodes.section()
        container.document = self.state.document
        lines = api.page_lines(api.public_names())
        self.state.nested_parse(StringList(lines, source="adaptlab.__all__"), self.content_offset, container)
        return container.children
