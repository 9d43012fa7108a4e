"""The Python API reference, generated from the docstrings of ``adaptlab.__all__``.

:func:`public_names` reads the package's ``__all__``; the ``adaptlab-api`` directive
(:mod:`adaptlab_docs.directives`) writes one autodoc entry per name (a function, a class with its
public members, or a module with its ``__all__``), so a name added to ``__all__`` appears without
editing the page.
The numpy-style sections (Parameters, Returns, Examples) are read by napoleon; the ``>>>``
examples show as they are written (the test suite runs them: tests/docs/test_api_examples.py)."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Iterator
from typing import Any


def public_names() -> list[str]:
    """``adaptlab.__all__`` without ``__version__`` (shown in the page's text), in order."""
    import adaptlab

    return [n for n in adaptlab.__all__ if n != "__version__"]


def autodoc_lines(name: str) -> list[str]:
    """The autodoc directive documenting ``adaptlab.<name>`` (reStructuredText, as the
    docstrings are written)."""
    import adaptlab

    obj = getattr(adaptlab, name)
    if not inspect.ismodule(obj):
        return _entry(f"adaptlab.{name}", obj)
    lines = [f".. automodule:: {obj.__name__}", ""]
    for member in getattr(obj, "__all__", ()):  # one by one: lazily loaded names too
        lines += _entry(f"{obj.__name__}.{member}", getattr(obj, member))
    return lines


def _entry(path: str, obj: Any) -> list[str]:
    """autoclass (with its public members) or autofunction of ``obj`` under ``path``; nothing for
    a constant."""
    if inspect.isclass(obj):
        return [f".. autoclass:: {path}", "   :members:", ""]
    if callable(obj):
        return [f".. autofunction:: {path}", ""]
    return []


def _adaptlab_classes(tp: Any) -> Iterator[type]:
    """adaptlab classes named by a type hint (``StudyOutcome``, ``list[PairedDifference]``)."""
    if inspect.isclass(tp) and tp.__module__.startswith("adaptlab"):
        yield tp
    for arg in typing.get_args(tp):
        yield from _adaptlab_classes(arg)


def returned_types(names: list[str]) -> list[type]:
    """adaptlab classes the public functions return, not public names themselves, in order."""
    import adaptlab

    public = {id(getattr(adaptlab, n)) for n in names}
    found: dict[str, type] = {}
    for name in names:
        obj = getattr(adaptlab, name)
        if not inspect.isfunction(obj):
            continue
        try:
            hint = typing.get_type_hints(obj).get("return")
        except Exception:  # noqa: BLE001 - a hint that does not resolve documents nothing
            continue
        for cls in _adaptlab_classes(hint):
            if id(cls) not in public:
                found.setdefault(f"{cls.__module__}.{cls.__qualname__}", cls)
    return list(found.values())


def page_lines(names: list[str]) -> list[str]:
    """The autodoc entries of ``names`` in one MyST ``eval-rst`` block (autodoc writes reST)."""
    lines = [line for name in names for line in autodoc_lines(name)]
    types_ = returned_types(names)
    if types_:
        lines += ["Types the API returns", "---------------------", ""]
        lines += [line for cls in types_ for line in _entry(f"{cls.__module__}.{cls.__qualname__}", cls)]
    return ["````{eval-rst}", *lines, "````"]
