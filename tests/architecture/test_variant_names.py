"""Variant names are spelled once: in adaptlab.models.variants, imported everywhere else.

Walks every module of the library and fails on a string constant that *is* a variant name
(``"pt-ft"``, ``"colbert-base"``, ...) outside the vocabulary module. Docstrings and longer
messages that mention a name are not constants equal to it, so they pass. ``"model"`` (the plain
study's variant) is left out: the word is a key and a directory name in many other places.

A few constants equal a variant name by coincidence (PyTorch's ``return_tensors="pt"``, the
``[adapt.pt]`` table of a study file); :data:`ALLOWED` names each with its reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

import adaptlab
from adaptlab.models import variants

ROOT = Path(adaptlab.__file__).resolve().parent
VOCABULARY = "models/variants.py"
NAMES = frozenset({*variants.BI_ENCODER_VARIANTS, *variants.COLBERT_VARIANTS, variants.REFERENCE})

ALLOWED: dict[str, dict[str, tuple[int, str]]] = {
    "adapt/train/pt.py": {"pt": (1, "return_tensors='pt' asks the tokenizer for PyTorch tensors")},
    "adapt/train/colbert.py": {"base": (2, "a key of the request handed to the training child process")},
    "study/adapt_config.py": {
        "pt": (6, "the [adapt.pt] table of a study file: its key, its settings"),
        "ft": (8, "the [adapt.ft] table of a study file: its key, its settings"),
    },
    "analysis/plots/ndcg.py": {"base": (2, "the word ending a curve's display label ('minilm base')")},
    "analysis/shift.py": {"base": (1, "the default display label of the reference embeddings")},
}
"""Module (relative to the package) -> literal -> (the most times it may occur there, why those
constants are not variant names). One more occurrence fails the test; an entry whose literal no
longer occurs at all must go."""


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the constant nodes that are docstrings (module, class, function) or attribute
    docstrings (a bare string right after an assignment)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for stmt in body:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                out.add(id(stmt.value))
    return out


def _variant_literals(path: Path) -> list[tuple[int, str]]:
    """(line, literal) of every non-docstring string constant equal to a variant name."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = _docstrings(tree)
    return sorted(
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value in NAMES
        and id(node) not in docs
    )


def _counts(path: Path) -> dict[str, list[int]]:
    """literal -> the lines where it occurs in ``path``."""
    out: dict[str, list[int]] = {}
    for line, value in _variant_literals(path):
        out.setdefault(value, []).append(line)
    return out


def _offenders() -> list[str]:
    """Every spelled variant name outside the vocabulary beyond what :data:`ALLOWED` admits."""
    bad = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel == VOCABULARY:
            continue
        allowed = ALLOWED.get(rel, {})
        for value, lines in _counts(path).items():
            if len(lines) > allowed.get(value, (0, ""))[0]:
                bad.append(f"{rel}: {value!r} at lines {lines} (allowed {allowed.get(value, (0, ''))[0]})")
    return bad


def test_variant_names_are_spelled_only_in_the_vocabulary():
    bad = _offenders()
    assert not bad, (
        "variant names spelled outside adaptlab/models/variants.py (import its constants, "
        "e.g. FT, PT_FT, COLBERT_BASE, or system_name / parse_system_name):\n" + "\n".join(bad)
    )


def test_allow_list_is_still_needed():
    """Every allowed (module, literal) still occurs: the list shrinks when the code does."""
    stale = []
    for rel, literals in ALLOWED.items():
        path = ROOT / rel
        found = _counts(path) if path.exists() else {}
        stale += [f"{rel}: {lit!r}" for lit in literals if not found.get(lit)]
    assert not stale, "allow-list entries no longer needed (remove them):\n" + "\n".join(stale)


def test_the_scan_finds_a_spelled_name(tmp_path):
    """The scan itself: a comparison with a spelled name is found, a docstring and a message
    that mention one are not."""
    module = tmp_path / "m.py"
    module.write_text(
        '"""About pt-ft."""\nX = "pt-ft"\n\n\ndef f(v):\n    """colbert-ft."""\n'
        '    if v == "colbert-base":\n        raise ValueError("not colbert-base")\n'
    )
    assert _variant_literals(module) == [(2, "pt-ft"), (7, "colbert-base")]
