"""The Python API reference, generated from the docstrings of ``adaptlab.__all__``.

:func:`public_names` reads the package's ``__all__``; the ``adaptlab-api`` directive
(:mod:`adaptlab_docs.directives`) writes one autodoc entry per name (a function, a class with its
public members, or a module with its ``__all__``), so a name added to ``__all__`` appears without
editing the page.
The numpy-style sections (Parameters, Returns, Examples) are read by napoleon; the ``>>>``
examples show as they are written (the test suite runs them: tests/docs/test_api_examples.py)."""

from __future__ import annotations

import inspect


def public_names() -> list[str]:
    """``adaptlab.__all__`` without ``__version__`` (shown in the page's text), in order."""
    import adaptlab

    return [n for n in adaptlab.__all__ if n != "__version__"]


def autodoc_lines(name: str) -> list[str]:
    """The autodoc directive documenting ``adaptlab.<name>`` (reStructuredText, as the
    docstrings are written)."""
    import adaptlab

    obj = getattr(adaptlab, name)
    if inspect.ismodule(obj):
        return [f".. automodule:: {obj.__name__}", "   :members:", ""]
    if inspect.isclass(obj):
        return [f".. autoclass:: adaptlab.{name}", "   :members:", ""]
    return [f".. autofunction:: adaptlab.{name}", ""]


def page_lines(names: list[str]) -> list[str]:
    """The autodoc entries of ``names`` in one MyST ``eval-rst`` block (autodoc writes reST)."""
    return ["````{eval-rst}", *(line for name in names for line in autodoc_lines(name)), "````"]
