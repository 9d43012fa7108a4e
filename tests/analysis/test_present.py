"""The one presentation layer: one number formatter and one table renderer, so the terminal,
the report (Markdown, HTML) and LaTeX print the same digits, each escaping what it prints."""

from __future__ import annotations

import math

import numpy as np
import pytest

from adaptlab.analysis.present import (
    DAGGER,
    RULE,
    STYLES,
    Estimate,
    format_estimate,
    format_interval,
    format_number,
    format_p,
    format_percent,
    format_scientific,
    format_setting,
    latex_escape,
    render_cell,
    render_table,
    significance_mark,
    terminal_escape,
    terminal_escape_lines,
)
from adaptlab.errors import ConfigError

HOSTILE = "evil\x1b[31mred\nline\x00\ttab\u202e"


def test_numbers_three_decimals_integers_as_they_are_and_missing_as_na():
    assert format_number(0.64508) == "0.645" and format_number(0.64508, 4) == "0.6451"
    assert format_number(-0.0004) == "0.000" and format_number(-0.02, 2) == "-0.02"
    assert format_number(338) == "338" and format_number(np.int64(7)) == "7"
    assert format_number(np.float64(0.5)) == "0.500"
    assert format_number(None) == format_number(math.nan) == "n/a"
    assert format_number("abc") == "abc" and format_number(True) == "True"
    assert format_interval(0.6012, 0.6879) == "[0.601, 0.688]" and format_interval(None, 0.5) == "n/a"
    assert format_estimate(0.64508, 0.6012, 0.6879) == "0.645 [0.601, 0.688]"
    assert format_estimate(0.64508, math.nan, 0.6879) == "0.645"
    assert format_percent(0.04) == "4.0%" and format_scientific(0.0015) == "1.50e-03"
    assert format_setting(2e-5) == "2e-05" and format_setting(None) == "n/a"


def test_p_values_keep_their_floor_and_the_mark_its_threshold():
    assert format_p(2 / 1001, 1000) == "<= 0.002" and format_p(0.5, 1000) == "0.5"
    assert format_p(0.0123456) == "0.01235" and format_p(None) == "n/a"
    assert significance_mark(0.049) == DAGGER and significance_mark(0.05) == ""
    assert significance_mark(None) == "" and significance_mark(math.nan) == ""


def test_one_value_prints_the_same_digits_in_every_style():
    cell = Estimate(0.64508, 0.60119, 0.68791, marked=True)
    for style in STYLES:
        out = render_table(["system", "ndcg@10"], [["minilm", cell], ["other", 0.5]], style)
        assert "0.645" in out and "[0.601, 0.688]" in out and "0.500" in out, (style, out)
        assert "0.6451" not in out and "0.64508" not in out
    assert render_cell(cell, "latex") == r"0.645 [0.601, 0.688]\textsuperscript{\dag}"
    assert render_cell(Estimate(-0.25, bold=True), "latex") == r"\textbf{$-$0.250}"
    assert render_cell(cell, "text", digits=2) == "0.65 [0.60, 0.69]" + DAGGER


def test_text_table_aligns_and_escapes_control_characters():
    out = render_table(["system", "value"], [[HOSTILE, 0.5], ["b", None]])
    assert "\x1b" not in out and "\x00" not in out and "\t" not in out and "\u202e" not in out
    assert r"evil\x1b[31mred\nline\x00\ttab\u202e" in out
    lines = out.splitlines()
    assert len(lines) == 4 and set(lines[1]) <= {"-", " "}
    assert lines[2].index("0.500") == lines[0].index("value")  # aligned under its header
    assert lines[3].rstrip() == "b"  # None: an empty cell


def test_terminal_escape_keeps_printable_text():
    assert terminal_escape("naïve 名前 a-b_c †") == "naïve 名前 a-b_c †"
    assert terminal_escape("\x9b2J") == r"\x9b2J"  # a C1 control sequence introducer
    assert terminal_escape_lines("a\x1b\nb") == "a\\x1b\nb"


def test_markdown_html_and_latex_escape_their_own_characters():
    md = render_table(["a|b"], [["x|y"]], "markdown")
    assert md.splitlines() == [r"| a\|b |", "|---|", r"| x\|y |"]
    html = render_table(["n"], [["<b>&"], [HOSTILE]], "html")
    assert "<td>&lt;b&gt;&amp;</td>" in html and "\x1b" not in html
    tex = render_table(["name", "v"], [["a_b&c", 1.0], RULE, [HOSTILE, -0.5]], "latex", align="lc")
    assert r"a\_b\&c & 1.000 \\" in tex and r"$-$0.500" in tex and "\x1b" not in tex
    assert tex.splitlines()[0] == r"\begin{tabular}{lc}" and tex.count(r"\midrule") == 2
    assert latex_escape("x\ny") == "x y"


def test_bad_style_and_digits_are_one_line_errors():
    with pytest.raises(ConfigError, match="table style 'rst': expected one of text, markdown, html, latex"):
        render_table(["a"], [["b"]], "rst")
    with pytest.raises(ConfigError, match="digits must be an integer between 0 and 12"):
        render_table(["a"], [[0.5]], digits=13)
