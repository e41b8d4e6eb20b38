"""A command pays for its own start-up only: the app registers its commands lazily from the
table in bundler.cli.commands, so `bundler --help` lists them all without importing one, and a
command imports its own module and no other command's (measured in
tests/benchmark_startup.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
import typer.main
from helpers import probe_console_script, run_cli, run_python, subcommands

from bundler.cli.app import app
from bundler.cli.commands import GROUPS

COMMAND_MODULES = {
    f"bundler.cli.{entry.function.partition(':')[0]}"
    for table in GROUPS.values()
    for entry in table
}


def test_every_command_of_the_tables_is_the_function_it_names() -> None:
    group = typer.main.get_command(app)
    built = subcommands(group)
    assert list(built)[: len(GROUPS["bundler"])] == [entry.name for entry in GROUPS["bundler"]]
    for name in ("tasks", "signers"):
        inner = subcommands(built[name])
        assert list(inner) == [entry.name for entry in GROUPS[name]]
        built |= {f"{name} {word}": command for word, command in inner.items()}
    for table_name, table in GROUPS.items():
        for entry in table:
            words = entry.name if table_name == "bundler" else f"{table_name} {entry.name}"
            command = built[words]
            assert command.short_help == entry.summary
            assert command.help and entry.function.endswith(command.callback.__name__)


@pytest.mark.parametrize("table", sorted(GROUPS))
def test_each_summary_is_one_line(table: str) -> None:
    for entry in GROUPS[table]:
        assert "\n" not in entry.summary and len(entry.summary) <= 72, entry
        assert entry.summary.endswith(".") and "[" not in entry.summary  # no rich markup


def test_the_listing_is_the_same_before_and_after_the_commands_are_loaded() -> None:
    group = typer.main.get_command(app)
    ctx = typer.Context(group, info_name="bundler", terminal_width=100, max_content_width=100)
    listed = group.get_help(ctx)
    subcommands(group)  # every command built, as running each one would
    assert group.get_help(ctx) == listed


def test_help_lists_every_command_without_importing_any(tmp_path: Path) -> None:
    code, state = probe_console_script(tmp_path, "--help")
    assert code == 0
    assert COMMAND_MODULES & set(state["loaded"]) == set()
    shown = run_cli("--help", env={"COLUMNS": "200"}).stdout
    for entry in GROUPS["bundler"]:
        assert f"{entry.name} " in shown and entry.summary in shown


def test_a_command_imports_its_own_module_and_no_other_command_s(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    code, state = probe_console_script(
        tmp_path, "collect", tmp_path / "empty", "-o", tmp_path / "b"
    )
    assert code == 0
    assert COMMAND_MODULES & set(state["loaded"]) == {"bundler.cli.local_commands"}
    code, state = probe_console_script(tmp_path, "signers", "list", "--help")
    assert code == 0
    assert COMMAND_MODULES & set(state["loaded"]) == {"bundler.cli.signers_command"}


VERSION = """
import json, sys
from bundler.cli.app import main
sys.argv = ["bundler", "--version"]
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(n for n in ("rich", "pydantic", "huggingface_hub") if n in sys.modules)))
"""


def test_version_loads_neither_rich_nor_pydantic() -> None:
    result = run_python(VERSION)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("bundler ")
    assert json.loads(result.stdout.splitlines()[-1]) == []
