"""``python -m adaptlab``: the command-line interface."""

from adaptlab.cli import entry

entry()
