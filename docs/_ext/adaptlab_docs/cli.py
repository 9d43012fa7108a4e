"""The command-line reference, generated from the ``adaptlab`` argument parsers.

:func:`commands` walks :func:`adaptlab.cli.build_parser` (the parser ``adaptlab`` itself runs):
every command and sub-command with its description, usage line and options, each option with the
help text ``--help`` prints (defaults included). The ``adaptlab-cli`` directive
(:mod:`adaptlab_docs.directives`) renders them with :func:`render`, so the page changes whenever a
parser does."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from docutils import nodes

from adaptlab_docs.nodes_util import paragraph, section, table


@dataclass(frozen=True)
class Option:
    """One argument of a command: how it is written (``-m MODEL, --model MODEL``), its option
    strings (empty for a positional argument) and its help text."""

    invocation: str
    strings: tuple[str, ...]
    help: str


@dataclass
class Command:
    """A command (``("adaptlab", "run")``) with its one-line summary, description, usage and
    arguments, positional ones first."""

    path: tuple[str, ...]
    summary: str
    description: str
    usage: str
    arguments: list[Option] = field(default_factory=list)
    options: list[Option] = field(default_factory=list)

    @property
    def name(self) -> str:
        return " ".join(self.path)


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    formatter = parser._get_formatter()
    text = formatter._expand_help(action) if action.help else ""
    return " ".join(text.split())


def _option(parser: argparse.ArgumentParser, action: argparse.Action) -> Option:
    formatter = parser._get_formatter()
    invocation = formatter._format_action_invocation(action)
    return Option(invocation, tuple(action.option_strings), _help(parser, action))


USAGE_WIDTH = 88
"""Columns of the usage lines (argparse would take the terminal's width, which a build has not)."""


def _usage(parser: argparse.ArgumentParser) -> str:
    """The usage line as ``--help`` prints it, wrapped at :data:`USAGE_WIDTH` columns."""
    formatter = parser.formatter_class(prog=parser.prog, width=USAGE_WIDTH)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return formatter.format_help().strip()


def _subparsers(parser: argparse.ArgumentParser) -> list[argparse._SubParsersAction]:
    return [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]


def commands(parser: argparse.ArgumentParser | None = None) -> list[Command]:
    """Every command of ``parser`` (default: adaptlab's), depth first, the top level first."""
    if parser is None:
        from adaptlab.cli import build_parser

        parser = build_parser()
    out: list[Command] = []
    _walk(parser, (parser.prog,), "", out)
    return out


def _walk(parser: argparse.ArgumentParser, path: tuple[str, ...], summary: str, out: list[Command]) -> None:
    usage = _usage(parser)
    command = Command(path, summary, (parser.description or "").strip(), usage)
    for action in parser._actions:
        if action.help == argparse.SUPPRESS or isinstance(action, argparse._SubParsersAction):
            continue
        (command.options if action.option_strings else command.arguments).append(_option(parser, action))
    out.append(command)
    for sub in _subparsers(parser):
        summaries = {a.dest: a.help or "" for a in sub._choices_actions}
        for name, child in sub.choices.items():
            if child is not parser:
                _walk(child, (*path, name), summaries.get(name, ""), out)


def _paragraphs(text: str) -> list[nodes.paragraph]:
    return [paragraph(" ".join(block.split())) for block in text.split("\n\n") if block.strip()]


def render(cmds: list[Command], document: nodes.document) -> list[nodes.Node]:
    """One section per command: summary, description, usage, arguments and options tables."""
    out: list[nodes.Node] = []
    for cmd in cmds:
        sec = section(cmd.name, "cli-" + "-".join(cmd.path), document)
        if cmd.summary:
            sec += paragraph(cmd.summary[0].upper() + cmd.summary[1:] + ("" if cmd.summary.endswith(".") else "."))
        sec.extend(_paragraphs(cmd.description))
        sec += nodes.literal_block(cmd.usage, cmd.usage, language="text")
        for title, options in (("Arguments", cmd.arguments), ("Options", cmd.options)):
            if options:
                sec += nodes.rubric(title, title)
                sec += table(
                    ["Argument" if title == "Arguments" else "Option", "Meaning"],
                    [[o.invocation, o.help] for o in options],
                    [30, 70],
                )
        out.append(sec)
    return out
