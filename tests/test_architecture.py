"""The package's shape: wings whose imports run one way, no circles, and no part too big to read.

Command line, then the modules that join wings (`sync`), then the Hub, then the local bundle
format, then the core. A module's wing is the first part of its name after `bundler.`, however
deep it sits in sub-packages (`bundler.hub.client.session` stands in the Hub wing). Every
import counts, the ones inside functions too: a lazy import is still an arrow a newcomer has to
know about. No module is longer than MAX_MODULE_LINES and no class than MAX_CLASS_LINES, and no
two classes share a name. Read from the source with `ast`, so nothing of the package is run.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "bundler"

RANKS = {"core": 0, "local": 1, "hub": 2, "cli": 4}
"""A module may import only from its own rank or below; a top-level module (`bundler.sync`,
the package itself) stands at 3, between the Hub and the command line."""
TOP_LEVEL_RANK = 3

THIRD_PARTY_HOMES = {
    "huggingface_hub": {"hub"},
    "typer": {"cli"},
    "rich": {"cli"},
}
"""Which wings may import which outside libraries at all."""

MAX_MODULE_LINES = 600
MAX_CLASS_LINES = 250
"""A class is measured from its `class` line to its last (ast's lineno to end_lineno)."""


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imported_names(path: Path, name: str) -> Iterator[str]:
    """Every module `path` imports, absolute, at any depth of its code."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def bundler_imports(known: dict[str, Path]) -> dict[str, set[str]]:
    """Each module's arrows to other modules of the package."""
    return {
        name: {target for target in imported_names(path, name) if target in known} - {name}
        for name, path in known.items()
    }


def wing(name: str) -> str | None:
    """The first part after `bundler.`, for a module in a wing at any depth; None for the
    package itself and the modules beside the wings (`bundler.sync`)."""
    parts = name.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in RANKS) else None


def rank(name: str) -> int:
    home = wing(name)
    return TOP_LEVEL_RANK if home is None else RANKS[home]


def test_every_module_stands_in_a_wing_or_joins_them() -> None:
    loose = [n for n in modules() if wing(n) is None and n not in ("bundler", "bundler.sync")]
    assert loose == [], "a module beside the wings: put it in core, local, hub or cli"


def test_imports_run_from_the_command_line_down_to_the_core() -> None:
    graph = bundler_imports(modules())
    against = sorted(
        f"{importer} -> {target}"
        for importer, targets in graph.items()
        for target in targets
        if rank(target) > rank(importer) and target != "bundler"
    )
    assert against == []


def test_no_module_imports_the_package_facade() -> None:
    """`bundler/__init__.py` is for library users; a module inside it importing it would make
    the facade an arrow back up."""
    graph = bundler_imports(modules())
    assert sorted(n for n, targets in graph.items() if "bundler" in targets) == []


@pytest.mark.parametrize("library", sorted(THIRD_PARTY_HOMES))
def test_outside_libraries_stay_in_their_wing(library: str) -> None:
    allowed = THIRD_PARTY_HOMES[library]
    offenders = sorted(
        name
        for name, path in modules().items()
        if wing(name) not in allowed
        and any(
            target == library or target.startswith(f"{library}.")
            for target in imported_names(path, name)
        )
    )
    assert offenders == []


MAINTAIN = "bundler.hub.maintain"
BRANCH = "bundler.hub.leaderboard.branch"


def inside(name: str, package: str) -> bool:
    return name == package or name.startswith(f"{package}.")


def test_the_task_definitions_stand_below_the_board_and_its_commands() -> None:
    """`hub/tasks` holds values the board is ranked by: it never reads a branch nor carries
    a maintainer's command, or the board and its rules would stand on each other."""
    graph = bundler_imports(modules())
    against = sorted(
        f"{importer} -> {target}"
        for importer, targets in graph.items()
        if inside(importer, "bundler.hub.tasks")
        for target in targets
        if inside(target, MAINTAIN) or target == BRANCH
    )
    assert against == []


def test_only_the_command_line_runs_the_maintainers_commands() -> None:
    """`hub/maintain` changes a leaderboard on a maintainer's behalf: a module of the Hub wing
    importing it would make a value depend on a command."""
    graph = bundler_imports(modules())
    against = sorted(
        f"{importer} -> {target}"
        for importer, targets in graph.items()
        if not inside(importer, MAINTAIN) and wing(importer) != "cli"
        for target in targets
        if inside(target, MAINTAIN)
    )
    assert against == []


def line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_no_module_is_longer_than_the_limit() -> None:
    too_long = {
        name: lines
        for name, path in modules().items()
        if (lines := line_count(path)) > MAX_MODULE_LINES
    }
    assert too_long == {}, f"split these modules by idea: at most {MAX_MODULE_LINES} lines"


def class_lengths(path: Path) -> Iterator[tuple[str, int]]:
    """Every class of a module (nested ones too), by name, and its length in lines."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
            yield node.name, node.end_lineno - node.lineno + 1


def test_no_class_is_longer_than_the_limit() -> None:
    too_long = sorted(
        f"{name}.{cls}: {lines} lines"
        for name, path in modules().items()
        for cls, lines in class_lengths(path)
        if lines > MAX_CLASS_LINES
    )
    assert too_long == [], f"split these classes by idea: at most {MAX_CLASS_LINES} lines"


def test_no_two_classes_share_a_name() -> None:
    """One name, one thing: a reader who meets a class's name knows which one it is."""
    homes: dict[str, list[str]] = {}
    for name, path in modules().items():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                homes.setdefault(node.name, []).append(name)
    shared = {cls: where for cls, where in sorted(homes.items()) if len(where) > 1}
    assert shared == {}


def test_there_are_no_circles() -> None:
    graph = bundler_imports(modules())
    circles = [sorted(component) for component in strongly_connected(graph) if len(component) > 1]
    assert circles == []


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm: the sets of modules that import each other, directly or round."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component: set[str] = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            found.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_size_checks_measure_lines_and_classes(tmp_path: Path) -> None:
    source = tmp_path / "module.py"
    source.write_text("class A:\n    x = 1\n\n    class B:\n        pass\n\n\ny = 2\n")
    assert line_count(source) == 8
    assert dict(class_lengths(source)) == {"A": 5, "B": 2}


def test_the_check_sees_an_arrow_against_the_order(tmp_path: Path) -> None:
    """The walk itself: an import from the local wing into the Hub wing is an arrow it finds."""
    source = tmp_path / "bundler" / "local" / "stray.py"
    source.parent.mkdir(parents=True)
    source.write_text("def f():\n    from bundler.hub.client.session import HubSession\n")
    targets = set(imported_names(source, "bundler.local.stray"))
    assert "bundler.hub.client.session" in targets
    assert rank("bundler.hub.client.session") > rank("bundler.local.stray")
