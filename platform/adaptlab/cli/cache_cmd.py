"""``adaptlab cache``: show or clear the shared embedding cache (:mod:`adaptlab.embedding.cache`).

``adaptlab cache`` prints the cache's root, its entries (cached arrays: dense vectors and ColBERT
token vectors), their size and the size bound. ``adaptlab cache clear --yes`` deletes them all,
``--older-than 7d`` only those not used for seven days (units ``d``, ``h``, ``m``; a bare number is
days). ``--root`` picks another cache (a folder or a URI) than the default one: ``$ADAPTLAB_
EMBEDDING_CACHE``, else ``$ADAPTLAB_CACHE``, else ``$XDG_CACHE_HOME/adaptlab``, else
``~/.cache/adaptlab`` (a study's ``[embedding].cache`` overrides them for that study only).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from adaptlab.cli._common import add_common, print_json
from adaptlab.errors import ConfigError

_UNITS = {"d": 86400.0, "h": 3600.0, "m": 60.0}


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``adaptlab cache``."""
    p = sub.add_parser(
        "cache",
        help="show or clear the shared embedding cache",
        description="Show the shared embedding cache (root, entries, size, bound), or clear it. Embeddings are "
        "cached by model revision, options, texts and adaptlab version, outside any results store; "
        "the least recently used entries are evicted beyond the bound.",
    )
    p.add_argument("action", nargs="?", choices=("show", "clear"), default="show", help="what to do")
    p.add_argument("--root", default="", help="the cache (folder or URI); default: the environment's or the user's")
    p.add_argument("--yes", action="store_true", help="clear without asking")
    p.add_argument(
        "--older-than",
        type=_age,
        default=None,
        metavar="AGE",
        help="clear only entries not used for AGE (e.g. 7d, 12h, 30m; a bare number is days)",
    )
    p.add_argument("--format", choices=("table", "json"), default="table", help="output format")
    add_common(p)
    p.set_defaults(handler=run)


def _age(text: str) -> float:
    """``7d``/``12h``/``30m``/``7`` (days) as seconds; anything else is a usage error."""
    value, unit = (text[:-1], text[-1].lower()) if text[-1:].lower() in _UNITS else (text, "d")
    try:
        seconds = float(value) * _UNITS[unit]
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:
        raise argparse.ArgumentTypeError(f"expected an age such as 7d, 12h or 30m, got {text!r}")
    return seconds


def run(args: argparse.Namespace) -> int:
    """Show or clear the cache; returns the exit status."""
    from adaptlab.embedding.cache import EmbeddingCache

    cache = EmbeddingCache.resolve(args.root, where="--root")
    if cache is None:
        print("the embedding cache is off (ADAPTLAB_EMBEDDING_CACHE=off)")
        return 0
    if args.action == "clear":
        return _clear(cache, args)
    if args.yes or args.older_than is not None:
        raise ConfigError("--yes and --older-than go with 'adaptlab cache clear'")
    info = cache.summary()
    if args.format == "json":
        print_json(info)
    else:
        print(_show(info))
    return 0


def _show(info: dict[str, Any]) -> str:
    folders = ", ".join(f"{name} {n}" for name, n in info["folders"].items())
    lines = [
        f"root     {info['root']}",
        f"entries  {info['entries']} ({folders})",
        f"size     {_size(info['bytes'])} of {_size(info['max_bytes'])} "
        "(least recently used entries are evicted beyond it)",
    ]
    if info["oldest"] is not None:
        lines.append(f"used     {_when(info['oldest'])} .. {_when(info['newest'])}")
    return "\n".join(lines)


def _clear(cache: Any, args: argparse.Namespace) -> int:
    cutoff = time.time() - args.older_than if args.older_than is not None else None
    doomed = [f for f in cache.files() if cutoff is None or f.mtime < cutoff]
    what = f"{len(doomed)} files ({_size(sum(f.size for f in doomed))}) under {cache.where}"
    if not doomed:
        print(f"nothing to clear under {cache.where}")
        return 0
    if not args.yes and not _confirm(f"delete {what}? [y/N] "):
        print(f"adaptlab cache: not cleared: {what}; add --yes to delete without asking", file=sys.stderr)
        return 1
    n, size = cache.clear(args.older_than)
    if args.format == "json":
        print_json({"root": cache.where, "deleted_files": n, "deleted_bytes": size})
    else:
        print(f"deleted {n} files ({_size(size)}) under {cache.where}")
    return 0


def _confirm(question: str) -> bool:
    """Ask on a terminal; without one (a script, a pipe) the answer is no."""
    if not sys.stdin.isatty():
        return False
    print(question, end="", file=sys.stderr, flush=True)
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))
