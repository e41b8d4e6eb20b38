"""`bundler template`: the shipped templates, printed, written where they belong (folders
made), or given as JSON."""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path

from helpers import one_line_error, run_cli

SHIPPED = files("bundler.templates").joinpath("nightly-sync.yml").read_text()


def test_output_makes_the_workflow_folder_a_redirection_would_need(tmp_path: Path) -> None:
    target = tmp_path / ".github" / "workflows" / "nightly-sync.yml"
    result = run_cli("template", "nightly-sync", "--output", target)
    assert result.returncode == 0, result.stderr
    assert target.read_text() == SHIPPED
    assert result.stdout == ""  # the file holds it; stdout stays clean
    assert f"wrote {target}" in result.stderr


def test_json_carries_the_text_and_where_it_went(tmp_path: Path) -> None:
    printed = json.loads(run_cli("template", "nightly-sync", "--json").stdout)
    assert printed == {
        "kind": "template",
        "name": "nightly-sync",
        "output": None,
        "text": SHIPPED,
        "exit_code": 0,
    }
    target = tmp_path / "w.yml"
    written = json.loads(run_cli("template", "nightly-sync", "-o", target, "--json").stdout)
    assert written["output"] == str(target) and target.read_text() == SHIPPED


def test_an_unknown_template_is_one_line_naming_the_known_ones() -> None:
    result = run_cli("template", "nightly")
    assert result.returncode == 2
    assert one_line_error(result.stderr) == "error: no template 'nightly'"
    assert "hint: known: nightly-sync" in result.stderr
    as_json = json.loads(run_cli("template", "nightly", "--json").stdout)
    assert as_json["exit_code"] == 2 and as_json["hint"] == "known: nightly-sync, leaderboard-audit"
