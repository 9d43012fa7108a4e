"""Rule-based sentence splitting and whitespace normalisation."""

from __future__ import annotations

import pytest

from adaptlab.data.text import normalise_whitespace, sentence_texts, split_sentences


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("One. Two! Three?", ["One.", "Two!", "Three?"]),
        ("See Fig. 2 for details. It works.", ["See Fig. 2 for details.", "It works."]),
        ("Use e.g. water or i.e. brine here. Done.", ["Use e.g. water or i.e. brine here.", "Done."]),
        ("Smith et al. reported it. We agree.", ["Smith et al. reported it.", "We agree."]),
        ("The gap is 3.5 mm wide. Next.", ["The gap is 3.5 mm wide.", "Next."]),
        ("J. K. Rowling wrote it. Then he left.", ["J. K. Rowling wrote it.", "Then he left."]),
        ("Designed by William P. Bell. The end.", ["Designed by William P. Bell.", "The end."]),
        ("Take vitamin D. The dose is low.", ["Take vitamin D.", "The dose is low."]),
        ("See No. 5 and pp. 12 now. Yes.", ["See No. 5 and pp. 12 now.", "Yes."]),
        ("Apples, pears, etc. The end.", ["Apples, pears, etc.", "The end."]),
        ("Made by Acme Inc. in Ohio.", ["Made by Acme Inc. in Ohio."]),
        ("In the U.S. The rest differs.", ["In the U.S.", "The rest differs."]),
        ('He said "Stop." Then he left.', ['He said "Stop."', "Then he left."]),
        ('"Why?" he asked.', ['"Why?" he asked.']),
        ("It read 1... 2... 3... Then silence.", ["It read 1... 2... 3...", "Then silence."]),
        ("In U.S. v. Smith the court ruled.", ["In U.S. v. Smith the court ruled."]),
        ("First paragraph\n\nSecond paragraph", ["First paragraph", "Second paragraph"]),
        ("Visit www.example.org today. Ok.", ["Visit www.example.org today.", "Ok."]),
        ("   ", []),
        ("", []),
    ],
)
def test_split_sentences_cases(text, expected):
    assert sentence_texts(text) == expected


def test_spans_are_stripped_ordered_and_cover_every_character():
    text = "  Alpha beta.  Gamma (see Fig. 3) delta!\n\nEpsilon?  "
    spans = split_sentences(text)
    assert spans == [(2, 13), (15, 40), (42, 50)]
    covered = {i for s, e in spans for i in range(s, e)}
    assert all(text[i].isspace() for i in range(len(text)) if i not in covered)
    assert all(text[s] != " " and text[e - 1] != " " for s, e in spans)


def test_split_is_deterministic_and_rejects_non_text():
    text = "A b. C d. E f."
    assert split_sentences(text) == split_sentences(text) == [(0, 4), (5, 9), (10, 14)]
    with pytest.raises(TypeError):
        split_sentences(None)  # type: ignore[arg-type]


def test_normalise_whitespace():
    assert normalise_whitespace("  a\tb\n\n c\u00a0d  ") == "a b c d"
    assert normalise_whitespace("") == ""
