"""Rule-based sentence splitting and whitespace normalisation (no model, no downloaded data).

:func:`split_sentences` returns character spans ``(start, end)`` (``end`` exclusive) so a
caller can map an answer offset to the sentence holding it. The rules, in order, for a
candidate boundary -- a run of ``.``, ``!``, ``?`` or ``…``, optional closing quotes or
brackets, then whitespace:

1. A blank line (a newline, optional spaces, a newline) always ends a sentence.
2. No boundary when the next word starts with a lowercase letter (``e.g. the``, ``approx. five``,
   ``"Why?" he asked``) or is punctuation only (``He said. . . nothing``).
3. Punctuation standing alone (``. . .``, ``Law. ... But``) does not end a sentence; an
   ellipsis (``...``, ``…``) ends one only before a capitalised word (``1... 2... 3...`` does
   not split); ``!`` and ``?`` end the sentence otherwise.
4. A single ``.`` after a known abbreviation does not end it: titles and reference words
   (``Dr.``, ``Fig.``, ``Eq.``, ``et al.``, ``e.g.``, ``i.e.``, ``cf.``, ``vs.``, ``approx.``, ...);
   ``No.``, ``pp.``, ``Vol.``, month names and the like only when a digit follows
   (``No. 5``, ``Jan. 3``).
5. After an ambiguous abbreviation -- ``etc.``, ``Inc.``, ``Ltd.``, a dotted acronym
   (``U.S.``, ``a.m.``) or a single capital letter (an initial, ``J. K. Rowling``) -- the
   sentence ends only when the next word is a common sentence opener (``The``, ``This``,
   ``However``, ...): ``vitamin D. The dose`` splits, ``William P. Bell`` does not. A single
   capital letter is always read this way, before the abbreviation lists (``P.`` is an
   initial, ``p. 12`` a page).
6. Anything else (``in 1990. The``) ends the sentence. Decimals (``3.5``) and periods
   inside tokens (``www.x.org``) are never candidates since no whitespace follows them.

The spans are stripped of surrounding whitespace, ordered, disjoint, and every
non-whitespace character of the text lies in exactly one of them. The rules are the
usual Punkt-style heuristics written out by hand (Kiss & Strunk 2006 learn them from data).
"""

from __future__ import annotations

import re

__all__ = ["normalise_whitespace", "sentence_texts", "split_sentences"]

_CANDIDATE = re.compile(r"([.!?\u2026]+)([\"'\u201d\u2019\u00bb)\]]*)(\s+)")
_PARAGRAPH = re.compile(r"\n[ \t\r\f\v]*\n")
_LEADING_PUNCT = "\"'([{\u201c\u2018\u00ab"

# "." after these never ends a sentence (compared lowercased, without the final period)
_ABBREV_ALWAYS = frozenset(
    """
    mr mrs ms dr prof sr jr st mt rev hon gen col lt sgt capt cmdr adm gov sen rep
    fig figs eq eqs ref refs sec secs ch chap tab e.g i.e cf vs viz al approx ca
    incl esp resp dept univ assoc est max min avg c v
    """.split()
)
# ... only when a digit follows ("No. 5", "pp. 12", "Jan. 3")
_ABBREV_BEFORE_NUMBER = frozenset(
    """
    no nos p pp vol vols art arts para nr op jan feb mar apr jun jul aug sep sept oct nov dec
    """.split()
)
# ... ends a sentence only when a common sentence opener follows
_ABBREV_AMBIGUOUS = frozenset("etc inc ltd co corp bros llc plc".split())
_DOTTED_ACRONYM = re.compile(r"^(?:[A-Za-z]\.)+[A-Za-z]$")
_INITIAL = re.compile(r"[A-Z]\.\s")
_OPENERS = frozenset(
    """
    the a an this that these those it its in on at for from by with to as of if when while
    after before during since although though however but and or so yet thus therefore
    hence moreover furthermore also then there here he she they we i you his her their our
    my some many most all each every no not one two three such both other another what
    which who whose where why how is are was were be being been has have had do does did
    can could may might must should would will shall finally first second third next
    later today because unlike despite according until once only even still
    """.split()
)


def normalise_whitespace(text: str) -> str:
    """Collapse every run of (Unicode) whitespace into one space and strip both ends."""
    return " ".join(text.split())


def _previous_token(text: str, end: int) -> str:
    """The whitespace-delimited token ending at ``end``, without leading quotes/brackets."""
    start = end
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    return text[start:end].lstrip(_LEADING_PUNCT)


def _next_word(text: str, start: int) -> str:
    """The word starting at ``start`` with leading quotes/brackets and trailing punctuation cut."""
    end = start
    n = len(text)
    while end < n and not text[end].isspace():
        end += 1
    return text[start:end].lstrip(_LEADING_PUNCT).rstrip(".,;:!?\"')]}\u201d\u2019")


def _is_boundary(text: str, m: re.Match[str]) -> bool:
    punct = m.group(1)
    nxt = m.end()
    following = text[nxt]
    word = _next_word(text, nxt)
    first = word[:1]
    if first.islower() or not word:
        return False  # "e.g. the", or punctuation follows: "said. . . nothing"
    token = _previous_token(text, m.start(1))
    if not token:
        return False  # punctuation standing alone: ". . ." or "Law. ... But"
    if punct != "." and set(punct) <= {".", "\u2026"}:
        return first.isupper()  # an ellipsis: "1... 2... 3..." stays one sentence
    if punct != ".":
        return True  # ! ? and mixes such as ?!
    low = token.lower()
    opener = word.lower() in _OPENERS
    if len(token) == 1 and token.isupper():
        # an initial unless a sentence plainly starts next ("J. A. Hobson": A. is one too)
        return opener and not _INITIAL.match(text, nxt)
    if low in _ABBREV_ALWAYS:
        return False
    if low in _ABBREV_BEFORE_NUMBER:
        return not (first.isdigit() or following.isdigit())
    if low in _ABBREV_AMBIGUOUS or _DOTTED_ACRONYM.match(token):
        return opener
    return True


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Character spans ``(start, end)`` of the sentences of ``text`` (rules in the module doc).

    >>> t = "Fig. 2 shows e.g. a 3.5 mm gap. Smith et al. agree. Why? J. K. Rowling knows."
    >>> [t[s:e] for s, e in split_sentences(t)]
    ['Fig. 2 shows e.g. a 3.5 mm gap.', 'Smith et al. agree.', 'Why?', 'J. K. Rowling knows.']
    """
    if not isinstance(text, str):
        raise TypeError(f"split_sentences expects a str, got {type(text).__name__}")
    cuts: list[int] = [0]
    for m in _CANDIDATE.finditer(text):
        if m.end() < len(text) and _is_boundary(text, m):
            cuts.append(m.start(3))
    cuts.extend(m.start() + 1 for m in _PARAGRAPH.finditer(text))
    cuts.append(len(text))
    cuts = sorted(set(cuts))
    spans: list[tuple[int, int]] = []
    for a, b in zip(cuts[:-1], cuts[1:]):
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if a < b:
            spans.append((a, b))
    return spans


def sentence_texts(text: str) -> list[str]:
    """The sentences of ``text`` as strings (``text[s:e]`` for each span)."""
    return [text[s:e] for s, e in split_sentences(text)]
