"""The CLI calls only the public API: every name it imports from the library is exported.

Walks every import in ``platform/adaptlab/cli/*.py`` (module level and inside functions, like
test_layers.py). A name imported from ``adaptlab.X`` or from a module below it
(``adaptlab.X.y.z``) must be listed in the ``__all__`` of ``adaptlab.X``, the package that owns
it (for a top-level module such as ``adaptlab.errors``, its own ``__all__``), and be the same
object there. The CLI's own helpers (``adaptlab.cli._common``) are exempt.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import adaptlab

ROOT = Path(adaptlab.__file__).resolve().parent
CLI = ROOT / "cli"


def _absolute(node: ast.ImportFrom, package: str) -> str:
    """The absolute module of a ``from ... import`` inside ``package`` (relative levels resolved)."""
    if not node.level:
        return node.module or ""
    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
    return ".".join(parts + ([node.module] if node.module else []))


def cli_imports(path: Path, package: str = "adaptlab.cli") -> list[tuple[int, str, str | None]]:
    """(line, module, name) for every library import in one CLI file; name None for ``import m``."""
    out: list[tuple[int, str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, None) for a in node.names if a.name.split(".")[0] == "adaptlab"]
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(node, package)
            if module.split(".")[0] == "adaptlab":
                out += [(node.lineno, module, a.name) for a in node.names]
    return out


def owner(module: str) -> str:
    """The package whose ``__all__`` must export names from ``module``: ``adaptlab.X``."""
    return ".".join(module.split(".")[:2])


def problem(module: str, name: str | None) -> str | None:
    """Why importing ``name`` from ``module`` bypasses the public API, or None if it does not."""
    if module == "adaptlab.cli" or module.startswith("adaptlab.cli."):
        return None
    if name is None:  # `import adaptlab.x.y` makes every name of y reachable
        return None if module.count(".") <= 1 else f"imports the module {module} (import names from {owner(module)})"
    package = importlib.import_module(owner(module))
    exported = getattr(package, "__all__", None)
    if exported is None:
        return f"{owner(module)} has no __all__"
    if name not in exported:
        return f"{name} is not in {owner(module)}.__all__"
    source = importlib.import_module(module)
    if module != owner(module) and getattr(source, name) is not getattr(package, name):
        return f"{owner(module)}.{name} is not the object {module}.{name}"
    return None


def test_the_cli_imports_only_exported_names():
    bad = []
    for path in sorted(CLI.glob("*.py")):
        for line, module, name in cli_imports(path):
            why = problem(module, name)
            if why:
                bad.append(f"cli/{path.name}:{line} from {module} import {name}: {why}")
    assert not bad, "the CLI imports names no package exports:\n" + "\n".join(bad)


def test_the_walker_sees_every_kind_of_import(tmp_path):
    """Guards the guard: imports in function bodies, relative imports and plain imports are found."""
    src = tmp_path / "m.py"
    src.write_text(
        "import json\ndef f():\n    from adaptlab.study.inputs import check_inputs\n"
        "    import adaptlab.results.store\n    from ..analysis import build_report\n"
        "    from ._common import MAX_RESAMPLES\n"
    )
    assert sorted(cli_imports(src)) == [
        (3, "adaptlab.study.inputs", "check_inputs"),
        (4, "adaptlab.results.store", None),
        (5, "adaptlab.analysis", "build_report"),
        (6, "adaptlab.cli._common", "MAX_RESAMPLES"),
    ]


def test_the_rule_flags_what_it_should():
    """Guards the guard: private and unexported names, deep module imports are reported."""
    assert problem("adaptlab.study.schema", "_parse_section") == "_parse_section is not in adaptlab.study.__all__"
    assert problem("adaptlab.results.store", None) is not None
    assert problem("adaptlab.results.store", "ResultsStore") is None
    assert problem("adaptlab.cli._common", "MAX_RESAMPLES") is None
    assert problem("adaptlab.errors", "ConfigError") is None
