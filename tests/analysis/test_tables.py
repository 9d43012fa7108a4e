"""Paper tables (adaptlab.analysis.tables): cells, bold best with ties, LaTeX escaping, the
significance mark, digits, and the wide CSV columns."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import subprocess

import pytest

from adaptlab.analysis.tables import (
    DAGGER,
    LATEX_DAGGER,
    Cell,
    format_cell,
    format_number,
    format_wide,
    latex_escape,
    to_csv,
    to_latex,
    to_text,
    wide_table,
)
from adaptlab.errors import ConfigError


def score(system, measure="ndcg@10", value=0.5, dataset="toy", lo=None, hi=None, **kw):
    """One score row as the store returns it (only the columns the tables read)."""
    ci = {"ci_low": value - 0.05, "ci_high": value + 0.05} if lo is None else {"ci_low": lo, "ci_high": hi}
    return {
        "system": system,
        "dataset": dataset,
        "measure": measure,
        "value": value,
        **ci,
        "compared_to": None,
        "confidence": 0.95,
        "interval_method": "percentile",
        "n_queries": 300,
        "n_resamples": 1000,
        "sample_size": 300,
        **kw,
    }


def comparison(system, against, measure="ndcg@10", dataset="toy", p_value=0.01, p_adjusted=0.02, **kw):
    """One paired comparison row (value = system - against)."""
    return {
        "system": system,
        "dataset": dataset,
        "measure": measure,
        "value": 0.1,
        "ci_low": 0.05,
        "ci_high": 0.15,
        "compared_to": against,
        "p_value": p_value,
        "p_adjusted": p_adjusted,
        "adjustment": "holm",
        "family_size": 2,
        **kw,
    }


@pytest.fixture
def study_rows():
    """base, ft and pt on two datasets with two measures; ft and pt compared with base."""
    rows = []
    for ds, shift in (("scifact", 0.0), ("nfcorpus", -0.3)):
        for system, v in (("base", 0.6), ("ft", 0.727), ("pt", 0.65)):
            rows += [
                score(system, "ndcg@10", v + shift, ds, v + shift - 0.053, v + shift + 0.053),
                score(system, "mrr", v + shift + 0.01, ds),
            ]
        rows += [comparison("ft", "base", m, ds, p_adjusted=0.003) for m in ("ndcg@10", "mrr")]
        rows += [comparison("pt", "base", m, ds, p_value=0.04, p_adjusted=0.08) for m in ("ndcg@10", "mrr")]
    return rows


# -- cells ------------------------------------------------------------------------------------------
def test_cell_text_value_ci_and_missing_parts():
    assert format_cell(Cell(0.7271, 0.674, 0.7804)) == "0.727 [0.674, 0.780]"
    assert format_cell(Cell(0.7271, 0.674, 0.7804), 2) == "0.73 [0.67, 0.78]"
    assert format_cell(Cell(0.7271)) == "0.727"  # no CI stored
    assert format_cell(Cell(0.7271, float("nan"), 0.78)) == "0.727"
    assert format_cell(Cell(float("nan"))) == "n/a"
    assert format_cell(None) == "-"
    assert format_number(-0.0001) == "0.000" and format_number(-0.02, 2) == "-0.02"
    assert format_cell(Cell(0.5, 0.4, 0.6, p=0.01)) == "0.500 [0.400, 0.600]" + DAGGER


def test_wide_rows_one_per_dataset_and_system_one_column_per_measure(study_rows):
    table = wide_table(study_rows)
    assert table.measures == ("ndcg@10", "mrr")
    assert [(r.dataset, r.system) for r in table.rows] == [
        (ds, s) for ds in ("scifact", "nfcorpus") for s in ("base", "ft", "pt")
    ]
    text = to_text(table)
    header, rule, first = text.splitlines()[:3]
    assert header.split() == ["dataset", "system", "ndcg@10", "mrr"] and set(rule) <= {"-", " "}
    assert first.split()[:2] == ["scifact", "base"] and "0.600 [0.547, 0.653]" in first
    assert "compared_to" not in text and "0.100" not in text  # comparison rows are no cells
    assert wide_table(study_rows, measures=["mrr", "nope"]).measures == ("mrr", "ndcg@10")


def test_rows_are_grouped_by_dataset_in_first_appearance_order():
    rows = [score("a", dataset="d1"), score("a", dataset="d2"), score("b", dataset="d1")]
    assert [(r.dataset, r.system) for r in wide_table(rows).rows] == [("d1", "a"), ("d1", "b"), ("d2", "a")]


def test_a_system_without_a_measure_gets_an_empty_cell():
    rows = [score("a", "ndcg@10"), score("a", "mrr"), score("b", "ndcg@10")]
    table = wide_table(rows)
    assert "mrr" not in table.rows[1].cells
    assert to_text(table).splitlines()[3].split()[-1] == "-"
    assert to_latex(table).count(" & --") == 1


# -- bold best ----------------------------------------------------------------------------------
def _bold_systems(latex: str, column: int) -> list[str]:
    body = [ln for ln in latex.splitlines() if ln.endswith(r"\\") and not ln.startswith("Dataset")]
    return [ln.split(" & ")[1] for ln in body if ln.split(" & ")[column].startswith(r"\textbf{")]


def test_bold_marks_the_highest_point_estimate_per_column_and_dataset(study_rows):
    latex = to_latex(wide_table(study_rows))
    assert _bold_systems(latex, 2) == ["ft", "ft"]  # ndcg@10 on scifact and on nfcorpus
    assert r"\textbf{0.727} [0.674, 0.780]" in latex
    assert "not a claim of significance" in latex


def test_ties_at_the_shown_precision_are_all_bold():
    rows = [score("a", value=0.7271), score("b", value=0.7274), score("c", value=0.70), score("d", value=float("nan"))]
    assert _bold_systems(to_latex(wide_table(rows)), 2) == ["a", "b"]
    assert _bold_systems(to_latex(wide_table(rows), digits=4), 2) == ["b"]
    assert _bold_systems(to_latex(wide_table([score("a"), score("b")])), 2) == ["a", "b"]


# -- significance mark ------------------------------------------------------------------------------
def test_dagger_uses_the_adjusted_p_value_and_the_footnote_names_adjustment_and_family(study_rows):
    table = wide_table(study_rows)
    marks = {(r.dataset, r.system): {m: c.marked() for m, c in r.cells.items()} for r in table.rows}
    assert marks[("scifact", "ft")] == {"ndcg@10": True, "mrr": True}
    assert marks[("scifact", "pt")] == {"ndcg@10": False, "mrr": False}  # p 0.04 but adjusted 0.08
    assert not any(marks[("scifact", "base")].values())
    text = to_text(table)
    assert text.count(DAGGER) == 4 + 1  # four cells and the footnote
    note = text.splitlines()[-1]
    assert note.startswith(DAGGER + " p < 0.05") and "against its baseline (ft, pt against base)" in note
    assert "Holm" in note and "one dataset and one measure" in note and "2 tests per family" in note
    latex = to_latex(table)
    assert latex.count(LATEX_DAGGER) == 4 + 1 and r"{\footnotesize \textsuperscript{\dag}" in latex
    single = [{**r, "family_size": 1} if "family_size" in r else r for r in study_rows]
    assert "(1 test per family)" in to_text(wide_table(single)).splitlines()[-1]


def test_raw_p_value_when_no_adjusted_one_and_strict_threshold():
    rows = [
        score("base"),
        score("a"),
        score("b"),
        score("c"),
        comparison("a", "base", p_value=0.01, p_adjusted=None, adjustment=None, family_size=None),
        comparison("b", "base", p_value=0.01, p_adjusted=0.05),
        comparison("c", "base", p_value=None, p_adjusted=None),
    ]
    table = wide_table(rows)
    assert [r.cells["ndcg@10"].marked() for r in table.rows] == [False, True, False, False]
    assert "not adjusted" in to_text(table) or "unadjusted" in to_text(table)


def test_explicit_baseline_finds_a_comparison_stored_from_either_side():
    rows = [
        score("base"),
        score("a"),
        score("b"),
        comparison("base", "a", p_adjusted=0.001),
        comparison("b", "a", p_adjusted=0.001),
    ]
    table = wide_table(rows, baseline="base")
    assert {r.system: r.cells["ndcg@10"].marked() for r in table.rows} == {"base": False, "a": True, "b": False}
    assert "a against base" in to_text(table)


def test_all_pairs_comparisons_mark_nothing_without_a_baseline():
    rows = [score("a"), score("b"), score("c"), comparison("a", "b"), comparison("a", "c"), comparison("b", "c")]
    table = wide_table(rows)
    assert not any(c.marked() for r in table.rows for c in r.cells.values())
    assert DAGGER not in to_text(table) and "no single baseline" in to_text(table)
    assert wide_table(rows, baseline="c").rows[0].cells["ndcg@10"].marked()


def test_no_comparisons_no_mark_and_no_footnote():
    text = to_text(wide_table([score("a"), score("b")]))
    assert DAGGER not in text and LATEX_DAGGER not in to_latex(wide_table([score("a")]))


# -- digits, caption, csv -----------------------------------------------------------------------------
def test_digits(study_rows):
    table = wide_table(study_rows)
    assert "0.7 [0.7, 0.8]" in to_text(table, 1) and "1 [1, 1]" in to_text(table, 0)
    assert r"\textbf{0.72700} [0.67400, 0.78000]" in format_wide(study_rows, "latex", digits=5)
    for bad in (-1, 13, 2.5, True):
        with pytest.raises(ConfigError, match="digits"):
            to_text(table, bad)


def test_caption_states_level_method_resamples_and_queries():
    rows = [
        score("a", "ndcg@10", confidence=0.9, interval_method="bca", n_queries=120, sample_size=100),
        score("a", "acc@1", confidence=0.9, interval_method="wilson", n_queries=120),
        score("a", "ndcg@10", dataset="other", confidence=0.9, interval_method="bca", n_queries=50, sample_size=50),
    ]
    latex = to_latex(wide_table(rows))
    cap = re.search(r"\\caption\{(.*)\}", latex).group(1)
    assert r"90\% confidence intervals" in cap
    assert "BCa bootstrap for ndcg@10; Wilson score interval for acc@1" in cap
    assert "1000 bootstrap resamples of 100 queries each" in cap and "Queries: toy 120; other 50." in cap
    bare = [{"system": "a", "dataset": "d", "measure": "coe", "value": 0.3}]
    assert "no confidence intervals stored" in to_text(wide_table(bare))
    old = [dict(score("a"), confidence=None, interval_method=None)]
    assert "confidence intervals (level not stored)" in to_text(wide_table(old))


def test_csv_has_value_and_ci_columns_per_measure(study_rows):
    text = to_csv(
        wide_table(
            study_rows + [score("new", "ndcg@10", 0.4, "scifact", None, None) | {"ci_low": None, "ci_high": None}]
        )
    )
    rows = list(csv.DictReader(io.StringIO(text)))
    assert list(rows[0]) == [
        "dataset",
        "system",
        "ndcg@10",
        "ndcg@10_ci_low",
        "ndcg@10_ci_high",
        "mrr",
        "mrr_ci_low",
        "mrr_ci_high",
    ]
    assert len(rows) == 7 and float(rows[1]["ndcg@10"]) == 0.727
    assert float(rows[1]["ndcg@10_ci_low"]) == pytest.approx(0.674, abs=1e-12)  # full precision, not rounded
    new = [r for r in rows if r["system"] == "new"][0]
    assert new["ndcg@10"] == "0.4" and new["ndcg@10_ci_low"] == "" and new["mrr"] == ""
    assert DAGGER not in text
    records = json.loads(format_wide(study_rows, "json"))
    assert records[1]["system"] == "ft" and records[1]["mrr_ci_high"] == pytest.approx(0.787)


def test_several_rows_for_one_cell_leave_the_measure_out_with_a_note():
    rows = [score("a"), score("a", value=0.9), score("a", "mrr")]
    table = wide_table(rows)
    assert table.measures == ("mrr",) and "left out ndcg@10: several rows for a on toy" in to_text(table)
    assert "% note: left out ndcg@10" in to_latex(table)
    with pytest.raises(ConfigError, match="no score rows"):
        wide_table(rows[:2])
    with pytest.raises(ConfigError, match="no score rows"):
        wide_table([comparison("a", "b")])
    with pytest.raises(ConfigError, match="table format"):
        format_wide(rows, "xml")


# -- LaTeX: escaping and structure ----------------------------------------------------------------------
HOSTILE = r"a_b&c%d$e#f{g}h~i^j\k"


def test_latex_escape_every_special_character():
    assert latex_escape(HOSTILE) == (
        r"a\_b\&c\%d\$e\#f\{g\}h\textasciitilde{}i\textasciicircum{}j"
        r"\textbackslash{}k"
    )
    assert latex_escape("x<y>z|w\nv") == r"x\textless{}y\textgreater{}z\textbar{}w v"
    assert latex_escape("plain name-1.2") == "plain name-1.2"


def _unescaped(text: str, ch: str) -> int:
    """Occurrences of ``ch`` not written as ``\\ch``."""
    return len(re.findall(r"(?<!\\)" + re.escape(ch), text.replace(r"\\", "")))


def _balanced(text: str) -> bool:
    depth = 0
    for ch in re.sub(r"\\[{}]", "", text.replace(r"\textbackslash{}", "")):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if depth < 0:
            return False
    return depth == 0


@pytest.fixture
def hostile_latex():
    rows = [
        score("base" + HOSTILE, "nd%cg@10_" + HOSTILE, 0.6, "data&set_" + HOSTILE),
        score("ft" + HOSTILE, "nd%cg@10_" + HOSTILE, 0.7, "data&set_" + HOSTILE),
        score("ft" + HOSTILE, "mrr", -0.2, "second$" + HOSTILE),
        comparison("ft" + HOSTILE, "base" + HOSTILE, "nd%cg@10_" + HOSTILE, "data&set_" + HOSTILE),
    ]
    return to_latex(wide_table(rows))


def test_hostile_names_are_escaped_everywhere(hostile_latex):
    esc = latex_escape(HOSTILE)
    assert hostile_latex.count(esc) >= 7  # header, 2 datasets, 3 system cells, caption, footnote
    for line in hostile_latex.splitlines():
        if line.startswith("%"):
            continue
        for ch in "%$#_^~":
            assert _unescaped(line.replace("$-$", ""), ch) == 0, (ch, line)
    assert r"$-$0.200" in hostile_latex  # a minus sign, not a hyphen


def test_latex_structure_balanced_braces_and_equal_columns(hostile_latex):
    body = hostile_latex.split(r"\toprule")[1].split(r"\bottomrule")[0]
    rows = [ln for ln in body.splitlines() if ln.endswith(r"\\")]
    assert len(rows) == 1 + 3
    assert {_unescaped(r, "&") for r in rows} == {3}  # dataset, system, two measures
    assert _balanced(hostile_latex)
    assert re.search(r"\\begin\{tabular\}\{llcc\}", hostile_latex)
    lines = hostile_latex.splitlines()
    assert lines[1] == r"\begin{table}[t]" and lines[-1] == r"\end{table}"
    for rule in (r"\toprule", r"\midrule", r"\bottomrule"):
        assert rule in lines
    assert lines.count(r"\midrule") == 2  # under the header and between the two datasets


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex is not installed")
def test_latex_compiles(hostile_latex, study_rows, tmp_path):
    for i, latex in enumerate((hostile_latex, format_wide(study_rows, "latex"))):
        doc = tmp_path / f"t{i}.tex"
        doc.write_text(
            "\\documentclass{article}\n\\usepackage[T1]{fontenc}\n\\usepackage{booktabs}\n"
            f"\\begin{{document}}\n{latex}\n\\end{{document}}\n",
            encoding="utf-8",
        )
        res = subprocess.run(
            ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", doc.name],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert res.returncode == 0, res.stdout[-3000:]


def test_several_named_baselines_mark_each_family_against_its_own_base():
    """A scale study with ColBERT stores colbert-ft against colbert-base and against the bi-encoder
    FT, and colbert-base against minilm-base: no single baseline per system, so name them."""
    rows = [score(s, value=v) for s, v in (("m-base", 0.72), ("m-ft", 0.79), ("c-base", 0.62), ("c-ft", 0.73))]
    rows += [
        comparison("m-ft", "m-base", p_adjusted=0.01),
        comparison("c-base", "m-base", p_adjusted=0.01),
        comparison("c-ft", "c-base", p_adjusted=0.01),
        comparison("c-ft", "m-ft", p_adjusted=0.3),
    ]
    auto = wide_table(rows)
    assert all(r.baseline is None for r in auto.rows) and any("name one" in n for n in auto.notes)
    table = wide_table(rows, baseline=["c-base", "m-base"])
    bases = {r.system: r.baseline for r in table.rows}
    assert bases == {"m-base": None, "m-ft": "m-base", "c-base": "m-base", "c-ft": "c-base"}
    assert all(c.p == 0.01 for r in table.rows if r.baseline for c in r.cells.values())
    # the other order: m-base is marked against c-base (the comparison is stored from c-base's side)
    reverse = {r.system: r.baseline for r in wide_table(rows, baseline=["m-base", "c-base"]).rows}
    assert reverse == {"m-base": "c-base", "m-ft": "m-base", "c-base": None, "c-ft": "c-base"}
    assert DAGGER in to_text(table, 3)


def test_text_table_escapes_control_characters_in_names_caption_and_notes():
    """A name stored with an ANSI escape or a newline prints as its escape, on one line."""
    evil = "ft\x1b[31m\nred"
    rows = [
        score("base", dataset="d\x1b]0;title\x07"),
        score(evil, dataset="d\x1b]0;title\x07"),
        comparison(evil, "base", dataset="d\x1b]0;title\x07"),
    ]
    text = to_text(wide_table(rows))
    assert "\x1b" not in text and "\x07" not in text
    assert r"ft\x1b[31m\nred" in text and r"d\x1b]0;title\x07" in text
    assert len(text.splitlines()) == 2 + 2 + 2  # header, rule, two rows, caption, mark note
    assert "\x1b" not in to_latex(wide_table(rows)) and r"ft\textbackslash{}x1b[31m red" in to_latex(wide_table(rows))
