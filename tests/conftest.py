"""Root conftest: its folder (tests/) goes on sys.path, so test folders can share plain helper
modules such as tests/tiny_models.py; and the in-process ``cli`` fixture the CLI tests share."""

import subprocess

import pytest


@pytest.fixture
def cli(capsys):
    """Run ``adaptlab ARGS`` in this process; returns a CompletedProcess (status, stdout, stderr)."""
    from adaptlab.cli import main

    def run(*args: str) -> subprocess.CompletedProcess:
        try:
            code = main(list(args))
        except SystemExit as e:
            code = e.code
        out = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out.out, out.err)

    return run
