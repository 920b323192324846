"""The package's layers (docs/architecture.md): a module imports only from its own layer or the
layers below it, so each folder can be read, tested and changed without the ones above it."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "sumo_cli"

#: From the bottom up; a module may import from its own layer and any layer before it.
LAYERS = (
    ("sumo_cli", "sumo_cli.errors", "sumo_cli.vocabulary", "sumo_cli.names"),
    ("sumo_cli.sim",),
    ("sumo_cli.runtime",),
    ("sumo_cli.nets",),
    ("sumo_cli.store",),
    ("sumo_cli.ppo",),
    ("sumo_cli.meta",),
    ("sumo_cli.adapt",),
    ("sumo_cli.selfplay",),
    ("sumo_cli.compete",),
    ("sumo_cli.runs",),
    ("sumo_cli.report",),
    ("sumo_cli.bench",),
    ("sumo_cli.cli", "sumo_cli.__main__"),
)


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _layer(module: str) -> int:
    """The layer of a module: that of the longest layer entry that is the module or a package above it."""
    best, found = -1, None
    for i, entries in enumerate(LAYERS):
        for e in entries:
            if (module == e or module.startswith(e + ".")) and len(e) > best:
                best, found = len(e), i
    assert found is not None, f"{module} is in no layer: add its folder to LAYERS"
    return found


def _submodule_or_package(package: str, name: str) -> str:
    """``from package import name``: the module imported, when ``name`` is a module, else ``package``."""
    sub = PACKAGE.parent.joinpath(*package.split("."), name)
    return f"{package}.{name}" if sub.with_suffix(".py").exists() or sub.is_dir() else package


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every sumo_cli import in the file, lazy ones included."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "sumo_cli"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = _module_name(path).split(".")
                base = base[: len(base) - node.level + (path.name == "__init__.py")]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            if name.split(".")[0] == "sumo_cli":
                out += [(node.lineno, _submodule_or_package(name, a.name)) for a in node.names]
    return out


def test_every_module_is_in_a_layer():
    for path in PACKAGE.rglob("*.py"):
        _layer(_module_name(path))


def test_no_import_climbs_back_up_the_layers():
    climbs = []
    for path in sorted(PACKAGE.rglob("*.py")):
        me = _module_name(path)
        for line, target in _imports(path):
            if _layer(target) > _layer(me):
                climbs.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}")
    assert not climbs, "imports that climb back up the layers:\n" + "\n".join(climbs)
