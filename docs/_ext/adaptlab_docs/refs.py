"""Cross-references of the docstrings that point outside the generated reference.

Docstrings name internal classes and functions (``:class:`~adaptlab.stats.bootstrap.BootstrapResult```)
that the site does not document page by page. Such a reference is kept as code text when the name
exists in adaptlab (:func:`exists`); a reference to a name that exists nowhere (a typo, a renamed
function) is left to Sphinx, which warns, so the strict build fails on it."""

from __future__ import annotations

import importlib
import re
import sys
from typing import Any

from docutils import nodes

GENERIC_TYPES = frozenset(
    {
        "path",
        "sequence",
        "mapping",
        "iterable",
        "callable",
        "iterator",
        "optional",
        "array-like",
        "a",
        "b",
        "default",
        "str",
        "int",
        "float",
        "bool",
    }
)
"""Lower-case type words of numpy-style parameter lists (``x : path or str``): not references."""


_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def _resolve(dotted: str) -> bool:
    """Whether ``dotted`` (``pkg.module.Class.attr``) names something importable."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        except Exception:  # noqa: BLE001 - a module failing to import is not a reference check
            return False
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return False
        return True
    return False


def exists(target: str, module: str | None, cls: str | None) -> bool:
    """Whether ``target`` as written in ``module`` (inside class ``cls``) names an adaptlab object:
    as an absolute name, relative to the module or class, or as a name of a loaded adaptlab
    module (or one of its lazy ``__all__`` names) (``ResultsStore`` written in a module that imports it for type checking only)."""
    target = target.lstrip("~.")
    if target.startswith("adaptlab") and _resolve(target):
        return True
    prefixes = [p for p in (f"{module}.{cls}" if module and cls else None, module) if p]
    if any(p.startswith("adaptlab") and _resolve(f"{p}.{target}") for p in prefixes):
        return True
    head = target.split(".")[0]
    loaded = [m for name, m in list(sys.modules.items()) if name.startswith("adaptlab") and m is not None]
    return any(
        (head in vars(m) or head in getattr(m, "__all__", ())) and _resolve(f"{m.__name__}.{target}") for m in loaded
    )


def keep_existing(app: Any, env: Any, node: nodes.Element, contnode: nodes.Element) -> nodes.Element | None:
    """``missing-reference`` handler: code text for an adaptlab name that exists, else nothing
    (Sphinx then warns)."""
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "")
    if target in GENERIC_TYPES or not _IDENTIFIER.match(target.lstrip("~.")):
        return contnode  # a type word, or prose napoleon took for a type ("True for the result")
    if exists(target, node.get("py:module"), node.get("py:class")):
        return contnode
    return None
