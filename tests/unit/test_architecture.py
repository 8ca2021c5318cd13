"""The floors of MONET (docs/architecture.md): a module imports only its own floor and those below.

The check reads every `import` statement of the packages with `ast`, including imports inside
functions (lazy imports keep start-up fast but are dependencies all the same) and under
`if TYPE_CHECKING:`. It fails when a module imports a higher floor, when a module of an IR-free
floor imports xDSL, when two modules import each other through any chain (a cycle), or when a
module belongs to no floor.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("monet_ir", "dialects", "passes", "targets")

# Lowest floor first. An entry ending in "/" is a folder (every module under it), any other entry
# one file. docs/architecture.md shows this same table.
FLOORS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("monet_ir/errors.py", "monet_ir/files.py", "monet_ir/options.py", "monet_ir/precision.py",
              "monet_ir/untrusted.py")),
    ("targets", ("targets/",)),
    ("cost", ("monet_ir/cost/", "monet_ir/network/")),
    ("IR", ("dialects/", "monet_ir/types.py", "monet_ir/graph.py")),
    ("frontend, analysis", ("monet_ir/frontend/", "monet_ir/analysis/")),
    ("interp, schedule", ("monet_ir/interp/", "monet_ir/schedule/", "monet_ir/parallel/")),
    ("passes", ("passes/", "monet_ir/registry.py", "monet_ir/pipeline.py")),
    ("emit", ("monet_ir/emit/",)),
    ("explore", ("monet_ir/explore/",)),
    ("tools", ("monet_ir/tools/", "monet_ir/__init__.py")),
]
# Floors that know nothing of the IR: plain Python in, plain Python out. (The base floor's error
# net names xDSL's exception classes, lazily, to catch them; it builds no IR.)
IR_FREE = ("targets", "cost")
IR_PACKAGES = ("xdsl", "dialects")


def module_files(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module of `PACKAGES` under `root`."""
    modules = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


def imported_names(module: str, path: Path) -> Iterator[tuple[str, int]]:
    """(absolute dotted name, line) of everything `module` imports, at any depth of the file.

    `from P import N` yields P.N (a submodule or a name inside P; `owner` tells them apart)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                yield f"{source}.{alias.name}", node.lineno


def owner(name: str, modules: dict[str, Path]) -> str | None:
    """The module of ours that a dotted name lives in (the longest module prefix), or None."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(root: Path) -> tuple[dict[str, Path], dict[str, dict[str, int]], dict[str, dict[str, int]]]:
    """Modules, their imports of our modules {module: {target: line}}, and of other packages by
    top-level name {module: {package: line}}."""
    modules = module_files(root)
    ours: dict[str, dict[str, int]] = {m: {} for m in modules}
    others: dict[str, dict[str, int]] = {m: {} for m in modules}
    for module, path in modules.items():
        for name, line in imported_names(module, path):
            target = owner(name, modules) if name.split(".")[0] in PACKAGES else None
            if target is None:
                others[module].setdefault(name.split(".")[0], line)
            elif target != module:
                ours[module].setdefault(target, line)
    return modules, ours, others


def floor_of(module: str, path: Path, root: Path) -> int | None:
    relative = path.relative_to(root).as_posix()
    best, best_length = None, -1
    for index, (_, entries) in enumerate(FLOORS):
        for entry in entries:
            hit = relative.startswith(entry) if entry.endswith("/") else relative == entry
            if hit and len(entry) > best_length:
                best, best_length = index, len(entry)
    return best


def floor_name(index: int) -> str:
    return f"{index + 1} ({FLOORS[index][0]})"


def upward_imports(root: Path) -> list[str]:
    modules, ours, _ = import_graph(root)
    problems = []
    for module, targets in ours.items():
        mine = floor_of(module, modules[module], root)
        for target, line in sorted(targets.items()):
            theirs = floor_of(target, modules[target], root)
            if mine is not None and theirs is not None and theirs > mine:
                problems.append(f"{modules[module].relative_to(root)}:{line}: {module} (floor {floor_name(mine)}) "
                                f"imports {target} (floor {floor_name(theirs)})")
    return problems


def ir_imports_of_ir_free_floors(root: Path) -> list[str]:
    modules, ours, others = import_graph(root)
    free = {i for i, (name, _) in enumerate(FLOORS) if name in IR_FREE}
    problems = []
    for module in modules:
        if floor_of(module, modules[module], root) not in free:
            continue
        used = {**others[module], **{t.split(".")[0]: line for t, line in ours[module].items()}}
        for package in IR_PACKAGES:
            if package in used:
                problems.append(f"{modules[module].relative_to(root)}:{used[package]}: {module} is IR-free "
                                f"but imports {package}")
    return problems


def import_cycles(root: Path) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    _, ours, _ = import_graph(root)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(ours[v]):
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
                cycles.append(sorted(component))

    for v in sorted(ours):
        if v not in index:
            visit(v)
    return cycles


# ---------------------------------------------------------------------------- the checks


def test_every_module_has_a_floor():
    modules = module_files(REPO)
    assert modules
    assert [m for m, path in modules.items() if floor_of(m, path, REPO) is None] == []


def test_no_module_imports_a_higher_floor():
    assert upward_imports(REPO) == []


def test_ir_free_floors_do_not_import_the_ir():
    assert ir_imports_of_ir_free_floors(REPO) == []


def test_no_import_cycles():
    assert import_cycles(REPO) == []


def test_floor_table_matches_docs():
    """docs/architecture.md has one table row per floor, `| N | name | entries |`, as above."""
    text = (REPO / "docs" / "architecture.md").read_text()
    rows = re.findall(r"^\|\s*(\d+)\s*\|\s*([^|]+?)\s*\|([^|]*)\|", text, re.MULTILINE)
    documented = [(name, tuple(re.findall(r"`([^`]+)`", entries))) for _, name, entries in rows]
    assert documented == FLOORS


# ---------------------------------------------------------------------------- the checker itself


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_checker_finds_upward_lazy_imports_cycles_and_ir_in_cost(tmp_path):
    write(tmp_path, {
        "monet_ir/__init__.py": "",
        "monet_ir/cost/__init__.py": "from .model import cost_of\n",
        "monet_ir/cost/model.py": "def cost_of():\n    from dialects.nn import ReluOp\n",
        "monet_ir/frontend/__init__.py": "",
        "monet_ir/frontend/a.py": "from monet_ir.frontend.b import f\n",
        "monet_ir/frontend/b.py": "def f():\n    from . import a\n",
        "passes/__init__.py": "",
        "passes/p.py": "def apply():\n    from monet_ir.emit.report import x\n",
        "monet_ir/emit/__init__.py": "",
        "monet_ir/emit/report.py": "import xdsl.ir\n",
        "dialects/__init__.py": "", "dialects/nn.py": "", "targets/__init__.py": "",
    })
    upward = upward_imports(tmp_path)
    assert len(upward) == 2
    assert any("monet_ir.cost.model (floor 3 (cost)) imports dialects.nn (floor 4 (IR))" in p for p in upward)
    assert any("passes.p (floor 7 (passes)) imports monet_ir.emit.report (floor 8 (emit))" in p for p in upward)
    assert ir_imports_of_ir_free_floors(tmp_path) == [
        "monet_ir/cost/model.py:2: monet_ir.cost.model is IR-free but imports dialects"]
    assert import_cycles(tmp_path) == [["monet_ir.frontend.a", "monet_ir.frontend.b"]]
