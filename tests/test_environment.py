"""The variables the bundler reads itself (BUNDLER_MAX_REPO_FILES, BUNDLER_MAX_WAIT) are read
when a command runs, through its error handling (issue 36): a value that cannot be used is one
line naming the variable, exit 2, never a traceback, from every command that talks to the Hub.
No request is made: the value is refused as the session opens, before the Hub is asked."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import _command, one_line_error, run_cli, run_cli_process, strict_json

HUB_COMMANDS: dict[str, list[str]] = {
    "init": ["init"],
    "upload": ["upload", "bundles"],
    "card": ["card"],
    "download": ["download", "-o", "out"],
    "sync": ["sync", "output"],
    "review": ["review", "--pr", "1"],
    "status": ["status", "--pr", "1"],
    "audit": ["audit"],
    "eval-results": ["eval-results", "--dry-run"],
    "tasks define": ["tasks", "define", "t", "--dataset", "d/e", "--split", "s", "--metric", "a.b"],
    "tasks list": ["tasks", "list"],
    "signers add": ["signers", "add", "eve", "--key", "key.pub"],
    "signers remove": ["signers", "remove", "eve"],
    "signers list": ["signers", "list"],
    "signers require": ["signers", "require"],
    "signers retire": ["signers", "retire", "eve"],
}
"""Every command that talks to the Hub, with the least it needs to start."""

BAD_VALUES = {
    "BUNDLER_MAX_REPO_FILES": ["abc", "-5", "0", "9" * 5000, "1e6", "٣"],
    "BUNDLER_MAX_WAIT": ["abc", "-5", "nan", "inf", "1e400", "9" * 5000],
}


def _commands_with_repo() -> set[str]:
    """The names of the typer app's commands that take --repo: the Hub's commands."""
    found: set[str] = set()

    def walk(command: object, prefix: str) -> None:
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{prefix} {name}".strip())
        if any(param.name == "repo" for param in getattr(command, "params", [])):
            found.add(prefix)

    walk(_command(), "")
    return found


def test_every_hub_command_is_tried() -> None:
    assert _commands_with_repo() == set(HUB_COMMANDS)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "bundles").mkdir()
    (tmp_path / "output").mkdir()
    (tmp_path / "key.pub").write_text("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA== eve\n")
    return tmp_path


@pytest.mark.parametrize("command", sorted(HUB_COMMANDS))
@pytest.mark.parametrize(
    ("variable", "value"), [(name, bad) for name, values in BAD_VALUES.items() for bad in values]
)
def test_a_bad_variable_is_one_line_naming_it(
    workdir: Path, command: str, variable: str, value: str
) -> None:
    argv = [*HUB_COMMANDS[command], "--repo", "owner/board"]
    result = run_cli(*argv, env={variable: value}, cwd=workdir)
    assert result.returncode == 2, result.stderr
    line = one_line_error(result.stderr)
    assert line.startswith(f"error: {variable}="), line
    assert len(line) < 200, line  # 5,000 digits are not repeated back
    json_result = run_cli(*argv, "--json", env={variable: value}, cwd=workdir)
    assert json_result.returncode == 2
    error = strict_json(json_result.stdout)
    assert error["error_kind"] == "usage" and error["error"].startswith(f"{variable}=")


def test_the_console_script_refuses_as_the_app_does(workdir: Path) -> None:
    """The variable was once read when a module was imported: a process of its own shows
    whether anything still reads it there."""
    result = run_cli_process(
        "card", "--repo", "owner/board", env={"BUNDLER_MAX_REPO_FILES": "abc"}, cwd=workdir
    )
    assert result.returncode == 2
    assert one_line_error(result.stderr) == (
        "error: BUNDLER_MAX_REPO_FILES='abc': expected a number of files from 1 to 1,000,000,000"
    )


def test_a_good_value_or_an_option_passes(workdir: Path, repo_id: str) -> None:
    """A value in range is taken, and --max-wait given on the command line leaves
    BUNDLER_MAX_WAIT unread, as an option wins over the environment."""
    for env in ({"BUNDLER_MAX_REPO_FILES": " 250000 "}, {"BUNDLER_MAX_WAIT": "0.5"}):
        result = run_cli("tasks", "list", "--repo", repo_id, env=env, cwd=workdir)
        assert result.returncode == 0, result.stderr
    result = run_cli("audit", "--repo", repo_id, "--max-wait", "5", env={"BUNDLER_MAX_WAIT": "abc"})
    assert "BUNDLER_MAX_WAIT" not in result.stderr, result.stderr
