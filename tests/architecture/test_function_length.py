"""No function in the library is longer than 80 lines (docs/architecture.md, "Code style":
functions short enough to read at once). Counted from the ``def`` line to the last line of the
body, less the docstring: a public function's parameter list and runnable examples (numpy
docstring style) document it and do not make its code longer to read."""

from __future__ import annotations

import ast
from pathlib import Path

import adaptlab

ROOT = Path(adaptlab.__file__).resolve().parent
LIMIT = 80


def _long_functions(root: Path, limit: int) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1 - _docstring_lines(node)
                if length > limit:
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.name} ({length} lines)")
    return found


def _docstring_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines of the function's docstring (0 without one)."""
    first = node.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return first.end_lineno - first.lineno + 1
    return 0


def test_no_function_over_the_limit():
    long = _long_functions(ROOT, LIMIT)
    assert not long, f"functions over {LIMIT} lines:\n" + "\n".join(long)


def test_the_counter_sees_a_long_function(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))
    doc = '    """' + "\n" * LIMIT + '    """'
    (tmp_path / "m.py").write_text(
        f"def long():\n{body}\n\ndef short():\n    return 1\n\ndef documented():\n{doc}\n    return 1\n"
    )
    assert [s.split()[1] for s in _long_functions(tmp_path, LIMIT)] == ["long"]
