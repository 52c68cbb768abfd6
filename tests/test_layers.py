"""The package's import graph has no cycles and follows the layer contract of docs/architecture.md.

Every ``import`` in ``ciq_optuna`` counts, module-level or inside a function: a function-level
import only delays a cycle, it does not remove it.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "ciq_optuna"

#: The layer contract, bottom to top (keep in step with docs/architecture.md). A module belongs to
#: the entry with the longest matching name (``ciq_optuna`` itself: only the package's
#: ``__init__``); it may import modules of lower layers and of its own entry, never those of a
#: higher layer or of another entry of the same layer. A new module is placed here on purpose.
LAYERS: list[tuple[str, ...]] = [
    ("ciq_optuna",),
    ("ciq_optuna.errors", "ciq_optuna.cli.types"),
    ("ciq_optuna.isolation",),
    ("ciq_optuna.space",),
    ("ciq_optuna.compilers",),
    ("ciq_optuna.space.check", "ciq_optuna.acf", "ciq_optuna.samplers"),
    ("ciq_optuna.store",),
    ("ciq_optuna.study",),
    ("ciq_optuna.objectives",),
    ("ciq_optuna.simplify", "ciq_optuna.summary", "ciq_optuna.triton_acf", "ciq_optuna.extremes"),
    ("ciq_optuna.check", "ciq_optuna.explain", "ciq_optuna.warm_start", "ciq_optuna.dashboard_view"),
    ("ciq_optuna.dashboard",),
    ("ciq_optuna.gpu",),
    ("ciq_optuna.tune", "ciq_optuna.workers"),
    ("ciq_optuna.tune_all",),
    ("ciq_optuna.cli", "ciq_optuna.api"),
    ("ciq_optuna.compileiq",),
]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(name: str, path: Path, modules: set[str]) -> set[str]:
    """The package's modules that ``name`` imports anywhere in its source (functions included)."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names
            ]
        else:
            continue
        for target in targets:
            while target and target not in modules:  # "import a.b.c" of an object c: its module
                target = target.rpartition(".")[0]
            if target.startswith("ciq_optuna") and target != name:
                found.add(target)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = package_modules()
    return {name: imports_of(name, path, set(modules)) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules (first == last), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def layer_of(module: str) -> tuple[int, str] | None:
    """(layer index, entry) of a module: the longest entry that names it or a package above it."""
    best: tuple[int, str] | None = None
    for index, entries in enumerate(LAYERS):
        for entry in entries:
            inside = module == entry or (entry != "ciq_optuna" and module.startswith(entry + "."))
            if inside and (best is None or len(entry) > len(best[1])):
                best = (index, entry)
    return best


def test_the_graph_is_read():
    graph = import_graph()
    assert "ciq_optuna.study.metadata" in graph["ciq_optuna.tune"]
    assert "ciq_optuna.objectives.factory" in graph["ciq_optuna.workers"]  # a function-level import
    assert "ciq_optuna.cli.acf_cmd" in graph["ciq_optuna.cli"]  # "from package import module"


def test_find_cycle_sees_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_no_import_cycles():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_every_module_has_a_layer():
    unplaced = [name for name in import_graph() if layer_of(name) is None]
    assert not unplaced, f"modules without a layer (add them to LAYERS and docs/architecture.md): {unplaced}"
    for entry in (e for entries in LAYERS for e in entries):  # no entry names a module that is gone
        path = PACKAGE.parent.joinpath(*entry.split("."))
        assert path.is_dir() or path.with_suffix(".py").is_file(), entry


def test_layer_contract():
    wrong = []
    for name, targets in sorted(import_graph().items()):
        layer, entry = layer_of(name)
        for target in sorted(targets):
            t_layer, t_entry = layer_of(target)
            if t_layer > layer or (t_layer == layer and t_entry != entry):
                wrong.append(f"{name} (layer {layer}) imports {target} (layer {t_layer})")
    assert not wrong, "layer contract broken (docs/architecture.md):\n" + "\n".join(wrong)


def test_the_product_never_imports_compileiq():
    wrong = [
        f"{name} imports {target}"
        for name, targets in import_graph().items()
        if not name.startswith("ciq_optuna.compileiq")
        for target in targets
        if target.startswith("ciq_optuna.compileiq")
    ]
    assert not wrong
