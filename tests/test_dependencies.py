"""Every third-party module the package imports is declared in pyproject.toml: in the core
dependencies, or, for a module that serves one optional feature, in that feature's extra."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
# import name -> distribution name, where they differ
DISTRIBUTION = {
    "elftools": "pyelftools",
    "tomli_w": "tomli-w",
    "optuna_dashboard": "optuna-dashboard",
    "optuna_integration": "optuna-integration",
    "pynvml": "nvidia-ml-py",
    "cupy": "cupy-cuda13x",
}
# modules that serve one optional feature: the extra that must declare them
EXTRA = {"cupy": "gpu", "pynvml": "gpu", "psycopg": "postgres", "triton": "triton", "mlflow": "mlflow", "optuna_integration": "mlflow"}


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0].lower() for r in requirements}


def _imported() -> dict[str, set[str]]:
    """Top-level third-party module -> the package files importing it (lazy imports included)."""
    out: dict[str, set[str]] = {}
    for path in (ROOT / "ciq_optuna").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                if top not in sys.stdlib_module_names and top not in ("ciq_optuna", "__future__"):
                    out.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return out


def test_every_imported_module_is_declared() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = _names(project["dependencies"])
    extras = {name: _names(reqs) for name, reqs in project["optional-dependencies"].items()}
    imported = _imported()
    assert {"numpy", "optuna", "scipy"} <= imported.keys()  # the scan sees the package
    missing = []
    for module, files in sorted(imported.items()):
        dist = DISTRIBUTION.get(module, module).lower()
        declared = dist in extras[EXTRA[module]] if module in EXTRA else dist in core
        if not declared:
            where = f"extra {EXTRA[module]!r}" if module in EXTRA else "the core dependencies"
            missing.append(f"{module} ({dist}) imported by {', '.join(sorted(files))} is not in {where}")
    assert not missing, "\n".join(missing)
