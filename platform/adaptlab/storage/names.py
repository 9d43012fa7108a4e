"""One rule for every name a user gives (study, dataset, model and system names, run names from
file names, ``--dataset`` values, document ids from corpus file names): names become store keys,
job ids and table cells, so they must print as one plain line and compare as they read.

:func:`check_name` refuses control and format characters (ESC, newline, NUL, the bidi
overrides U+202A..U+202E and U+2066..U+2069, zero-width characters), blank names and outer
spaces, and returns the name in Unicode normalisation form NFC (Unicode Standard Annex #15,
section 1.2), so ``"h\\u00e9"`` typed precomposed and ``"he\\u0301"`` from a macOS file name are
one name. :func:`check_names` does the same for a group and refuses two names that are equal
once normalised. Used by the study file, the command-line overrides, ``[adapt]``/``[tune]``,
``adaptlab evaluate`` (``--run`` names, ``--dataset``, ``--baseline``), the store commit of an
evaluation and the corpus reader.

:func:`lookalike_names` finds system names that look the same but are different strings (Latin
``i`` against Cyrillic ``і`` or full-width ``ｉ``): each name's skeleton is its NFKC
normalisation (Unicode Standard Annex #15), case-folded, with the common Cyrillic and Greek
confusables of Unicode Technical Standard #39 mapped to their Latin look-alikes;
:func:`warn_lookalike_names` warns (:class:`LookalikeNamesWarning`) when two names share one
(``adaptlab evaluate``, ``run`` and ``compare`` warn before comparing systems).
"""

from __future__ import annotations

import unicodedata
import warnings
from collections.abc import Iterable

from adaptlab.errors import ConfigError

__all__ = [
    "MAX_NAME_LENGTH",
    "LookalikeNamesWarning",
    "check_name",
    "check_names",
    "lookalike_names",
    "warn_lookalike_names",
]

MAX_NAME_LENGTH = 200
"""Longest study, dataset or model name accepted (names become store keys, job ids, table cells)."""
_UNPRINTABLE = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
"""Unicode categories refused in names: control and format characters (newline, NUL, ESC, bidi
overrides, zero-width), surrogates, private use, unassigned, line and paragraph separators."""


def check_name(value: str, where: str, *, max_length: int = MAX_NAME_LENGTH) -> str:
    """``value`` in NFC if it is a printable name: a string, not blank, at most ``max_length``
    characters, no control or format character (:data:`_UNPRINTABLE`; the only space allowed
    is " "), no leading or trailing space. Else a ConfigError naming ``where`` (``file:
    [study].name``, ``--dataset``) and the value as an escaped literal."""
    if not isinstance(value, str):
        raise ConfigError(f"{where}: expected a name (a string), got {type(value).__name__}")
    if not value.strip():
        raise ConfigError(f"{where}: expected a non-blank name, got {value!r}")
    if len(value) > max_length:
        raise ConfigError(f"{where}: expected a name of at most {max_length} characters, got {len(value)}")
    bad = next((c for c in value if unicodedata.category(c) in _UNPRINTABLE or (c.isspace() and c != " ")), None)
    if bad is not None:
        raise ConfigError(
            f"{where}: expected printable characters only, got {value!r} "
            f"(character U+{ord(bad):04X}, {unicodedata.name(bad, 'a control character')})"
        )
    if value != value.strip():
        raise ConfigError(f"{where}: expected no leading or trailing space, got {value!r}")
    return unicodedata.normalize("NFC", value)


def check_names(values: Iterable[str], where: str, *, max_length: int = MAX_NAME_LENGTH) -> list[str]:
    """Each of ``values`` through :func:`check_name`, in order; a ConfigError naming ``where``
    when two are equal once normalised (``'h\\u00e9'`` and ``'he\\u0301'``) or equal outright."""
    seen: dict[str, str] = {}
    out = []
    for value in values:
        name = check_name(value, where, max_length=max_length)
        if name in seen:
            same = "" if seen[name] == value else " once normalised (Unicode NFC)"
            raise ConfigError(
                f"{where}: two names are equal{same}: {seen[name]!r} and {value!r}; give each a distinct name"
            )
        seen[name] = value
        out.append(name)
    return out


# Cyrillic and Greek letters that render like Latin ones (a subset of UTS #39 confusables.txt)
_CONFUSABLES = str.maketrans(
    {
        "а": "a",
        "в": "b",
        "е": "e",
        "ё": "e",
        "к": "k",
        "м": "m",
        "н": "h",
        "о": "o",
        "р": "p",
        "с": "c",
        "т": "t",
        "у": "y",
        "х": "x",
        "ѕ": "s",
        "і": "i",
        "ї": "i",
        "ј": "j",
        "ԁ": "d",
        "ӏ": "l",
        "ԛ": "q",
        "ԝ": "w",
        "һ": "h",
        "ɡ": "g",
        "α": "a",
        "β": "b",
        "ε": "e",
        "η": "n",
        "ι": "i",
        "κ": "k",
        "ν": "v",
        "ο": "o",
        "ρ": "p",
        "τ": "t",
        "υ": "u",
        "χ": "x",
        "ϲ": "c",
        "ϳ": "j",
        "ı": "i",
        "ℓ": "l",
    }
)


class LookalikeNamesWarning(UserWarning):
    """Two compared system names look alike but are different strings."""


def _skeleton(name: str) -> str:
    return unicodedata.normalize("NFKC", name).casefold().translate(_CONFUSABLES)


def lookalike_names(names: Iterable[str]) -> list[tuple[str, str]]:
    """Pairs of distinct names with the same skeleton (module doc), in order of appearance.

    >>> lookalike_names(["minilm", "m\\u0456nilm", "\\uff4dinilm", "bm25"])
    [('minilm', 'mіnilm'), ('minilm', 'ｍinilm')]
    """
    seen: dict[str, str] = {}
    out = []
    for n in dict.fromkeys(str(x) for x in names):
        key = _skeleton(n)
        if key in seen:
            out.append((seen[key], n))
        else:
            seen[key] = n
    return out


def warn_lookalike_names(names: Iterable[str]) -> None:
    """One :class:`LookalikeNamesWarning` naming every look-alike pair among ``names`` (with the
    code points that differ), or nothing."""
    found = lookalike_names(names)
    if not found:
        return
    shown = "; ".join(f"{a!r} and {b!r} ({_codes(a, b)})" for a, b in found[:5])
    warnings.warn(
        f"system names that look alike but differ: {shown}; check that you compare the systems you mean",
        LookalikeNamesWarning,
        stacklevel=3,
    )


def _codes(a: str, b: str) -> str:
    diff = [f"U+{ord(x):04X} vs U+{ord(y):04X}" for x, y in zip(a, b) if x != y]
    return ", ".join(diff[:3]) if diff else f"{len(a)} vs {len(b)} characters"
