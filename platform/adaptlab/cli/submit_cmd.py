"""``adaptlab submit``: send a study to a Ray cluster as a job."""

from __future__ import annotations

import argparse
from pathlib import Path

from adaptlab.cli._common import add_common
from adaptlab.errors import ConfigError, mask_url
from adaptlab.study import ALLOW_CREDENTIAL_FLAG, describe_code, source_info, submit_study, upload_plan


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``adaptlab submit``."""
    p = sub.add_parser(
        "submit",
        help="submit a study to a Ray cluster (Jobs API)",
        description="Submit STUDY.toml as a Ray job running this working copy's code "
        "(uploaded: platform/adaptlab, jobs/, pyproject.toml, the README, the study and "
        "its declared inputs; never dotfiles, credentials (by name or by content; a symlink "
        "is judged by its target), virtualenvs, caches or "
        "results; --dry-run lists them). The submission id "
        "comes from the study's content and store, so submitting it again attaches to "
        "the same job; after a FAILED or STOPPED job it starts a new attempt. The token "
        "comes from RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token.",
    )
    p.add_argument("study", type=Path)
    p.add_argument("--address", help="Ray dashboard address, e.g. http://127.0.0.1:8265 (required unless --dry-run)")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="list every file that would be uploaded, with sizes and the total, and exit; sends nothing",
    )
    p.add_argument(
        "--store",
        help="results store: s3://BUCKET/PREFIX (gs://, az://) for any cluster; a local path "
        "(relative to this directory) only for a head on this machine; "
        "file:///ABS/PATH for a file system mounted on every node (default: the study's)",
    )
    p.add_argument(
        ALLOW_CREDENTIAL_FLAG,
        dest="allow_credentials",
        action="append",
        default=[],
        metavar="PATH",
        help="upload this file (its path in the upload, as --dry-run lists it) although its content "
        "looks like a credential (a private key, cloud keys, tokens); repeat for more files",
    )
    p.add_argument("--wait", action="store_true", help="follow the logs and exit with the job's status")
    p.add_argument("--timeout", type=_seconds, default=None, help="stop following after this many seconds")
    add_common(p)
    p.set_defaults(handler=run)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text}")
    return value


def dry_run(args: argparse.Namespace) -> int:
    """``--dry-run``: the upload's files, sizes, total and what is left out; nothing is sent."""
    _study, plan = upload_plan(args.study, allow_credentials=args.allow_credentials)
    for line in plan.listing():
        print(line)
    print(f"code: {describe_code(source_info(plan.root, plan))}")
    return 0


def run(args: argparse.Namespace) -> int:
    """Run the sub-command; returns the exit status."""
    if args.dry_run:
        return dry_run(args)
    if not args.address:
        raise ConfigError(
            "--address: required (the Ray dashboard, e.g. http://127.0.0.1:8265); or --dry-run to list the upload"
        )
    res = submit_study(
        args.study,
        args.address,
        store=args.store,
        wait=args.wait,
        timeout_s=args.timeout,
        allow_credentials=args.allow_credentials,
    )
    if res.resubmitted:
        verb = "attached to existing"
    elif res.previous_status is not None:
        verb = f"previous attempt {res.previous_status}; submitted attempt {res.attempt} as"
    else:
        verb = "submitted"
    print(f"\n{verb} job {res.submission_id}: {res.status}")
    print(f"code: {describe_code(res.code)}")
    store = mask_url(res.store)
    print(f"store: {store} (adaptlab results --store {store} --latest)")
    if args.wait:
        return 0 if res.status == "SUCCEEDED" else 1
    return 0
