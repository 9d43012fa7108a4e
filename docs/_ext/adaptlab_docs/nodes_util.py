"""Small builders of docutils nodes shared by the generated reference pages.

Text from the code (help strings, defaults) goes into the page as plain text nodes, never through
a markup parser, so a ``*`` or a backquote in a help string cannot break the page."""

from __future__ import annotations

import re
from collections.abc import Sequence

from docutils import nodes


def cell(content: str | nodes.Node, literal: bool = False) -> nodes.entry:
    """One table cell holding ``content`` as plain text (or as inline code with ``literal``)."""
    entry = nodes.entry()
    if isinstance(content, nodes.Node):
        entry += content
    elif content:
        para = nodes.paragraph()
        para += nodes.literal(content, content) if literal else nodes.Text(content)
        entry += para
    return entry


def table(
    header: Sequence[str],
    rows: Sequence[Sequence[str | nodes.Node]],
    widths: Sequence[int],
    literal_columns: Sequence[int] = (0,),
) -> nodes.table:
    """A table with ``header`` and ``rows``; the columns in ``literal_columns`` show inline code."""
    tbl = nodes.table()
    group = nodes.tgroup(cols=len(header))
    tbl += group
    for width in widths:
        group += nodes.colspec(colwidth=width)
    head = nodes.thead()
    group += head
    row = nodes.row()
    for name in header:
        row += cell(name)
    head += row
    body = nodes.tbody()
    group += body
    for values in rows:
        row = nodes.row()
        for i, value in enumerate(values):
            row += cell(value, literal=i in literal_columns)
        body += row
    return tbl


def section(title: str, anchor: str, document: nodes.document) -> nodes.section:
    """A section titled ``title`` whose id is ``anchor`` (made unique in ``document``)."""
    node = nodes.section()
    node["ids"].append(nodes.make_id(anchor))
    node["names"].append(nodes.fully_normalize_name(title))
    node += nodes.title(title, title)
    document.note_implicit_target(node, node)
    return node


def paragraph(text: str) -> nodes.paragraph:
    """A paragraph of plain text."""
    return nodes.paragraph(text, text)


_INLINE = re.compile(r"``(?P<code>.+?)``|:[a-z:]+:`(?P<role>[^`]+)`")


def inline_paragraph(text: str) -> nodes.paragraph:
    """A paragraph of docstring text with its inline code (````x````) and roles
    (``:class:`~a.b.C```) shown as code, the rest as plain text."""
    para = nodes.paragraph()
    pos = 0
    for m in _INLINE.finditer(text):
        para += nodes.Text(text[pos : m.start()])
        code = m.group("code")
        if code is None:
            target = m.group("role").split("<")[-1].rstrip(">").strip()
            code = target.lstrip("~").rsplit(".", 1)[-1] if target.startswith("~") else target
        para += nodes.literal(code, code)
        pos = m.end()
    para += nodes.Text(text[pos:])
    return para
