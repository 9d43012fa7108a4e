"""The user docs (docs/*.md, docs/tutorials/*.md, docs/how-to/*.md) are plain CommonMark a strict
site build accepts: every relative link points at a file that exists, and an ``#anchor`` at a
heading of that page (GitHub's slug rule, which MyST's heading anchors follow); one H1 per page;
no raw HTML; no commit hashes, issue numbers or in-house paper numbers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
OWN = [
    "user-guide",
    "metrics",
    "adaptation",
    "datasets",
    "encoders-and-ray",
    "gpu",
    "performance",
    "results-store",
    "architecture",
]
PAGES = sorted(
    [DOCS / f"{n}.md" for n in OWN] + list((DOCS / "tutorials").glob("*.md")) + list((DOCS / "how-to").glob("*.md"))
)
FENCE = re.compile(r"^[ \t]*```.*?^[ \t]*```[ \t]*$", re.S | re.M)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def prose(text: str) -> str:
    """The page without its fenced blocks and inline code spans."""
    return re.sub(r"`[^`\n]*`", "", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`", "", heading.strip().lower())
    return re.sub(r"\s", "-", re.sub(r"[^\w\- ]", "", text))


def anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.+?)\s*$", text, re.M)}


def broken_links(page: Path) -> list[str]:
    out = []
    for target in LINK.findall(prose(page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        if not dest.is_file():
            out.append(f"{target}: no such file")
        elif anchor and anchor not in anchors(dest):
            out.append(f"{target}: no heading with that anchor in {dest.name}")
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(DOCS).as_posix())
def test_links_resolve(page: Path):
    assert not broken_links(page)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(DOCS).as_posix())
def test_one_h1_and_no_raw_html(page: Path):
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    assert len(re.findall(r"^# ", text, re.M)) == 1
    assert not re.search(r"</?[a-zA-Z][\w-]*(\s[^>]*)?>", prose(text)), "raw HTML"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(DOCS).as_posix())
def test_no_commit_hashes_issue_numbers_or_in_house_paper_ids(page: Path):
    text = page.read_text(encoding="utf-8")
    assert not re.findall(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b", text)
    assert not re.findall(r"\b[Ii]ssue [0-9]", text)
    assert not re.findall(r"\b00[0-9]_[0-9a-f]{16}\b|\*\*00[0-9]\*\*|\b00[0-4] (?:§|Sec)", text)


def test_the_link_check_finds_a_broken_link_and_anchor(tmp_path):
    (tmp_path / "a.md").write_text("# A\n\n## Some `code` heading\n\n[x](b.md) [y](#some-code-heading) [z](#nope)\n")
    assert broken_links(tmp_path / "a.md") == ["b.md: no such file", "#nope: no heading with that anchor in a.md"]
