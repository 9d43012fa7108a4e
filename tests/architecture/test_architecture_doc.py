"""docs/architecture.md's module table matches the library: every module under
platform/adaptlab is named in the row of its package, and every module a row names exists."""

from __future__ import annotations

import re
from pathlib import Path

import adaptlab

ROOT = Path(adaptlab.__file__).resolve().parent
DOC = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"
TOP = "adaptlab/"  # the first cell of the top-level row


def _rows(text: str) -> dict[str, str]:
    """``{package folder ("" for the top level, "adapt/prep/"): the rest of its table row}``."""
    rows = {}
    for line in text.splitlines():
        m = re.match(r"\|\s*`([^`]+)`[^|]*\|(.*)\|\s*$", line)
        if m and m.group(1).endswith("/"):
            rows["" if m.group(1) == TOP else m.group(1)] = m.group(2)
    return rows


def _row_for(rel: str, rows: dict[str, str]) -> str | None:
    """The row of the deepest package folder that holds ``rel`` (a path under adaptlab/)."""
    folders = [f for f in rows if rel.startswith(f)]
    return max(folders, key=len) if folders else None


def _modules() -> list[str]:
    """Every module under adaptlab/ (a package's ``__init__.py`` is its row, not a module)."""
    return sorted(p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*.py") if p.name != "__init__.py")


def _missing(text: str) -> list[str]:
    rows = _rows(text)
    out = []
    for rel in _modules():
        folder = _row_for(rel, rows)
        if folder is None:
            out.append(f"{rel}: no row for its package")
            continue
        names = re.findall(r"`([^`]+)`", rows[folder])
        inner = rel[len(folder) :]  # "build.py", or "report/build.py" inside the analysis row
        parts = inner.split("/")
        if parts[-1] not in names or any(f"{p}/" not in names for p in parts[:-1]):
            out.append(f"{rel}: not named in the row of `{folder or TOP}`")
    return out


def _stale(text: str) -> list[str]:
    out = []
    for folder, row in _rows(text).items():
        for name in re.findall(r"`([A-Za-z_]\w*\.py)`", row):
            if not any(ROOT.joinpath(folder).rglob(name)):
                out.append(f"`{name}` in the row of `{folder or TOP}`: no such module")
    return out


def test_every_module_is_in_the_table():
    missing = _missing(DOC.read_text(encoding="utf-8"))
    assert not missing, "docs/architecture.md's module table lacks:\n" + "\n".join(missing)


def test_every_module_the_table_names_exists():
    stale = _stale(DOC.read_text(encoding="utf-8"))
    assert not stale, "docs/architecture.md names modules that are gone:\n" + "\n".join(stale)


def test_the_check_finds_a_missing_module_and_a_stale_name():
    """Guards the guard: a table without one real module, and with one invented, fails both ways."""
    text = DOC.read_text(encoding="utf-8").replace("`frames.py`", "`frames_gone.py`")
    assert any(m.startswith("results/frames.py:") for m in _missing(text))
    assert any("frames_gone.py" in s for s in _stale(text))
    nested = DOC.read_text(encoding="utf-8").replace("`build.py`", "`built`")
    assert any(m.startswith("analysis/report/build.py:") for m in _missing(nested))
