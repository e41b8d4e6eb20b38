"""Every module imports what it uses, so the console script works whatever else is loaded.

The test process has loaded much that the console script never does (datasets, duckdb, the
test Hub server), and a module that those load as a side effect (pyarrow.compute) is then
there for the bundler too. So a fresh install once crashed on `pa.compute` where the suite did
not. These tests look at each module on its own: by its source, in an interpreter of its own,
and, for the pyarrow calls, in a process that has loaded nothing but the bundler.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from factory import make_row
from helpers import cli_env

import bundler

PACKAGE = Path(bundler.__file__).parent
GUARANTEED = {"os.path"}
"""Submodules that their parent module imports itself, by its documented contract: `os`
always binds `os.path`. (pyarrow binds `compute` only when something loads it.)"""


def package_modules() -> list[tuple[str, Path]]:
    """Every module of the package: its dotted name and its file."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found.append((".".join(parts), path))
    return found


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _imported(tree: ast.Module) -> tuple[dict[str, str], set[str]]:
    """The names bound to modules (`import a.b as c` binds c to a.b, `import a.b` binds a to
    a), and every module the file imports anywhere (a.b makes a and a.b imported)."""
    bound: dict[str, str] = {}
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                imported.update(".".join(parts[:end]) for end in range(1, len(parts) + 1))
                if alias.asname:
                    bound[alias.asname] = alias.name
                else:
                    bound[parts[0]] = parts[0]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imported.add(node.module)
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if _is_module(full):
                    imported.add(full)
                    bound[alias.asname or alias.name] = full
    return bound, imported


def _dotted(node: ast.expr) -> list[str] | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]


def unimported_submodules(path: Path) -> set[str]:
    """The submodules a file reaches as an attribute (`pa.compute.equal`) without importing
    them itself: they are there only if something else loaded them first."""
    tree = ast.parse(path.read_text(), str(path))
    bound, imported = _imported(tree)
    attributes = [node for node in ast.walk(tree) if isinstance(node, ast.Attribute)]
    inner = {id(node.value) for node in attributes}
    missing = set()
    for node in attributes:
        if id(node) in inner:
            continue  # part of a longer chain, which is looked at whole
        dotted = _dotted(node)
        if not dotted or dotted[0] not in bound:
            continue
        module = bound[dotted[0]]
        for attribute in dotted[1:]:
            candidate = f"{module}.{attribute}"
            if candidate in imported:
                module = candidate
                continue
            if candidate not in GUARANTEED and _is_module(candidate):
                missing.add(candidate)
            break
    return missing


def test_no_module_reaches_a_submodule_it_does_not_import() -> None:
    found = {
        name: sorted(missing)
        for name, path in package_modules()
        if (missing := unimported_submodules(path))
    }
    assert found == {}


def test_the_check_finds_a_submodule_reached_through_its_parent(tmp_path: Path) -> None:
    source = tmp_path / "example.py"
    source.write_text(
        "import pyarrow as pa\nimport pyarrow.parquet as pq\nimport os.path\n"
        "def f(t):\n    pq.read_table(t)\n    os.path.join('a')\n"
        "    return pa.compute.equal(t, 1)\n"
    )
    assert unimported_submodules(source) == {"pyarrow.compute"}
    source.write_text("import pyarrow as pa\nimport pyarrow.compute\npa.compute.equal(1, 1)\n")
    assert unimported_submodules(source) == set()


def _import_alone(name: str) -> str | None:
    """None when `name` imports in an interpreter of its own; else the last line it printed."""
    result = subprocess.run(
        [sys.executable, "-c", f"import {name}"],
        capture_output=True,
        text=True,
        env=cli_env(),
        check=False,
    )
    if result.returncode == 0:
        return None
    return f"{name}: {(result.stderr.strip().splitlines() or ['?'])[-1]}"


def test_every_module_imports_alone_in_a_fresh_interpreter() -> None:
    names = [name for name, _ in package_modules()]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        failed = [outcome for outcome in pool.map(_import_alone, names) if outcome]
    assert failed == []


_TABLES_ALONE = """
import json, sys
before = set(sys.modules)
from bundler.hub.leaderboard.ranking import TaskBoard
from bundler.hub.leaderboard.rows import TableRow
from bundler.hub.leaderboard.tables import AllTasksTable, task_table_bytes
rows = [TableRow.model_validate(row) for row in json.loads(sys.argv[1])]
board = AllTasksTable.of(rows[:2]).updated(rows[1:], removed=[rows[0].bundle_id])
task = rows[-1].task_name
table = task_table_bytes(TaskBoard.of(task, board.rows(task)))
again = AllTasksTable.read(board.files())
print(json.dumps({
    "ids": [row.bundle_id for row in again.rows()],
    "task_rows": len(board.rows(task)),
    "table_bytes": len(table),
    "test_only_loaded": sorted(
        name for name in ("datasets", "duckdb", "hubserver") if name in sys.modules
    ),
}))
# as the console script ends once pyarrow is loaded (bundler.cli.app): Arrow's own teardown can
# abort the process at exit (apache/arrow#34314), which is not what this script tests
sys.stdout.flush()
import os; os._exit(0)
"""


def test_the_tables_work_in_a_process_that_loaded_nothing_but_the_bundler() -> None:
    rows = [
        make_row("gpt", metrics={"em": {"acc": 0.5}}),
        make_row("qwen", metrics={"em": {"acc": 0.7}}),
        make_row("claude", metrics={"em": {"acc": 0.6}}),
    ]
    argument = json.dumps([row.model_dump(mode="json") for row in rows])
    result = subprocess.run(
        [sys.executable, "-c", _TABLES_ALONE, argument],
        capture_output=True,
        text=True,
        env=cli_env(),
        check=False,
    )
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout)
    assert outcome["ids"] == sorted(row.bundle_id for row in rows[1:])
    assert outcome["task_rows"] == 2
    assert outcome["table_bytes"] > 0
    assert outcome["test_only_loaded"] == []
