"""One rule for the names a study gives (study, dataset, model and system names, name prefixes):
they become store keys, job ids and table cells, so they must print as one plain line.

:func:`check_name` is used by the study file (:mod:`adaptlab.study.load`), the command-line
overrides (:meth:`adaptlab.study.schema.Study.with_overrides`) and ``[adapt]``/``[tune]``
(:mod:`adaptlab.study.adapt_config`).
"""

from __future__ import annotations

import unicodedata

from adaptlab.errors import ConfigError

__all__ = ["MAX_NAME_LENGTH", "check_name"]

MAX_NAME_LENGTH = 200
"""Longest study, dataset or model name accepted (names become store keys, job ids, table cells)."""
_UNPRINTABLE = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
"""Unicode categories refused in names: control and format characters (newline, NUL, ESC, bidi
overrides, zero-width), surrogates, private use, unassigned, line and paragraph separators."""


def check_name(value: str, where: str) -> str:
    """``value`` if it is a printable name: not blank, at most :data:`MAX_NAME_LENGTH` characters,
    no control or format character (:data:`_UNPRINTABLE`; the only space allowed is " "), no
    leading or trailing space. Else a ConfigError naming ``where`` (``file: [study].name``)."""
    if not value.strip():
        raise ConfigError(f"{where}: expected a non-blank name, got {value!r}")
    if len(value) > MAX_NAME_LENGTH:
        raise ConfigError(f"{where}: expected a name of at most {MAX_NAME_LENGTH} characters, got {len(value)}")
    bad = next((c for c in value if unicodedata.category(c) in _UNPRINTABLE or (c.isspace() and c != " ")), None)
    if bad is not None:
        raise ConfigError(f"{where}: expected printable characters only, got {value!r} "
                          f"(character U+{ord(bad):04X}, {unicodedata.name(bad, 'a control character')})")
    if value != value.strip():
        raise ConfigError(f"{where}: expected no leading or trailing space, got {value!r}")
    return value
