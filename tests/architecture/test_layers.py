"""The package layering of docs/architecture.md, enforced by walking every import in the library.

The layers are read from that document's layout block ("## The layout and its layers": one line
per layer, ``errors.py _version.py  layer 0`` ... ``cli/ __main__.py  layer 6``), so the document
and this check name the same layers, storage included. A package may import its own layer's
packages and those below, never one above; the package graph and the module graph must both be
free of cycles.
"""

from __future__ import annotations

import ast
import functools
import re
from collections import defaultdict
from pathlib import Path

import adaptlab

ROOT = Path(adaptlab.__file__).resolve().parent
DOC = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"


def doc_layers(text: str) -> dict[str, int]:
    """``{top-level package or module: layer}`` from the layout block of docs/architecture.md."""
    section = text.split("## The layout and its layers", 1)[1]
    block = section.split("```", 2)[1]
    layers: dict[str, int] = {}
    for line in block.splitlines():
        m = re.match(r"\s+(\S.*?)\s+layer (\d+)", line)
        if m is None:
            continue
        for item in m.group(1).split():
            name = item.split("/", 1)[0].removesuffix(".py")
            layers[name] = int(m.group(2))
    return layers


LAYERS = doc_layers(DOC.read_text(encoding="utf-8"))


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, module: str | None = None) -> list[tuple[int, str]]:
    """(line, imported adaptlab module) for every import statement, at any depth."""
    module = module or _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("adaptlab")]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            if base.startswith("adaptlab"):
                out += [(node.lineno, f"{base}.{a.name}") for a in node.names]
    return out


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


@functools.lru_cache(maxsize=1)
def _parsed_library() -> tuple[tuple[str, tuple[tuple[int, str], ...]], ...]:
    """Every module's imports, parsed once per session (four tests walk the same sources)."""
    return tuple((_module_name(p), tuple(_imports(p))) for p in sorted(ROOT.rglob("*.py")))


def _library() -> dict[str, list[tuple[int, str]]]:
    return {m: list(imports) for m, imports in _parsed_library()}


def _known_modules(graph: dict[str, list[tuple[int, str]]], target: str) -> str | None:
    """The library module an import refers to (``adaptlab.x.y.Name`` -> ``adaptlab.x.y``)."""
    while target and target not in graph:
        target = target.rpartition(".")[0]
    return target or None


def test_no_package_imports_from_a_layer_above():
    bad = []
    for module, imports in _library().items():
        src = _package(module)
        if src not in LAYERS:
            continue
        for line, target in imports:
            dst = _package(target)
            if dst in LAYERS and LAYERS[dst] > LAYERS[src]:
                bad.append(f"{module}:{line} ({src}, layer {LAYERS[src]}) imports {target} (layer {LAYERS[dst]})")
    assert not bad, "imports pointing up the data flow:\n" + "\n".join(bad)


def test_every_package_has_a_layer():
    packages = {_package(m) for m in _library()} - {""}
    assert packages <= set(LAYERS), f"packages without a layer: {sorted(packages - set(LAYERS))}"


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan 1972)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_package_graph_has_no_cycle():
    edges: dict[str, set[str]] = defaultdict(set)
    for module, imports in _library().items():
        for _, target in imports:
            if _package(target) and _package(target) != _package(module):
                edges[_package(module)].add(_package(target))
    assert not _cycles(edges), f"package import cycles: {_cycles(edges)}"


def test_module_graph_has_no_cycle():
    """Modules must not import each other in a circle (a package __init__ re-exporting its
    modules is an edge too, so a module importing its own package's __init__ is a cycle)."""
    graph = _library()
    edges: dict[str, set[str]] = defaultdict(set)
    for module, imports in graph.items():
        for _, target in imports:
            dst = _known_modules(graph, target)
            if dst is not None and dst != module:
                edges[module].add(dst)
    assert not _cycles(edges), f"module import cycles: {_cycles(edges)}"


RESULTS_PARTS = ("health", "legacy", "exports")
"""The subpackages of ``results/`` (docs/architecture.md): they may import the core, never each other."""
RESULTS_ENTRY_POINTS = {"adaptlab.results", "adaptlab.results.opening", "adaptlab.results.location"}
"""The modules above the core and its subpackages, which compose them (open a store of either layout,
check a store's location, export the package's names)."""


def _results_part(module: str) -> str | None:
    """The subpackage of ``results/`` that ``module`` (or an imported name) is in, else None."""
    parts = module.split(".")
    if parts[:2] == ["adaptlab", "results"] and len(parts) > 2 and parts[2] in RESULTS_PARTS:
        return parts[2]
    return None


def results_imports_pointing_up(graph: dict[str, list[tuple[int, str]]]) -> list[str]:
    """Imports of ``results/`` that break its one-way order: a core module importing a subpackage,
    or a subpackage importing another one. Entry points may import every part."""
    bad = []
    for module, imports in graph.items():
        if not module.startswith("adaptlab.results.") or module in RESULTS_ENTRY_POINTS:
            continue
        src = _results_part(module)
        for line, target in imports:
            dst = _results_part(target)
            if dst is not None and dst != src:
                bad.append(f"{module}:{line} imports {target}")
    return bad


def test_the_results_core_imports_none_of_its_subpackages():
    bad = results_imports_pointing_up(_library())
    assert not bad, "results/ imports against its order (core <- health/, legacy/, exports/):\n" + "\n".join(bad)


def test_the_results_check_finds_an_import_against_the_order():
    """Guards the guard: a core module importing a subpackage and a subpackage importing another
    are found; a subpackage importing the core and an entry point importing a subpackage are not."""
    graph = {
        "adaptlab.results.reader": [(3, "adaptlab.results.legacy.legacy.is_legacy_store")],
        "adaptlab.results.legacy.migrate": [(4, "adaptlab.results.store.normalize_uri")],
        "adaptlab.results.health.repair": [(5, "adaptlab.results.exports.mteb.export_mteb")],
        "adaptlab.results.opening": [(6, "adaptlab.results.legacy.legacy.LegacyReader")],
    }
    assert results_imports_pointing_up(graph) == [
        "adaptlab.results.reader:3 imports adaptlab.results.legacy.legacy.is_legacy_store",
        "adaptlab.results.health.repair:5 imports adaptlab.results.exports.mteb.export_mteb",
    ]


def test_the_walker_sees_imports_inside_functions(tmp_path):
    """Guards the guard: imports in function bodies and relative imports are found."""
    src = tmp_path / "m.py"
    src.write_text(
        "def f():\n    from adaptlab.study import runner\n    import adaptlab.cli\n    from ..results import store\n"
    )
    found = [t for _, t in _imports(src, "adaptlab.analysis.m")]
    assert sorted(found) == ["adaptlab.cli", "adaptlab.results.store", "adaptlab.study.runner"]


def test_the_doc_names_every_layer_in_order():
    """Guards the reader: the block gives the layers of the chain in docs/architecture.md
    ("The layout and its layers"), storage included."""
    assert LAYERS == {
        "errors": 0,
        "_version": 0,
        "options": 0,
        "storage": 1,
        "data": 2,
        "stats": 2,
        "metrics": 2,
        "models": 2,
        "runtime": 2,
        "embedding": 3,
        "retrieval": 3,
        "adapt": 3,
        "analysis": 4,
        "evaluation": 4,
        "results": 4,
        "study": 5,
        "cli": 6,
        "__main__": 6,
    }
