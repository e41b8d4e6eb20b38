"""The command line itself, as a user meets it: --version, the placeholders --help shows, and
usage errors (unknown option, missing argument, bad value) as one line, exit 2, and a JSON
error object under --json."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import typer
from factory import RunSpec, write_tree
from helpers import run_cli, subcommands

from bundler.cli.app import app
from bundler.core.version import VERSION
from bundler.local.collect import CollectOptions, collect

COMMANDS = sorted(subcommands(typer.main.get_command(app)))
TYPE_PLACEHOLDER = re.compile(
    r"<(?:bool|str|int|float|path|Path|text|int range|float range|list\[[^\]]*\]|datetime)>"
)


def test_version() -> None:
    result = run_cli("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"bundler {VERSION}\n"


def test_every_command_is_listed() -> None:
    assert {"collect", "verify", "inspect", "upload", "download", "sync"} <= set(COMMANDS)


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_help_placeholders_read_as_words(command: str) -> None:
    result = run_cli(*([command] if command else []), "--help", env={"COLUMNS": "200"})
    assert result.returncode == 0, result.stderr
    assert not TYPE_PLACEHOLDER.search(result.stdout), result.stdout


@pytest.mark.parametrize(
    ("command", "placeholders"),
    [
        ("collect", ["OUTPUT_ROOT", "BUNDLES_DIR", "TASK=ROWS", "N", "SECONDS", "TOKEN"]),
        ("upload", ["BUNDLES_DIR", "OWNER/NAME", "BRANCH", "SECONDS", "TEXT"]),
        ("sync", ["OUTPUT_ROOT", "OWNER/NAME", "TASK=ROWS", "FILE", "SECONDS"]),
        ("download", ["OWNER/NAME", "BUNDLES_DIR", "REVISION", "BUNDLE_ID"]),
        ("verify", ["PATH"]),
        ("inspect", ["ARCHIVE"]),
        ("review", ["OWNER/NAME", "N", "RATE", "TOKEN"]),
    ],
)
def test_help_shows_the_expected_words(command: str, placeholders: list[str]) -> None:
    text = run_cli(command, "--help", env={"COLUMNS": "200"}).stdout
    for word in placeholders:
        assert re.search(rf"(?<![\w=/]){re.escape(word)}(?![\w=/])", text), (word, text)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["collect", "--bogus"], "No such option: --bogus"),
        (["upload", "bundles"], "Missing option '--repo'"),
        (["collect", "--level", "30"], "'--level'"),
        (["collect", "--wait", "soon"], "'--wait'"),
        (["verify"], "Missing argument 'PATH'"),
        (["frobnicate"], "No such command 'frobnicate'"),
        (["sync", "--repo", "a/b", "--wait", "-1"], "'--wait'"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(
    args: list[str], message: str, tmp_path: Path
) -> None:
    result = run_cli(*args, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and message in lines[0], lines[0]
    assert "--help" in lines[0]

    with_json = run_cli(*args, "--json", cwd=tmp_path)
    assert with_json.returncode == 2
    assert len(with_json.stderr.splitlines()) == 1, with_json.stderr
    payload = json.loads(with_json.stdout)
    assert set(payload) == {"kind", "error", "hint", "error_kind", "exit_code"}
    assert payload["exit_code"] == 2 and message in payload["error"]
    assert (payload["kind"], payload["error_kind"]) == ("error", "usage")
    assert "--help" in payload["hint"]


class Recorder:
    """A ProgressSink that keeps what it was told, to check the totals collect announces."""

    def __init__(self) -> None:
        self.begun: list[tuple[str, int | None]] = []
        self.advanced = 0

    def begin(self, label: str, total: int | None, *, unit: str = "items") -> None:
        self.begun.append((label, total))

    def advance(self, steps: int = 1) -> None:
        self.advanced += steps


def test_collect_progress_has_a_known_total(tmp_path: Path) -> None:
    write_tree(tmp_path / "out", [RunSpec(rows=7), RunSpec(model="claude-opus", rows=3)])
    progress = Recorder()
    report = collect(tmp_path / "out", tmp_path / "b", CollectOptions(), progress)
    assert len(report.bundles) == 2
    totals = sorted(total for label, total in progress.begun if label.startswith("bundling"))
    assert totals == [3, 7]  # N/M, not N/?
    assert progress.advanced == 10
