"""``python -m adaptlab``: the command-line interface."""

from adaptlab.cli import main

raise SystemExit(main())
